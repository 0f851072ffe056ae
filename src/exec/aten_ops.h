#pragma once
// Internal to exec: ATen kernels for IR nodes.
#include <ATen/ATen.h>

#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::exec::detail {

at::Tensor to_aten(const ir::Tensor& t, bool promote_double);
ir::TensorPtr from_aten(const at::Tensor& t);
at::ScalarType to_scalar_type(ir::DType d);

Expected<std::vector<at::Tensor>> run_op(const ir::Node& n, const std::vector<at::Tensor>& in, bool promote_double);

}  // namespace rlflow::exec::detail
