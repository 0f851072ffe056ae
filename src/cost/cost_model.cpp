#include "rlflow/cost/cost_model.h"

#include <cmath>

namespace rlflow::cost {

bool opaque_is_view(const ir::Node& n) {
  if (n.kind != ir::OpKind::kOpaque) return false;
  const auto& p = std::get<ir::OpaqueParams>(n.params);
  if (!(p.domain.empty() || p.domain == "ai.onnx")) return false;
  return p.op_type == "Reshape" || p.op_type == "Flatten" || p.op_type == "Squeeze" || p.op_type == "Unsqueeze" ||
         p.op_type == "Identity";
}

std::vector<bool> host_shape_nodes(const ir::Graph& g, const std::vector<bool>& constant) {
  std::vector<bool> host(g.size(), false);
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    if (n.kind == ir::OpKind::kInput || n.kind == ir::OpKind::kWeight || n.outputs.empty()) continue;
    bool tiny_ints = true;
    for (const auto& t : n.outputs)
      tiny_ints = tiny_ints && (t.dtype == ir::DType::kInt64 || t.dtype == ir::DType::kInt32) && t.numel() <= kHostShapeElements;
    if (!tiny_ints) continue;
    if (n.kind == ir::OpKind::kOpaque) {
      const auto& p = std::get<ir::OpaqueParams>(n.params);
      if ((p.domain.empty() || p.domain == "ai.onnx") && (p.op_type == "Shape" || p.op_type == "Size")) {
        host[i] = true;
        continue;
      }
    }
    bool from_shapes = !n.inputs.empty();
    for (const auto& in : n.inputs) from_shapes = from_shapes && (constant[static_cast<size_t>(in.node)] || host[static_cast<size_t>(in.node)]);
    host[i] = from_shapes;
  }
  return host;
}

Expected<std::vector<NodeCost>> node_costs(const ir::Graph& g, CostModel& model, const OpPricer& price, const CostProgress& progress) {
  const auto constant = constant_nodes(g);
  const auto host = host_shape_nodes(g, constant);
  const auto fused = model.runtime_fused(g, constant);
  std::vector<NodeCost> out;
  out.reserve(g.num_ops());
  const size_t total = g.num_ops();
  for (size_t i = 0; i < g.size(); ++i) {
    const auto id = static_cast<ir::NodeId>(i);
    const auto& n = g.node(id);
    const auto cls = ir::op_info(n.kind).cost;
    if (cls == ir::CostClass::kFree) continue;
    NodeCost c{id};
    if (host[i]) {
      c.opaque = cls == ir::CostClass::kOpaque;
      c.ms = 0.0;
    } else if (cls == ir::CostClass::kOpaque) {
      c.opaque = true;
      c.ms = opaque_is_view(n) ? 0.0 : kOpaqueCostMs;
    } else if (constant[i]) {
      c.folded = true;
    } else if (!fused.empty() && fused[i]) {
      c.fused = true;
    } else {
      auto ms = price(g, id, constant);
      if (!ms) return ms.error().with_context(ir::node_label(g, id));
      if (!std::isfinite(*ms) || *ms < 0)
        return Error::internal(ir::node_label(g, id) + ": cost model " + model.name() + " returned " + std::to_string(*ms) + " ms");
      c.ms = *ms;
    }
    out.push_back(c);
    if (progress) progress(out.size(), total);
  }
  return out;
}

Expected<std::vector<NodeCost>> node_costs(const ir::Graph& g, CostModel& model, const CostProgress& progress) {
  return node_costs(
      g, model,
      [&model](const ir::Graph& gr, ir::NodeId id, const std::vector<bool>& constant) {
        return model.op_cost(OpSignature::of(gr, id, constant));
      },
      progress);
}

Expected<double> graph_cost(const ir::Graph& g, CostModel& model) {
  auto costs = node_costs(g, model);
  if (!costs) return costs.error();
  double total = 0;
  for (const auto& c : *costs) total += c.ms;
  return total;
}

}  // namespace rlflow::cost
