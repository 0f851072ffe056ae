#include "rlflow/ir/graph.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <unordered_map>

#include "rlflow/ir/shape_inference.h"
#include "rlflow/util/hash.h"

namespace rlflow::ir {

int64_t ModelMeta::opset(const std::string& d) const {
  for (const auto& [dom, v] : opsets)
    if (dom == d || (d.empty() && dom == "ai.onnx")) return v;
  return 0;
}

NodeId Graph::add(Node n) {
  const auto id = static_cast<NodeId>(nodes_.size());
  for (const auto& in : n.inputs)
    if (in.node < 0 || in.node >= id || in.index < 0 ||
        in.index >= static_cast<int32_t>(nodes_[static_cast<size_t>(in.node)].outputs.size()))
      throw std::invalid_argument("Graph::add: input refers to a missing or later node");
  nodes_.push_back(std::move(n));
  return id;
}

std::vector<NodeId> Graph::inputs() const {
  std::vector<NodeId> ids;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == OpKind::kInput) ids.push_back(static_cast<NodeId>(i));
  return ids;
}

std::vector<bool> constant_nodes(const Graph& g) {
  // Nodes are topologically ordered, so one forward pass decides every node.
  std::vector<bool> c(g.size(), false);
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<NodeId>(i));
    // A quantization op is what a runtime builds its integer kernels from: never a constant to fold.
    if (n.kind == OpKind::kInput || n.kind == OpKind::kOpaque || is_quantization_op(n)) continue;
    bool all = true;
    for (const auto& in : n.inputs) all = all && c[static_cast<size_t>(in.node)];
    c[i] = all;
  }
  return c;
}

bool is_quantization_op(std::string_view domain, std::string_view op_type) {
  if (!domain.empty() && domain != "ai.onnx" && domain != "com.microsoft") return false;
  static constexpr std::string_view kOps[] = {
      "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
      "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLSTM", "QGemm", "QAttention",
      "QOrderedMatMul", "MatMulNBits", "MatMulBnb4", "GatherBlockQuantized"};
  for (auto op : kOps)
    if (op_type == op) return true;
  return op_type.substr(0, 7) == "QLinear";  // QLinearConv, QLinearMatMul, QLinearAdd, ...
}

bool is_quantization_op(const Node& n) {
  if (n.kind != OpKind::kOpaque) {  // a modelled one (DequantizeLinear) by the ONNX op its row names
    const OpInfo& info = op_info(n.kind);
    return !info.onnx_type.empty() && is_quantization_op(info.onnx_domain, info.onnx_type);
  }
  const auto* p = std::get_if<OpaqueParams>(&n.params);
  return p && is_quantization_op(p->domain, p->op_type);
}

std::vector<bool> quantization_boundary(const Graph& g) {
  std::vector<bool> b(g.size(), false);
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<NodeId>(i));
    if (!is_quantization_op(n)) {
      for (const auto& in : n.inputs) b[i] = b[i] || is_quantization_op(g.node(in.node));
      continue;
    }
    for (const auto& in : n.inputs) b[static_cast<size_t>(in.node)] = true;
  }
  return b;
}

std::vector<std::vector<Use>> Graph::consumers() const {
  std::vector<std::vector<Use>> uses(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (size_t s = 0; s < nodes_[i].inputs.size(); ++s)
      uses[static_cast<size_t>(nodes_[i].inputs[s].node)].push_back({static_cast<NodeId>(i), static_cast<int32_t>(s)});
  return uses;
}

std::vector<uint64_t> Graph::node_hashes() const {
  std::vector<uint64_t> h(nodes_.size());
  int64_t input_ordinal = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    Hasher hs;
    hs.add(static_cast<uint64_t>(n.kind));
    hash_params(hs, n.params);
    hs.add(n.outputs.size());
    for (const auto& t : n.outputs) hs.add(static_cast<uint64_t>(t.dtype)).add(t.shape);
    if (n.kind == OpKind::kInput) hs.add_i(input_ordinal++);
    if (n.value) hs.add(n.value->content_hash());
    hs.add(n.inputs.size());
    for (const auto& in : n.inputs) hs.add(h[static_cast<size_t>(in.node)]).add_i(in.index);
    h[i] = hs.digest();
  }
  return h;
}

