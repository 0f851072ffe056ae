#pragma once
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlflow/ir/dtype.h"

namespace rlflow::ir {

// An immutable dense buffer. Graphs share weights through TensorPtr, so copying a graph
// never copies weight data. The content hash is computed once at construction.
class Tensor {
 public:
  Tensor(TensorType type, std::vector<std::byte> bytes);
  // Adopts a byte buffer owned elsewhere (e.g. a protobuf string moved out of a TensorProto),
  // so large weights are never copied on import.
  Tensor(TensorType type, std::shared_ptr<const std::string> bytes);

  template <class T>
  static std::shared_ptr<const Tensor> from_vector(DType dtype, Shape shape, const std::vector<T>& v) {
    std::vector<std::byte> b(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
    return std::make_shared<const Tensor>(TensorType{dtype, std::move(shape)}, std::move(b));
  }
  // Numbers converted to any dtype (half types round to nearest even, integers truncate).
  static std::shared_ptr<const Tensor> from_doubles(DType dtype, Shape shape, const std::vector<double>& v);
  static std::shared_ptr<const Tensor> scalar_f32(float v) { return from_vector<float>(DType::kFloat32, {}, {v}); }
  static std::shared_ptr<const Tensor> i64(const std::vector<int64_t>& v) {
    return from_vector<int64_t>(DType::kInt64, {static_cast<int64_t>(v.size())}, v);
  }

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t numel() const { return type_.numel(); }
  size_t nbytes() const { return size_; }
  const std::byte* raw() const { return data_; }
  uint64_t content_hash() const { return hash_; }

  template <class T>
  std::span<const T> data() const {
    return {reinterpret_cast<const T*>(data_), size_ / sizeof(T)};
  }
  // Contents converted to int64 (for shape-like tensors; floats truncate).
  std::vector<int64_t> as_int64() const;
  // Any numeric contents converted to double.
  std::vector<double> as_double() const;

  bool same_content(const Tensor& o) const;

 private:
  void init();

  TensorType type_;
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  uint64_t hash_ = 0;
};

using TensorPtr = std::shared_ptr<const Tensor>;

}  // namespace rlflow::ir
