#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlflow::ir {

enum class DType : uint8_t { kFloat32, kFloat64, kFloat16, kInt64, kInt32, kInt8, kUInt8, kBool };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
bool is_float(DType t);

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);

// The type of one tensor in the graph: all shapes are static after import.
struct TensorType {
  DType dtype = DType::kFloat32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
  int64_t numel() const { return ir::numel(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  std::string str() const;
};

}  // namespace rlflow::ir