uint64_t Graph::hash() const {
  auto h = node_hashes();
  Hasher hs(0x5151);
  hs.add(outputs_.size());
  for (const auto& o : outputs_) hs.add(h[static_cast<size_t>(o.value.node)]).add_i(o.value.index);
  for (auto id : inputs()) hs.add(h[static_cast<size_t>(id)]);  // unused inputs are part of the interface
  return hs.digest();
}

size_t Graph::num_ops() const {
  size_t n = 0;
  for (const auto& nd : nodes_) n += (nd.kind != OpKind::kInput && nd.kind != OpKind::kWeight);
  return n;
}

int64_t Graph::num_parameters() const {
  int64_t n = 0;
  for (const auto& nd : nodes_)
    if (nd.kind == OpKind::kWeight && nd.value) n += nd.value->numel();
  return n;
}

namespace {

bool same_node_shallow(const Node& a, const Node& b) {
  if (a.kind != b.kind || !(a.params == b.params) || a.outputs != b.outputs || a.inputs.size() != b.inputs.size())
    return false;
  if (static_cast<bool>(a.value) != static_cast<bool>(b.value)) return false;
  if (a.value && a.value != b.value && !a.value->same_content(*b.value)) return false;
  return true;
}

}  // namespace

bool structurally_equal(const Graph& a, const Graph& b) {
  if (a.outputs().size() != b.outputs().size()) return false;
  auto ia = a.inputs(), ib = b.inputs();
  if (ia.size() != ib.size()) return false;
  std::unordered_map<NodeId, NodeId> map;  // a -> b
  std::unordered_map<NodeId, NodeId> rev;  // b -> a
  for (size_t i = 0; i < ia.size(); ++i) {
    if (!same_node_shallow(a.node(ia[i]), b.node(ib[i]))) return false;
    map[ia[i]] = ib[i];
    rev[ib[i]] = ia[i];
  }
  // Explicit stack: deep transformer graphs would overflow a recursive walk.
  std::vector<std::pair<NodeId, NodeId>> stack;
  for (size_t i = 0; i < a.outputs().size(); ++i) {
    const auto& oa = a.outputs()[i].value;
    const auto& ob = b.outputs()[i].value;
    if (oa.index != ob.index) return false;
    stack.emplace_back(oa.node, ob.node);
  }
  while (!stack.empty()) {
    auto [x, y] = stack.back();
    stack.pop_back();
    auto it = map.find(x);
    if (it != map.end()) {
      if (it->second != y) return false;
      continue;
    }
    auto rt = rev.find(y);
    if (rt != rev.end()) return false;  // y already paired with another node of a
    const auto& na = a.node(x);
    const auto& nb = b.node(y);
    if (!same_node_shallow(na, nb)) return false;
    map[x] = y;
    rev[y] = x;
    for (size_t s = 0; s < na.inputs.size(); ++s) {
      if (na.inputs[s].index != nb.inputs[s].index) return false;
      stack.emplace_back(na.inputs[s].node, nb.inputs[s].node);
    }
  }
  return true;
}

namespace {

// live[i]: an output depends on node i, or it is a graph input.
std::vector<char> live_nodes(const Graph& g) {
  std::vector<char> live(g.size(), 0);
  for (const auto& o : g.outputs()) live[static_cast<size_t>(o.value.node)] = 1;
  for (size_t i = g.size(); i-- > 0;) {
    if (g.node(static_cast<NodeId>(i)).kind == OpKind::kInput) live[i] = 1;
    if (!live[i]) continue;
    for (const auto& in : g.node(static_cast<NodeId>(i)).inputs) live[static_cast<size_t>(in.node)] = 1;
  }
  return live;
}

// Builds the graph of the live nodes; take(i) yields node i (copied or moved).
template <class Take>
Graph compact(const Graph& g, const std::vector<char>& live, Take take) {
  Graph out;
  out.meta() = g.meta();
  out.reserve(static_cast<size_t>(std::count(live.begin(), live.end(), char{1})));
  std::vector<NodeId> remap(g.size(), -1);
  for (size_t i = 0; i < g.size(); ++i) {
    if (!live[i]) continue;
    Node n = take(i);
    for (auto& in : n.inputs) in.node = remap[static_cast<size_t>(in.node)];
    remap[i] = out.add(std::move(n));
  }
  for (const auto& o : g.outputs()) out.add_output({remap[static_cast<size_t>(o.value.node)], o.value.index}, o.name);
  return out;
}

}  // namespace

Graph remove_dead_nodes(const Graph& g) {
  return compact(g, live_nodes(g), [&](size_t i) { return g.node(static_cast<NodeId>(i)); });
}

