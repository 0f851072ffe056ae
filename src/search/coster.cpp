#include "coster.h"

namespace rlflow::search::detail {

Expected<double> Coster::cost(const ir::Graph& g) {
  // Same accounting as cost::graph_cost (folded nodes free, opaque nodes fixed), with a memo.
  const auto constant = cost::constant_nodes(g);
  double total = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    if (n.kind == ir::OpKind::kInput || n.kind == ir::OpKind::kWeight || constant[i]) continue;
    if (n.kind == ir::OpKind::kOpaque) {
      total += cost::kOpaqueCostMs;
      continue;
    }
    auto sig = cost::OpSignature::of(g, static_cast<ir::NodeId>(i), constant);
    const uint64_t key = sig.hash();
    auto it = memo_.find(key);
    if (it == memo_.end()) {
      auto c = model_.op_cost(sig);
      if (!c) return c.error();
      it = memo_.emplace(key, *c).first;
    }
    total += it->second;
  }
  return total;
}

int64_t approx_graph_bytes(const ir::Graph& g) {
  // Heap blocks carry ~16 bytes of allocator overhead each; parameters hold a few small vectors.
  constexpr int64_t kBlock = 16, kParams = 160;
  int64_t bytes = static_cast<int64_t>(sizeof(ir::Graph));
  for (const auto& n : g.nodes()) {
    bytes += static_cast<int64_t>(sizeof(ir::Node)) + kParams;
    bytes += static_cast<int64_t>(n.inputs.size() * sizeof(ir::ValueRef)) + kBlock;
    bytes += static_cast<int64_t>(n.outputs.size() * sizeof(ir::TensorType)) + kBlock;
    for (const auto& t : n.outputs) bytes += static_cast<int64_t>(t.shape.size() * 8) + kBlock;
    if (n.name.size() > 15) bytes += static_cast<int64_t>(n.name.size()) + kBlock;
    for (const auto& s : n.output_names) bytes += static_cast<int64_t>(sizeof(std::string) + (s.size() > 15 ? s.size() + kBlock : 0));
  }
  return bytes;
}

}  // namespace rlflow::search::detail
