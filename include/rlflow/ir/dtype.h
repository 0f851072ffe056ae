#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlflow::ir {

// New kinds go at the end: the numeric values are hashed into cost signatures.
enum class DType : uint8_t { kFloat32, kFloat64, kFloat16, kInt64, kInt32, kInt8, kUInt8, kBool, kBFloat16 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
bool is_float(DType t);
// float16 or bfloat16: stored in 16 bits, computed by the reference executor in float32 with the
// result of every node rounded back to 16 bits.
bool is_half(DType t);

// IEEE binary16 and bfloat16 conversions, round to nearest even (NaN stays NaN, overflow is inf).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

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
