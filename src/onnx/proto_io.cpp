#include "proto_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace rlflow::onnxio {

using ir::DType;
namespace fs = std::filesystem;

Expected<DType> dtype_from_onnx(int32_t t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::kFloat32;
    case onnx::TensorProto::DOUBLE: return DType::kFloat64;
    case onnx::TensorProto::FLOAT16: return DType::kFloat16;
    case onnx::TensorProto::BFLOAT16: return DType::kBFloat16;
    case onnx::TensorProto::INT64: return DType::kInt64;
    case onnx::TensorProto::INT32: return DType::kInt32;
    case onnx::TensorProto::INT8: return DType::kInt8;
    case onnx::TensorProto::UINT8: return DType::kUInt8;
    case onnx::TensorProto::BOOL: return DType::kBool;
    default: break;
  }
  // Types newer than the onnx.proto rlflow builds against, named as the ONNX spec names them.
  static const std::pair<int32_t, const char*> kNewer[] = {{17, "FLOAT8E4M3FN"}, {18, "FLOAT8E4M3FNUZ"}, {19, "FLOAT8E5M2"},
                                                          {20, "FLOAT8E5M2FNUZ"}, {21, "UINT4"}, {22, "INT4"}, {23, "FLOAT4E2M1"}};
  std::string name = onnx::TensorProto_DataType_IsValid(t) ? onnx::TensorProto_DataType_Name(t) : std::to_string(t);
  for (const auto& [code, text] : kNewer)
    if (code == t && !onnx::TensorProto_DataType_IsValid(t)) name = text;
  return Error::unsupported(what + " has unsupported dtype " + name);
}

int32_t dtype_to_onnx(DType t) {
  switch (t) {
    case DType::kFloat32: return onnx::TensorProto::FLOAT;
    case DType::kFloat64: return onnx::TensorProto::DOUBLE;
    case DType::kFloat16: return onnx::TensorProto::FLOAT16;
    case DType::kBFloat16: return onnx::TensorProto::BFLOAT16;
    case DType::kInt64: return onnx::TensorProto::INT64;
    case DType::kInt32: return onnx::TensorProto::INT32;
    case DType::kInt8: return onnx::TensorProto::INT8;
    case DType::kUInt8: return onnx::TensorProto::UINT8;
    case DType::kBool: return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

namespace {

template <class Dst, class Src>
std::vector<std::byte> pack(const Src& field, size_t n) {
  std::vector<std::byte> out(n * sizeof(Dst));
  auto* p = reinterpret_cast<Dst*>(out.data());
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<Dst>(field.Get(static_cast<int>(i)));
  return out;
}

Expected<std::vector<std::byte>> read_external(const onnx::TensorProto& t, const std::string& base_dir, size_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  // Offsets and lengths are text in the file: parsed with checks, never with throwing conversions.
  auto count = [&](const std::string& key, const std::string& text, int64_t* out) -> Status {
    const char* end = text.data() + text.size();
    auto [p, ec] = std::from_chars(text.data(), end, *out);
    if (ec != std::errc() || p != end || *out < 0)
      return Error::bad_input("tensor '" + t.name() + "' has an invalid external data " + key + " '" + text + "'");
    return {};
  };
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") RLFLOW_TRY_STATUS(count("offset", kv.value(), &offset));
    else if (kv.key() == "length") RLFLOW_TRY_STATUS(count("length", kv.value(), &length));
  }
  if (location.empty() || location.find("..") != std::string::npos || fs::path(location).is_absolute())
    return Error::bad_input("tensor '" + t.name() + "' has an invalid external data location");
  const auto path = fs::path(base_dir) / location;
  // The file must be a regular file inside the model's folder once every symlink is resolved, as
  // onnxruntime requires: a link to /etc/passwd or /proc/self/environ beside the model is refused,
  // and so is a FIFO or a device, whose read could block or never end. Its size is checked before
  // anything is allocated.
  std::error_code ec;
  const auto real = fs::canonical(path, ec);
  const auto dir = fs::canonical(base_dir.empty() ? fs::path(".") : fs::path(base_dir), ec);
  if (real.empty() || dir.empty())
    return Error::bad_input("cannot open external data file " + path.string() + " for tensor '" + t.name() + "'");
  auto [d, r] = std::mismatch(dir.begin(), dir.end(), real.begin(), real.end());
  if (d != dir.end())
    return Error::bad_input("external data file " + path.string() + " of tensor '" + t.name() + "' resolves to " + real.string() +
                            ", outside the model's folder " + dir.string());
  if (!fs::is_regular_file(real, ec))
    return Error::bad_input("external data file " + path.string() + " of tensor '" + t.name() + "' is not a regular file");
  const auto file_size = fs::file_size(real, ec);
  if (ec || static_cast<uint64_t>(offset) > file_size || want > file_size - static_cast<uint64_t>(offset))
    return Error::bad_input("external data file " + path.string() + " is too short for tensor '" + t.name() + "'");
  std::ifstream f(real, std::ios::binary);
  if (!f) return Error::bad_input("cannot open external data file " + path.string() + " for tensor '" + t.name() + "'");
  if (length >= 0 && static_cast<size_t>(length) != want)
    return Error::bad_input("external data of tensor '" + t.name() + "' has the wrong length");
  std::vector<std::byte> out(want);
  f.seekg(offset);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(want));
  if (static_cast<size_t>(f.gcount()) != want)
    return Error::bad_input("external data file " + path.string() + " is too short for tensor '" + t.name() + "'");
  return out;
}

// Dimensions with the element count bounded, so size arithmetic cannot overflow.
Expected<ir::Shape> checked_dims(const onnx::TensorProto& t) {
  ir::Shape shape(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return Error::bad_input("tensor '" + t.name() + "' has a negative dimension");
    if (d > (int64_t{1} << 40) || (d > 0 && n > (int64_t{1} << 40) / d))
      return Error::bad_input("tensor '" + t.name() + "' has an impossible size " + ir::shape_str(shape));
    n *= d;
  }
  return shape;
}

}  // namespace