Graph remove_dead_nodes(Graph&& g) {
  const auto live = live_nodes(g);
  if (std::all_of(live.begin(), live.end(), [](char l) { return l != 0; })) return std::move(g);
  return compact(g, live, [&](size_t i) { return std::move(g.mutable_node(static_cast<NodeId>(i))); });
}

Expected<Graph> topo_sorted(const std::vector<Node>& nodes, const std::vector<GraphOutput>& outputs,
                            const ModelMeta& meta) {
  return topo_sorted(std::vector<Node>(nodes), outputs, meta);
}

Expected<Graph> topo_sorted(std::vector<Node>&& nodes, const std::vector<GraphOutput>& outputs, const ModelMeta& meta) {
  const size_t n = nodes.size();
  for (const auto& nd : nodes)
    for (const auto& in : nd.inputs)
      if (in.node < 0 || static_cast<size_t>(in.node) >= n) return Error::bad_input("input refers to a missing node");
  TopoWork work;
  std::vector<int32_t> order;
  const bool placed_all = topo_order(
      n,
      [&](size_t i, auto&& visit) {
        for (const auto& in : nodes[i].inputs) visit(static_cast<size_t>(in.node));
      },
      work, order);
  if (!placed_all) {
    std::vector<char> placed(n, 0);
    for (auto i : order) placed[static_cast<size_t>(i)] = 1;
    for (size_t i = 0; i < n; ++i)
      if (!placed[i])
        return Error::bad_input("the graph has a cycle through node " + std::string(op_name(nodes[i].kind)) + " '" +
                                nodes[i].name + "'");
  }
  std::vector<NodeId> remap(n, -1);
  // Only now move the nodes: a cycle leaves them untouched for the message above.
  Graph g;
  g.meta() = meta;
  g.reserve(n);
  for (auto i : order) {
    Node nd = std::move(nodes[i]);
    for (auto& in : nd.inputs) in.node = remap[static_cast<size_t>(in.node)];
    remap[i] = g.add(std::move(nd));
  }
  for (const auto& o : outputs) g.add_output({remap[static_cast<size_t>(o.value.node)], o.value.index}, o.name);
  return g;
}

std::string node_label(const Graph& g, NodeId id) {
  const auto& n = g.node(id);
  std::string s(n.kind == OpKind::kOpaque ? std::get<OpaqueParams>(n.params).op_type : std::string(op_name(n.kind)));
  if (!n.name.empty()) s += " '" + n.name + "'";
  return s + " (#" + std::to_string(id) + ")";
}

Status validate(const Graph& g) {
  for (size_t i = 0; i < g.size(); ++i) {
    const auto id = static_cast<NodeId>(i);
    const auto& n = g.node(id);
    auto bad = [&](const std::string& why) { return Error::bad_input(node_label(g, id) + ": " + why); };
    std::vector<TensorType> in_types;
    for (const auto& in : n.inputs) {
      if (in.node < 0 || in.node >= id) return bad("input refers to a node that does not precede it");
      if (in.index < 0 || in.index >= static_cast<int32_t>(g.node(in.node).outputs.size()))
        return bad("input refers to a missing output");
      in_types.push_back(g.type(in));
    }
    if (n.outputs.empty()) return bad("has no outputs");
    switch (n.kind) {
      case OpKind::kInput:
        if (!n.inputs.empty()) return bad("a graph input cannot have inputs");
        break;
      case OpKind::kWeight:
        if (!n.value) return bad("weight without data");
        if (n.value->type() != n.outputs[0]) return bad("weight data does not match its declared type");
        break;
      case OpKind::kOpaque:
        if (!std::holds_alternative<OpaqueParams>(n.params)) return bad("opaque node without its ONNX op");
        break;
      default: {  // every modelled op: its stored types are the ones its shape rule gives
        auto t = infer_types(n.kind, n.params, in_types);
        if (!t) return bad(t.error().message);
        if (*t != n.outputs) return bad("stored output types differ from inferred ones");
      }
    }
  }
  for (const auto& o : g.outputs()) {
    if (o.value.node < 0 || static_cast<size_t>(o.value.node) >= g.size() ||
        o.value.index >= static_cast<int32_t>(g.node(o.value.node).outputs.size()))
      return Error::bad_input("graph output '" + o.name + "' refers to a missing value");
  }
  if (g.outputs().empty()) return Error::bad_input("the graph has no outputs");
  return {};
}

}  // namespace rlflow::ir
