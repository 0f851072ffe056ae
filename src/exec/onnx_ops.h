#pragma once
// Internal to exec: kernels for ONNX ops the IR carries verbatim (opaque nodes), keyed by ONNX name.
// One table entry per op, in onnx_ops.cpp: adding an executable ONNX op is one entry there.
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::exec::detail {

// One call of an ONNX op: inputs by their ONNX slot (absent optional inputs are empty).
struct OnnxCall {
  const ir::Attributes& a;
  std::vector<std::optional<at::Tensor>> in;
  int64_t opset = 0;
  size_t num_outputs = 1;  // the node's ONNX output count (Split without sizes divides by it)
  bool has(size_t k) const { return k < in.size() && in[k].has_value(); }
  const at::Tensor& x(size_t k) const;  // a required input; throws when absent
};

// True when the table has a kernel for this opaque node and its attributes are ones it implements.
bool onnx_op_supported(const ir::OpaqueParams& p);
// Runs an opaque node. Outputs are converted to the node's declared dtypes where it has them.
Expected<std::vector<at::Tensor>> run_onnx_op(const ir::Node& n, const std::vector<at::Tensor>& in);

}  // namespace rlflow::exec::detail
