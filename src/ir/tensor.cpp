#include "rlflow/ir/tensor.h"

#include <cstring>
#include <stdexcept>

#include "rlflow/util/hash.h"

namespace rlflow::ir {

Tensor::Tensor(TensorType type, std::vector<std::byte> bytes) : type_(std::move(type)) {
  auto holder = std::make_shared<const std::vector<std::byte>>(std::move(bytes));
  data_ = holder->data();
  size_ = holder->size();
  owner_ = std::move(holder);
  init();
}

Tensor::Tensor(TensorType type, std::shared_ptr<const std::string> bytes) : type_(std::move(type)) {
  data_ = reinterpret_cast<const std::byte*>(bytes->data());
  size_ = bytes->size();
  owner_ = std::move(bytes);
  init();
}

void Tensor::init() {
  if (static_cast<int64_t>(size_) != type_.numel() * static_cast<int64_t>(dtype_size(type_.dtype)))
    throw std::invalid_argument("tensor byte size does not match its type " + type_.str());
  hash_ = Hasher().add(static_cast<uint64_t>(type_.dtype)).add(type_.shape).add(Hasher::bytes(data_, size_)).digest();
}

namespace {
template <class Out, class F>
std::vector<Out> convert(const Tensor& t, F&& cast) {
  std::vector<Out> out;
  out.reserve(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kFloat32: for (auto v : t.data<float>()) out.push_back(cast(v)); break;
    case DType::kFloat64: for (auto v : t.data<double>()) out.push_back(cast(v)); break;
    case DType::kInt64: for (auto v : t.data<int64_t>()) out.push_back(cast(v)); break;
    case DType::kInt32: for (auto v : t.data<int32_t>()) out.push_back(cast(v)); break;
    case DType::kInt8: for (auto v : t.data<int8_t>()) out.push_back(cast(v)); break;
    case DType::kUInt8:
    case DType::kBool: for (auto v : t.data<uint8_t>()) out.push_back(cast(v)); break;
    case DType::kFloat16: for (auto v : t.data<uint16_t>()) out.push_back(cast(half_to_float(v))); break;
    case DType::kBFloat16: for (auto v : t.data<uint16_t>()) out.push_back(cast(bfloat16_to_float(v))); break;
  }
  return out;
}
}  // namespace

std::vector<int64_t> Tensor::as_int64() const {
  return convert<int64_t>(*this, [](auto v) { return static_cast<int64_t>(v); });
}

std::vector<double> Tensor::as_double() const {
  return convert<double>(*this, [](auto v) { return static_cast<double>(v); });
}

TensorPtr Tensor::from_doubles(DType dtype, Shape shape, const std::vector<double>& v) {
  auto narrow = [&]<class T>(auto&& f) {
    std::vector<T> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = f(v[i]);
    return from_vector<T>(dtype, std::move(shape), out);
  };
  switch (dtype) {
    case DType::kFloat32: return narrow.operator()<float>([](double x) { return static_cast<float>(x); });
    case DType::kFloat64: return from_vector<double>(dtype, std::move(shape), v);
    case DType::kFloat16: return narrow.operator()<uint16_t>([](double x) { return float_to_half(static_cast<float>(x)); });
    case DType::kBFloat16: return narrow.operator()<uint16_t>([](double x) { return float_to_bfloat16(static_cast<float>(x)); });
    case DType::kInt64: return narrow.operator()<int64_t>([](double x) { return static_cast<int64_t>(x); });
    case DType::kInt32: return narrow.operator()<int32_t>([](double x) { return static_cast<int32_t>(x); });
    case DType::kInt8: return narrow.operator()<int8_t>([](double x) { return static_cast<int8_t>(x); });
    case DType::kUInt8: return narrow.operator()<uint8_t>([](double x) { return static_cast<uint8_t>(x); });
    case DType::kBool: return narrow.operator()<uint8_t>([](double x) { return static_cast<uint8_t>(x != 0.0); });
  }
  throw std::invalid_argument("unknown dtype");
}

bool Tensor::same_content(const Tensor& o) const {
  return hash_ == o.hash_ && type_ == o.type_ && size_ == o.size_ && (size_ == 0 || std::memcmp(data_, o.data_, size_) == 0);
}

}  // namespace rlflow::ir
