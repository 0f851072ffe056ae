#include "rlflow/cost/memo.h"

namespace rlflow::cost {

Expected<double> MemoCost::node_costs(const ir::Graph& g, std::vector<double>& per_node) {
  const auto constant = constant_nodes(g);
  const auto fused = model_.runtime_fused(g, constant);
  per_node.assign(g.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    if (n.kind == ir::OpKind::kInput || n.kind == ir::OpKind::kWeight || constant[i]) continue;
    if (!fused.empty() && fused[i] && n.kind != ir::OpKind::kOpaque) continue;
    double c = kOpaqueCostMs;
    if (n.kind != ir::OpKind::kOpaque) {
      auto sig = OpSignature::of(g, static_cast<ir::NodeId>(i), constant);
      const uint64_t key = sig.hash();
      auto it = memo_.find(key);
      if (it == memo_.end()) {
        auto m = model_.op_cost(sig);
        if (!m) return m.error();
        it = memo_.emplace(key, *m).first;
      }
      c = it->second;
    }
    per_node[i] = c;
    total += c;
  }
  return total;
}

Expected<double> MemoCost::cost(const ir::Graph& g) {
  std::vector<double> per_node;
  return node_costs(g, per_node);
}

}  // namespace rlflow::cost
