#pragma once
// Internal to exec: ATen kernels for IR nodes.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::exec::detail {

// Half-typed tensors (float16, bfloat16) become float32 (float64 when promoting): the executor
// computes them wide and rounds every half-typed node output with round_to, as a half kernel
// that accumulates in float32 and stores 16 bits does.
at::Tensor to_aten(const ir::Tensor& t, bool promote_double);
// x rounded to the stored dtype and back, when that dtype is a half type; x unchanged otherwise.
at::Tensor round_to(const at::Tensor& x, ir::DType stored);
ir::TensorPtr from_aten(const at::Tensor& t);
at::ScalarType to_scalar_type(ir::DType d);

// Padding by index along every axis, pads as ONNX orders them (begins, then ends): "reflect" (the
// edge element not repeated), "edge" or "wrap".
at::Tensor index_pad(const at::Tensor& x, const std::vector<int64_t>& pads, const std::string& mode);

Expected<std::vector<at::Tensor>> run_op(const ir::Node& n, const std::vector<at::Tensor>& in, bool promote_double);

}  // namespace rlflow::exec::detail
