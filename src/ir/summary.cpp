#include "rlflow/ir/summary.h"

#include <algorithm>

namespace rlflow::ir {

std::string op_display_name(const Node& n) {
  if (n.kind == OpKind::kOpaque) return std::get<OpaqueParams>(n.params).op_type;
  return std::string(op_name(n.kind));
}

double node_flops(const Graph& g, NodeId id) {
  const auto& n = g.node(id);
  if (n.kind == OpKind::kInput || n.kind == OpKind::kWeight || n.outputs.empty()) return 0;
  const double out = static_cast<double>(n.outputs[0].numel());
  switch (n.kind) {
    case OpKind::kConv: {
      const auto& w = g.type(n.inputs[1]).shape;
      double k = 1;
      for (size_t i = 1; i < w.size(); ++i) k *= static_cast<double>(w[i]);
      return 2.0 * out * k;
    }
    case OpKind::kMatMul: {
      const auto& a = g.type(n.inputs[0]).shape;
      return 2.0 * out * static_cast<double>(a.back());
    }
    case OpKind::kGemm: {
      const auto& a = g.type(n.inputs[0]).shape;
      const auto& p = std::get<GemmParams>(n.params);
      return 2.0 * out * static_cast<double>(p.trans_a ? a[0] : a[1]);
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: {
      double k = 1;
      for (auto v : std::get<PoolParams>(n.params).kernel) k *= static_cast<double>(v);
      return out * k;
    }
    case OpKind::kGlobalAveragePool:
    case OpKind::kReduceMean:
      return static_cast<double>(g.type(n.inputs[0]).numel());
    case OpKind::kSoftmax:
    case OpKind::kLayerNorm:
    case OpKind::kBatchNorm:
      return 5.0 * out;
    case OpKind::kTranspose: case OpKind::kReshape: case OpKind::kFlatten: case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: case OpKind::kConcat: case OpKind::kSplit: case OpKind::kSlice: case OpKind::kGather:
    case OpKind::kPad: case OpKind::kCast: case OpKind::kConstant: case OpKind::kOpaque:
      return 0;
    default:
      return out;
  }
}

GraphSummary summarize(const Graph& g) {
  GraphSummary s;
  s.num_parameters = g.num_parameters();
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<NodeId>(i));
    if (n.kind == OpKind::kInput || n.kind == OpKind::kWeight) continue;
    ++s.num_ops;
    s.op_counts[op_display_name(n)]++;
    s.flops += node_flops(g, static_cast<NodeId>(i));
    if (n.kind == OpKind::kOpaque) {
      auto t = op_display_name(n);
      if (std::find(s.opaque_ops.begin(), s.opaque_ops.end(), t) == s.opaque_ops.end()) s.opaque_ops.push_back(t);
    }
  }
  return s;
}

}  // namespace rlflow::ir