Expected<ir::TensorPtr> tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir) {
  auto dt = dtype_from_onnx(t.data_type(), "tensor '" + t.name() + "'");
  if (!dt) return dt.error();
  auto dims = checked_dims(t);
  if (!dims) return dims.error();
  const ir::Shape& shape = *dims;
  const size_t n = static_cast<size_t>(ir::numel(shape));
  const size_t want = n * ir::dtype_size(*dt);
  std::vector<std::byte> bytes;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto r = read_external(t, base_dir, want);
    if (!r) return r.error();
    bytes = std::move(*r);
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() != want)
      return Error::bad_input("tensor '" + t.name() + "' has " + std::to_string(t.raw_data().size()) +
                              " bytes of data, expected " + std::to_string(want));
    bytes.resize(want);
    if (want) std::memcpy(bytes.data(), t.raw_data().data(), want);
  } else {
    size_t have = 0;
    switch (*dt) {
      case DType::kFloat32: have = static_cast<size_t>(t.float_data_size()); if (have == n) bytes = pack<float>(t.float_data(), n); break;
      case DType::kFloat64: have = static_cast<size_t>(t.double_data_size()); if (have == n) bytes = pack<double>(t.double_data(), n); break;
      case DType::kInt64: have = static_cast<size_t>(t.int64_data_size()); if (have == n) bytes = pack<int64_t>(t.int64_data(), n); break;
      case DType::kInt32: have = static_cast<size_t>(t.int32_data_size()); if (have == n) bytes = pack<int32_t>(t.int32_data(), n); break;
      case DType::kInt8: have = static_cast<size_t>(t.int32_data_size()); if (have == n) bytes = pack<int8_t>(t.int32_data(), n); break;
      case DType::kUInt8:
      case DType::kBool: have = static_cast<size_t>(t.int32_data_size()); if (have == n) bytes = pack<uint8_t>(t.int32_data(), n); break;
      case DType::kFloat16:
      case DType::kBFloat16: have = static_cast<size_t>(t.int32_data_size()); if (have == n) bytes = pack<uint16_t>(t.int32_data(), n); break;
    }
    if (have != n)
      return Error::bad_input("tensor '" + t.name() + "' has " + std::to_string(have) + " values, expected " +
                              std::to_string(n));
  }
  // A bool is any non-zero byte, as onnxruntime reads it: stored as 1, so folding a byte of 7 gives
  // 1.0, not 7.0.
  if (*dt == DType::kBool)
    for (auto& b : bytes) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  return std::make_shared<const ir::Tensor>(ir::TensorType{*dt, shape}, std::move(bytes));
}

