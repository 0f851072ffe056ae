// Which nodes a runtime fuses into their producers by itself. Pricing them at zero is what makes
// a cost model answer to the runtime: onnxruntime already fuses Conv+Relu and folds
// BatchNormalization into Conv, so a rewrite doing the same earns nothing there.
#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

namespace {

using ir::OpKind;

bool is_fusable_activation(OpKind k) {
  return k == OpKind::kRelu || k == OpKind::kClip || k == OpKind::kSigmoid || k == OpKind::kTanh || k == OpKind::kHardSigmoid;
}

// A constant that broadcasts along the channel axis of an NCHW conv output: [C,1,1] or [1,C,1,1].
bool per_channel(const ir::TensorType& t, const ir::TensorType& conv_out) {
  if (conv_out.shape.size() < 3) return false;
  const int64_t c = conv_out.shape[1];
  const auto& s = t.shape;
  const size_t spatial = conv_out.shape.size() - 2;
  if (s.size() == spatial + 1) {
    if (s[0] != c) return false;
    for (size_t i = 1; i < s.size(); ++i)
      if (s[i] != 1) return false;
    return true;
  }
  if (s.size() == spatial + 2) {
    if (s[0] != 1 || s[1] != c) return false;
    for (size_t i = 2; i < s.size(); ++i)
      if (s[i] != 1) return false;
    return true;
  }
  return false;
}

}  // namespace

std::vector<bool> onnxruntime_fused_nodes(const ir::Graph& g, const std::vector<bool>& constant) {
  const size_t n = g.size();
  std::vector<bool> fused(n, false);
  std::vector<int32_t> readers(n, 0);  // uses of any output of each node
  for (const auto& node : g.nodes())
    for (const auto& in : node.inputs) ++readers[static_cast<size_t>(in.node)];
  std::vector<bool> is_output(n, false);
  for (const auto& o : g.outputs()) is_output[static_cast<size_t>(o.value.node)] = true;
  auto sole_reader = [&](ir::NodeId p) { return readers[static_cast<size_t>(p)] == 1 && !is_output[static_cast<size_t>(p)]; };
  // conv_tail[p]: p's output is a Conv's (without an activation), possibly through nodes already
  // folded into it; further BatchNorm/Add/Mul and one activation can still fold in.
  std::vector<bool> conv_tail(n, false);
  for (size_t i = 0; i < n; ++i) {
    const auto& node = g.node(static_cast<ir::NodeId>(i));
    if (node.kind == OpKind::kConv) {
      conv_tail[i] = std::get<ir::ConvParams>(node.params).act == ir::Activation::kNone;
      continue;
    }
    if (constant[i] || node.inputs.empty()) continue;
    const ir::NodeId p = node.inputs[0].node;
    const auto pi = static_cast<size_t>(p);
    if (is_fusable_activation(node.kind)) {
      const bool after_gemm = g.node(p).kind == OpKind::kGemm;
      fused[i] = (conv_tail[pi] || after_gemm) && sole_reader(p);
      continue;
    }
    if (node.kind == OpKind::kBatchNorm) {
      bool params_constant = true;
      for (size_t k = 1; k < node.inputs.size(); ++k) params_constant = params_constant && constant[static_cast<size_t>(node.inputs[k].node)];
      fused[i] = conv_tail[i] = params_constant && conv_tail[pi] && sole_reader(p);
      continue;
    }
    if ((node.kind == OpKind::kAdd || node.kind == OpKind::kMul) && node.inputs.size() == 2) {
      for (int side = 0; side < 2; ++side) {
        const auto a = node.inputs[side], b = node.inputs[1 - side];
        const auto ai = static_cast<size_t>(a.node);
        if (conv_tail[ai] && sole_reader(a.node) && constant[static_cast<size_t>(b.node)] && per_channel(g.type(b), g.type(a))) {
          fused[i] = conv_tail[i] = true;
          break;
        }
      }
    }
  }
  return fused;
}

}  // namespace rlflow::cost
