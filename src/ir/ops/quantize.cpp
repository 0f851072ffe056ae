// The records of the quantization ops (ir/op_def.h). A quantized model's Q/DQ ops are what the
// runtime builds its integer kernels from, so they are never folded into float weights and rules do
// not rewrite across them (ir::is_quantization_op, ir::quantization_boundary).
#include <string>

#include "rlflow/ir/op_def.h"

namespace rlflow::ir {

namespace {

// ONNX's TensorProto numbers of the types a DequantizeLinear may write (output_dtype, opset 23).
std::optional<DType> dq_float_type(int64_t onnx) {
  switch (onnx) {
    case 1: return DType::kFloat32;
    case 10: return DType::kFloat16;
    case 16: return DType::kBFloat16;
    default: return std::nullopt;
  }
}

Error dq_error(const std::string& why) { return Error::bad_input("DequantizeLinear: " + why); }

// y = (x - zero_point) * scale: x's shape, the scale's type. The scale (and the zero point, of x's
// type) is a scalar or a 1-element tensor (per tensor), or 1-D along `axis` (per axis).
Expected<std::vector<TensorType>> infer_dequantize(const OpParams& params, const std::vector<TensorType>& in) {
  const auto& p = std::get<DequantizeParams>(params);
  const TensorType &x = in[0], &scale = in[1];
  if (!is_float(scale.dtype)) return dq_error("the scale must be a float tensor, not " + std::string(dtype_name(scale.dtype)));
  if (is_float(x.dtype)) return dq_error("x must be an integer tensor, not " + std::string(dtype_name(x.dtype)));
  if (p.output_dtype != 0 && dq_float_type(p.output_dtype) != scale.dtype)
    return dq_error("output_dtype " + std::to_string(p.output_dtype) + " is not the scale's type");
  const bool per_tensor = scale.numel() == 1 && scale.rank() <= 1;  // a scalar or one element
  if (in.size() == 3 && !(in[2].dtype == x.dtype && (in[2].shape == scale.shape || (per_tensor && in[2].numel() == 1 && in[2].rank() <= 1))))
    return dq_error("the zero point must have x's type and the scale's shape");
  if (!per_tensor) {  // per axis
    const int64_t r = x.rank(), axis = p.axis < 0 ? p.axis + r : p.axis;
    if (scale.rank() != 1 || axis < 0 || axis >= r || scale.shape[0] != x.shape[static_cast<size_t>(axis)])
      return dq_error("a per-axis scale must be 1-D with x's extent along axis " + std::to_string(p.axis));
  }
  return std::vector<TensorType>{{scale.dtype, x.shape}};
}

// A subtraction and a multiply per element.
double dequantize_flops(const OpParams&, const std::vector<TensorType>& in, const std::vector<TensorType>& out) {
  return 2.0 * static_cast<double>(out[0].numel());
}

// The executor's kernel computes per tensor and per axis; blocked scales (opset 21's block_size)
// and the 4-bit and float8 types are kept opaque.
Status dequantize_models(const OpParams& params) {
  const auto& p = std::get<DequantizeParams>(params);
  if (p.block_size != 0) return Error::unsupported("DequantizeLinear with block_size " + std::to_string(p.block_size));
  if (p.output_dtype != 0 && !dq_float_type(p.output_dtype))
    return Error::unsupported("DequantizeLinear with output_dtype " + std::to_string(p.output_dtype));
  return {};
}

}  // namespace

extern const OpDef kDequantizeLinearDef;
const OpDef kDequantizeLinearDef{.min_inputs = 2, .max_inputs = 3,  // x, x_scale[, x_zero_point]
                                 .infer = infer_dequantize,
                                 .flops = dequantize_flops,
                                 .models = dequantize_models};

}  // namespace rlflow::ir
