#include "rlflow/ir/dtype.h"

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

namespace rlflow::ir {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat64:
    case DType::kInt64: return 8;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kBool: return "bool";
  }
  return "?";
}

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat64 || is_half(t); }
bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

float half_to_float(uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  return sign * std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u);  // inf, NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // rounds past the largest half (65504)
  if (x < 0x38800000u) {
    // Below the smallest normal half (2^-14): a multiple of 2^-24, rounded to nearest even.
    // A result of 1024 is exactly the smallest normal's encoding.
    return sign | static_cast<uint16_t>(std::nearbyint(std::bit_cast<float>(x) * 16777216.0f));
  }
  // Re-bias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  x += 0xc8000fffu + ((x >> 13) & 1u);
  return sign | static_cast<uint16_t>(x >> 13);
}

float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bfloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

}  // namespace rlflow::ir
