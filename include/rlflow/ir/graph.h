#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rlflow/ir/op.h"
#include "rlflow/ir/tensor.h"
#include "rlflow/util/expected.h"

namespace rlflow::ir {

using NodeId = int32_t;

// One output of one node.
struct ValueRef {
  NodeId node = -1;
  int32_t index = 0;
  auto operator<=>(const ValueRef&) const = default;
};

struct Node {
  OpKind kind = OpKind::kOpaque;
  OpParams params;
  std::vector<ValueRef> inputs;
  std::vector<TensorType> outputs;
  TensorPtr value;                        // kWeight only
  std::string name;                       // ONNX node name, or the graph input / initializer name
  std::vector<std::string> output_names;  // ONNX tensor names kept for stable export; may be empty
};

struct GraphOutput {
  ValueRef value;
  std::string name;
};

// Model-level facts that round-trip through import/export unchanged.
struct ModelMeta {
  int64_t ir_version = 8;
  std::vector<std::pair<std::string, int64_t>> opsets{{"", 13}};
  std::string producer_name, producer_version, domain, doc_string, graph_name = "rlflow";
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  // The model's local functions (serialized onnx FunctionProtos), written back as they came: the
  // nodes that call them are opaque, and a file without them does not load (issue 41).
  std::vector<std::string> functions;
  // Graph inputs and outputs declared with symbolic dimensions, by name: per axis the ONNX dim_param,
  // "" for a static axis, "?" for a dynamic axis without a name. The graph itself is specialised to
  // representative sizes; export writes these back, so the written file stays as dynamic as its input.
  std::map<std::string, std::vector<std::string>> symbolic_dims;
  bool dynamic() const { return !symbolic_dims.empty(); }
  int64_t opset(const std::string& domain = "") const;
};

struct Use {
  NodeId node;
  int32_t input_slot;
};

// A dataflow graph held by value. Nodes are stored in topological order and a node's id is its
// position, so every input refers to an earlier node. Copies share weight buffers.
class Graph {
 public:
  // Appends a node; its inputs must refer to existing nodes. Returns its id.
  NodeId add(Node n);
  void reserve(size_t nodes) { nodes_.reserve(nodes); }
  // For rewriters that rebuild a graph in place (rules::apply_into): resizes the node list, keeping
  // the remaining nodes' storage for reuse. The caller must then leave the nodes topologically
  // ordered with valid inputs, as add() would.
  void resize_nodes(size_t n) { nodes_.resize(n); }
  void add_output(ValueRef v, std::string name) { outputs_.push_back({v, std::move(name)}); }
  void set_outputs(std::vector<GraphOutput> outs) { outputs_ = std::move(outs); }

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  Node& mutable_node(NodeId id) { return nodes_[static_cast<size_t>(id)]; }
  size_t size() const { return nodes_.size(); }
  const std::vector<GraphOutput>& outputs() const { return outputs_; }
  std::vector<NodeId> inputs() const;  // kInput nodes in declaration order
  const TensorType& type(ValueRef v) const { return nodes_[static_cast<size_t>(v.node)].outputs[static_cast<size_t>(v.index)]; }

  // consumers()[id] lists every (node, slot) reading any output of node id.
  std::vector<std::vector<Use>> consumers() const;

  ModelMeta& meta() { return meta_; }
  const ModelMeta& meta() const { return meta_; }

  // Structural content hash: op kinds, parameters, types, weight contents and graph wiring;
  // independent of node ids, names and insertion order of independent nodes.
  uint64_t hash() const;
  // Per-node hashes (same definition), indexed by node id.
  std::vector<uint64_t> node_hashes() const;

  // Non-input, non-weight nodes; the count users see in summaries.
  size_t num_ops() const;
  int64_t num_parameters() const;