Expected<ir::TensorPtr> take_tensor_from_proto(onnx::TensorProto* t, const std::string& base_dir) {
  if (t->data_location() == onnx::TensorProto::EXTERNAL || !t->has_raw_data() || t->data_type() == onnx::TensorProto::BOOL)
    return tensor_from_proto(*t, base_dir);
  auto dt = dtype_from_onnx(t->data_type(), "tensor '" + t->name() + "'");
  if (!dt) return dt.error();
  auto dims = checked_dims(*t);
  if (!dims) return dims.error();
  const ir::Shape& shape = *dims;
  const size_t want = static_cast<size_t>(ir::numel(shape)) * ir::dtype_size(*dt);
  if (t->raw_data().size() != want)
    return Error::bad_input("tensor '" + t->name() + "' has " + std::to_string(t->raw_data().size()) +
                            " bytes of data, expected " + std::to_string(want));
  std::shared_ptr<const std::string> bytes(t->release_raw_data());
  return std::make_shared<const ir::Tensor>(ir::TensorType{*dt, shape}, std::move(bytes));
}

void tensor_to_proto(const ir::Tensor& t, const std::string& name, onnx::TensorProto* out) {
  out->set_name(name);
  out->set_data_type(dtype_to_onnx(t.dtype()));
  for (auto d : t.shape()) out->add_dims(d);
  out->set_raw_data(reinterpret_cast<const char*>(t.raw()), t.nbytes());
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t dflt) {
  auto* a = find_attr(n, name);
  return a ? a->i() : dflt;
}

double attr_float(const onnx::NodeProto& n, const std::string& name, double dflt) {
  auto* a = find_attr(n, name);
  return a ? static_cast<double>(a->f()) : dflt;
}

std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& dflt) {
  auto* a = find_attr(n, name);
  return a ? a->s() : dflt;
}

std::optional<std::vector<int64_t>> attr_ints(const onnx::NodeProto& n, const std::string& name) {
  auto* a = find_attr(n, name);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Expected<ir::AttributesPtr> attributes_from_proto(const onnx::NodeProto& n, const std::string& base_dir) {
  auto out = std::make_shared<ir::Attributes>();
  for (const auto& a : n.attribute()) {
    switch (a.type()) {
      case onnx::AttributeProto::INT: out->set(a.name(), a.i()); break;
      case onnx::AttributeProto::FLOAT: out->set(a.name(), static_cast<double>(a.f())); break;
      case onnx::AttributeProto::STRING: out->set(a.name(), a.s()); break;
      case onnx::AttributeProto::INTS: out->set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end())); break;
      case onnx::AttributeProto::FLOATS: out->set(a.name(), std::vector<double>(a.floats().begin(), a.floats().end())); break;
      case onnx::AttributeProto::STRINGS: out->set(a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end())); break;
      case onnx::AttributeProto::TENSOR: {
        auto t = tensor_from_proto(a.t(), base_dir);
        if (!t) return t.error();
        out->set(a.name(), *t);
        break;
      }
      default: break;  // graphs, sparse tensors, type protos: no kernel reads them (control flow is refused earlier)
    }
  }
  return ir::AttributesPtr(std::move(out));
}

}  // namespace rlflow::onnxio

#include "rlflow/onnx/model_io.h"

namespace rlflow::onnxio {

Expected<ir::TensorPtr> read_tensor_file(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  onnx::TensorProto t;
  if (!t.ParseFromString(*bytes)) return Error::bad_input(path + ": not a serialized TensorProto");
  auto dir = std::filesystem::path(path).parent_path().string();
  auto r = tensor_from_proto(t, dir.empty() ? "." : dir);
  if (!r) return r.error().with_context(path);
  return r;
}

}  // namespace rlflow::onnxio
