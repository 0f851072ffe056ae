// The Matcher's shared pattern helpers and the builders fusions use (fusion.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "fusion.h"

namespace rlflow::ir::fusion {

bool near(double a, double b) { return std::abs(a - b) <= 1e-5 * std::max(std::abs(a), std::abs(b)); }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Matcher::Matcher(const Graph& g) : g_(g), uses_(g.consumers()), is_output_(g.size(), false), claimed_(g.size(), false) {
  for (const auto& o : g.outputs()) is_output_[static_cast<size_t>(o.value.node)] = true;
}

std::optional<double> Matcher::scalar(ValueRef v) const {
  const Node& n = node(v);
  if (n.kind != OpKind::kWeight || !n.value || n.value->numel() != 1 || !is_float(n.value->dtype())) return std::nullopt;
  return n.value->as_double()[0];
}

bool Matcher::interior(NodeId id, size_t readers) const {
  const auto i = static_cast<size_t>(id);
  return !is_output_[i] && !claimed_[i] && uses_[i].size() == readers && g_.node(id).outputs.size() == 1;
}

void Matcher::flatten(ValueRef v, bool root, Product* p) const {
  const Node& n = node(v);
  const bool open = root || interior(v.node);
  if (open && n.kind == OpKind::kMul && n.inputs.size() == 2) {
    p->interior.push_back(v.node);
    for (const auto& in : n.inputs) {
      if (auto c = scalar(in)) p->scale *= *c;
      else flatten(in, false, p);
    }
    return;
  }
  if (open && n.kind == OpKind::kDiv && n.inputs.size() == 2) {
    if (auto c = scalar(n.inputs[1]); c && *c != 0) {
      p->interior.push_back(v.node);
      p->scale /= *c;
      if (auto a = scalar(n.inputs[0])) p->scale *= *a;
      else flatten(n.inputs[0], false, p);
      return;
    }
  }
  p->factors.push_back(v);
}

Product Matcher::product(ValueRef v, bool root) const {
  Product p;
  flatten(v, root, &p);
  return p;
}

std::optional<std::pair<ValueRef, double>> Matcher::plus_constant(ValueRef v) const {
  const Node& n = node(v);
  if (n.kind != OpKind::kAdd || !interior(v.node)) return std::nullopt;
  for (int k = 0; k < 2; ++k)
    if (auto c = scalar(n.inputs[static_cast<size_t>(k)])) return std::make_pair(n.inputs[static_cast<size_t>(1 - k)], *c);
  return std::nullopt;
}

ValueRef Matcher::through_noop_cast(ValueRef v, std::vector<NodeId>* nodes) const {
  const Node& n = node(v);
  if (n.kind != OpKind::kCast || !interior(v.node) || g_.type(n.inputs[0]) != n.outputs[0]) return v;
  nodes->push_back(v.node);
  return n.inputs[0];
}

ValueRef Matcher::through_noop_casts(ValueRef v, std::vector<NodeId>* nodes) const {
  for (int i = 0; i < 4; ++i) {  // HF's eager attention casts the probabilities twice
    const ValueRef u = through_noop_cast(v, nodes);
    if (u == v) break;
    v = u;
  }
  return v;
}

bool Matcher::opaque_named(const Node& n, std::string_view type) const {
  if (n.kind != OpKind::kOpaque) return false;
  const auto& p = std::get<OpaqueParams>(n.params);
  return (p.domain.empty() || p.domain == "ai.onnx") && p.op_type == type;
}

bool Matcher::opaque_unary(const Node& n, std::string_view type) const {
  return opaque_named(n, type) && n.inputs.size() == 1 && n.outputs.size() == 1;
}

std::optional<int64_t> Matcher::trailing_axes(const AxesParams& a, int64_t rank) const {
  if (!a.keepdims || a.axes.empty() || a.axes.back() != rank - 1) return std::nullopt;
  const int64_t axis = a.axes.front();
  for (size_t i = 0; i < a.axes.size(); ++i)
    if (a.axes[i] != axis + static_cast<int64_t>(i)) return std::nullopt;
  return axis;
}

void Matcher::claim(const std::vector<NodeId>& nodes) {
  for (auto id : nodes) claimed_[static_cast<size_t>(id)] = true;
}

Node fused_node(const Node& root, OpKind kind, OpParams params, std::vector<ValueRef> inputs) {
  Node out;
  out.kind = kind;
  out.params = std::move(params);
  out.inputs = std::move(inputs);
  out.outputs = root.outputs;
  out.name = root.name;
  out.output_names = root.output_names;
  return out;
}

ValueRef add_node(Graph* g, OpKind kind, OpParams params, std::vector<ValueRef> inputs, TensorType out) {
  Node n;
  n.kind = kind;
  n.params = std::move(params);
  n.inputs = std::move(inputs);
  n.outputs = {std::move(out)};
  return {g->add(std::move(n)), 0};
}

ValueRef add_weight(Graph* g, TensorPtr value, const std::string& name) {
  Node w;
  w.kind = OpKind::kWeight;
  w.outputs = {{value->dtype(), value->shape()}};
  w.value = std::move(value);
  w.name = name;
  return {g->add(std::move(w)), 0};
}

ValueRef add_opaque(Graph* g, const char* op_type, std::vector<ValueRef> inputs, TensorType out) {
  OpaqueParams p;
  p.op_type = op_type;
  p.since_version = g->meta().opset("");
  for (size_t k = 0; k < inputs.size(); ++k) p.input_slots.push_back(static_cast<int64_t>(k));
  p.output_slots = {0};
  return add_node(g, OpKind::kOpaque, std::move(p), std::move(inputs), std::move(out));
}

}  // namespace rlflow::ir::fusion
