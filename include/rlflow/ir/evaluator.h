#pragma once
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::ir {

// Computes one node's outputs from concrete input tensors. The reference executor implements
// it; modules below exec (onnx, rules) receive one from their caller instead of including torch.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual Expected<std::vector<TensorPtr>> evaluate(const Node& node, const std::vector<TensorPtr>& inputs) const = 0;
  // Whether evaluate() implements this node. Opaque nodes only where an evaluator says so.
  virtual bool can_evaluate(const Node& node) const { return node.kind != OpKind::kOpaque; }
};

// Opaque nodes fold only while their outputs are no larger than this or than their inputs, so a
// weight-only Expand or Tile does not bloat the written file.
inline constexpr size_t kMaxFoldGrowthBytes = size_t{1} << 20;
// A transform of a weight this large (a Transpose of a tied embedding) is not folded while another
// node still reads the weight itself: folding would write the weight twice.
inline constexpr size_t kNoDuplicateBytes = size_t{64} << 10;

// Materialises a Constant node's tensor (no evaluator needed).
TensorPtr materialize_constant(const ConstantParams& p);

// Replaces every node whose inputs are all constant by a Weight node holding its value (opaque
// nodes where the evaluator runs them, within kMaxFoldGrowthBytes), then drops dead nodes. Weight-only subgraphs thus become initializers.
Expected<Graph> fold_constants(const Graph& g, const Evaluator& eval);

}  // namespace rlflow::ir