 private:
  std::vector<Node> nodes_;
  std::vector<GraphOutput> outputs_;
  ModelMeta meta_;
};

// The one meaning of "constant" in rlflow, by node id: Weight and Constant nodes, and every node
// that is neither a graph input nor opaque and whose inputs are all constant. Such a node folds
// into a weight at export, so it costs nothing and a rule variable marked `constant` may bind it.
// Opaque nodes never are (rlflow cannot evaluate them), and so nothing downstream of one is.
std::vector<bool> constant_nodes(const Graph& g);

// Quantized models. A quantization op is QuantizeLinear, DequantizeLinear or DynamicQuantizeLinear
// (default domain or com.microsoft), or an ONNX/contrib op that computes on quantized values
// (QLinear*, MatMulInteger, ConvInteger, ...); rlflow keeps them opaque. Runtimes build their
// integer kernels from the pattern DequantizeLinear -> op -> QuantizeLinear as written, so such an
// op is never folded (a weight's DequantizeLinear folded into float32 makes the file larger, slower
// and, in onnxruntime, a different computation), and the nodes around it are left as they are.
bool is_quantization_op(std::string_view domain, std::string_view op_type);
bool is_quantization_op(const Node& n);
// By node id: the nodes a rewrite must leave as they are in a quantized model, because a runtime's
// quantized kernels are built from them: every node that reads a quantization op's output, and
// every node whose output a quantization op reads. All false in a model without quantization ops.
std::vector<bool> quantization_boundary(const Graph& g);

// True when both graphs compute the same thing in the same structure (names ignored).
bool structurally_equal(const Graph& a, const Graph& b);

// Drops nodes that no output depends on (graph inputs are always kept) and renumbers. The rvalue
// form moves nodes instead of copying them (and returns g itself when nothing is dead).
Graph remove_dead_nodes(const Graph& g);
Graph remove_dead_nodes(Graph&& g);

// Kahn's topological order of nodes 0..n-1, the lowest index first among ready nodes (so stretches
// already in order keep it). for_each_input(i, visit) calls visit(j) for each producer j < n of node
// i, once per input. Fills `order` (shorter than n when there is a cycle) and returns whether every
// node was placed. Index-only, with caller-owned storage that a rewriter reuses from call to call.
struct TopoWork {
  std::vector<int32_t> indeg, succ_start, succ, fill, ready;
};
template <class ForEachInput>
bool topo_order(size_t n, ForEachInput&& for_each_input, TopoWork& w, std::vector<int32_t>& order) {
  // Successors in compressed rows.
  w.indeg.assign(n, 0);
  w.succ_start.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    for_each_input(i, [&](size_t j) {
      ++w.indeg[i];
      ++w.succ_start[j + 1];
    });
  for (size_t i = 0; i < n; ++i) w.succ_start[i + 1] += w.succ_start[i];
  w.succ.resize(static_cast<size_t>(w.succ_start[n]));
  w.fill.assign(w.succ_start.begin(), w.succ_start.end() - 1);
  for (size_t i = 0; i < n; ++i)
    for_each_input(i, [&](size_t j) { w.succ[static_cast<size_t>(w.fill[j]++)] = static_cast<int32_t>(i); });
  w.ready.clear();
  auto push = [&](int32_t i) {
    w.ready.push_back(i);
    std::push_heap(w.ready.begin(), w.ready.end(), std::greater<>());
  };
  for (size_t i = 0; i < n; ++i)
    if (w.indeg[i] == 0) push(static_cast<int32_t>(i));
  order.clear();
  while (!w.ready.empty()) {
    std::pop_heap(w.ready.begin(), w.ready.end(), std::greater<>());
    const int32_t i = w.ready.back();
    w.ready.pop_back();
    order.push_back(i);
    for (int32_t k = w.succ_start[static_cast<size_t>(i)]; k < w.succ_start[static_cast<size_t>(i) + 1]; ++k)
      if (--w.indeg[static_cast<size_t>(w.succ[static_cast<size_t>(k)])] == 0) push(w.succ[static_cast<size_t>(k)]);
  }
  return order.size() == n;
}

// Re-sorts topologically after arbitrary construction; error on a cycle. `order` may come from
// a rewrite that appended nodes out of order. The rvalue form moves the nodes into the result.
Expected<Graph> topo_sorted(const std::vector<Node>& nodes, const std::vector<GraphOutput>& outputs,
                            const ModelMeta& meta);
Expected<Graph> topo_sorted(std::vector<Node>&& nodes, const std::vector<GraphOutput>& outputs, const ModelMeta& meta);

// Checks every invariant and re-runs shape inference; the error names the first bad node.
Status validate(const Graph& g);

std::string node_label(const Graph& g, NodeId id);  // "Conv 'conv1' (#12)"

}  // namespace rlflow::ir
