#include "rlflow/cost/memo.h"

namespace rlflow::cost {

Expected<double> MemoCost::node_costs(const ir::Graph& g, std::vector<double>& per_node) {
  auto costs = cost::node_costs(g, model_, [this](const ir::Graph& gr, ir::NodeId id, const std::vector<bool>& constant) -> Expected<double> {
    const uint64_t key = OpSignature::hash_of(gr, id, constant);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    auto m = model_.op_cost(OpSignature::of(gr, id, constant));
    if (m) memo_.emplace(key, *m);
    return m;
  });
  if (!costs) return costs.error();
  per_node.assign(g.size(), 0.0);
  double total = 0;
  for (const auto& c : *costs) {
    per_node[static_cast<size_t>(c.node)] = c.ms;
    total += c.ms;
  }
  return total;
}

Expected<double> MemoCost::cost(const ir::Graph& g) {
  std::vector<double> per_node;
  return node_costs(g, per_node);
}

}  // namespace rlflow::cost
