#include "rlflow/cost/cost_model.h"

#include <cmath>
#include <optional>

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

namespace {

ir::OpKind activation_kind(ir::Activation a) {
  switch (a) {
    case ir::Activation::kRelu: return ir::OpKind::kRelu;
    case ir::Activation::kSigmoid: return ir::OpKind::kSigmoid;
    case ir::Activation::kTanh: return ir::OpKind::kTanh;
    case ir::Activation::kNone: break;
  }
  return ir::OpKind::kOpaque;
}

// The graph whose nodes are priced: `g` with each Conv's activation where the runtime runs it. A
// Conv followed by an activation the runtime folds into it (`fused`) carries that activation; a
// Conv carrying one the runtime does not fuse loses it, and the activation becomes a node of its own
// appended after the graph's (origin: the Conv it came from), as the written file has it. Node ids
// below g.size() are g's. Empty when nothing changes.
struct PricedGraph {
  std::optional<ir::Graph> graph;
  std::vector<ir::NodeId> origin;  // of each appended node
};

PricedGraph priced_graph(const ir::Graph& g, const CostModel& model, const std::vector<bool>& constant,
                         const std::vector<bool>& fused) {
  PricedGraph out;
  auto copy = [&]() -> ir::Graph& {
    if (!out.graph) out.graph.emplace(g);
    return *out.graph;
  };
  for (size_t i = 0; i < g.size(); ++i) {
    const auto id = static_cast<ir::NodeId>(i);
    const auto& n = g.node(id);
    if (constant[i]) continue;
    if (n.kind == ir::OpKind::kConv) {
      const auto act = std::get<ir::ConvParams>(n.params).act;
      if (act == ir::Activation::kNone || model.fuses_conv_activation(act)) continue;
      auto& c = copy();
      std::get<ir::ConvParams>(c.mutable_node(id).params).act = ir::Activation::kNone;
      ir::Node a;
      a.kind = activation_kind(act);
      a.inputs = {ir::ValueRef{id, 0}};
      a.outputs = {n.outputs.at(0)};
      c.add(std::move(a));
      out.origin.push_back(id);
      continue;
    }
    if (fused.empty() || !fused[i] || n.inputs.empty()) continue;
    const auto p = n.inputs[0].node;
    const auto& conv = g.node(p);
    if (conv.kind != ir::OpKind::kConv || std::get<ir::ConvParams>(conv.params).act != ir::Activation::kNone) continue;
    for (auto a : {ir::Activation::kRelu, ir::Activation::kSigmoid, ir::Activation::kTanh})
      if (n.kind == activation_kind(a) && model.fuses_conv_activation(a))
        std::get<ir::ConvParams>(copy().mutable_node(p).params).act = a;
  }
  return out;
}

}  // namespace

Expected<std::vector<NodeCost>> node_costs(const ir::Graph& g, CostModel& model, const OpPricer& price, const CostProgress& progress) {
  const auto constant = constant_nodes(g);
  const auto host = host_shape_nodes(g, constant);
  const auto fused = model.runtime_fused(g, constant);
  const auto priced = priced_graph(g, model, constant, fused);
  const ir::Graph& pg = priced.graph ? *priced.graph : g;
  std::vector<bool> pconstant = constant;
  pconstant.resize(pg.size(), false);
  std::vector<NodeCost> out;
  out.reserve(g.num_ops());
  std::vector<size_t> slot(priced.origin.empty() ? 0 : g.size(), 0);  // a node's place in out
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
      auto ms = price(pg, id, pconstant);
      if (!ms) return ms.error().with_context(ir::node_label(g, id));
      if (!std::isfinite(*ms) || *ms < 0)
        return Error::internal(ir::node_label(g, id) + ": cost model " + model.name() + " returned " + std::to_string(*ms) + " ms");
      c.ms = *ms;
    }
    if (!slot.empty()) slot[i] = out.size();
    out.push_back(c);
    if (progress) progress(out.size(), total);
  }
  // A Conv's activation that runs as a kernel of its own is part of the Conv's cost.
  for (size_t k = 0; k < priced.origin.size(); ++k) {
    const auto id = static_cast<ir::NodeId>(g.size() + k);
    auto ms = price(pg, id, pconstant);
    if (!ms) return ms.error().with_context(ir::node_label(g, priced.origin[k]));
    if (!std::isfinite(*ms) || *ms < 0)
      return Error::internal(ir::node_label(g, priced.origin[k]) + ": cost model " + model.name() + " returned " + std::to_string(*ms) + " ms");
    out[slot[static_cast<size_t>(priced.origin[k])]].ms += *ms;
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
