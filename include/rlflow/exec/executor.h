#pragma once
// The reference executor: runs any graph of supported ops on the CPU through libtorch (ATen).
// It is the oracle for rule verification and for checking an optimised graph against its
// original. This header does not include torch.
#include <vector>

#include "rlflow/ir/evaluator.h"
#include "rlflow/ir/graph.h"

namespace rlflow::exec {

class Executor : public ir::Evaluator {
 public:
  // compute = kFloat64 promotes every float32 tensor to float64 (for exact-ish rule checks).
  explicit Executor(ir::DType compute = ir::DType::kFloat32, int num_threads = 1);

  // Inputs in the order of g.inputs(); outputs in the order of g.outputs().
  Expected<std::vector<ir::TensorPtr>> run(const ir::Graph& g, const std::vector<ir::TensorPtr>& inputs) const;

  Expected<std::vector<ir::TensorPtr>> evaluate(const ir::Node& node, const std::vector<ir::TensorPtr>& inputs) const override;

  bool can_evaluate(const ir::Node& node) const override { return supports(node); }

  // True when the executor implements this node: every IR op, and the opaque ONNX ops of its table.
  static bool supports(const ir::Node& node);

 private:
  ir::DType compute_;
};

}  // namespace rlflow::exec
