#pragma once
// What a fusion is (include/rlflow/ir/composites.h runs them): a recogniser that walks back from a
// root node and, when the chain it knows ends there, returns the fused node that replaces the root.
// Each fusion is one file in this folder that defines `const Fusion& <name>_fusion()`, and one line
// in registry.def, whose order is the order they are tried at each root (the first match wins).
//
// The Matcher holds what every recogniser needs to know about the graph: who reads each value,
// which values are graph outputs, which nodes a chain found earlier has claimed, and the small
// pattern helpers the chains share (scalar constants, flattened products, x + c, no-op Casts).
#include <any>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlflow/ir/composites.h"
#include "rlflow/ir/graph.h"
#include "rlflow/ir/shape_inference.h"

namespace rlflow::ir::fusion {

// float32 constants written by exporters: a relative tolerance well above float rounding and far
// below the distance to any other value a model would use.
bool near(double a, double b);
// A constant for a rejection reason: "0.49", "0.166667".
std::string num(double v);

// A product (Mul, and Div by a constant) flattened into its constant part and its other factors.
struct Product {
  double scale = 1.0;
  std::vector<ValueRef> factors;
  std::vector<NodeId> interior;  // the Mul/Div nodes flattened, the root included
};

class Matcher {
 public:
  explicit Matcher(const Graph& g);

  const Graph& graph() const { return g_; }
  const Node& node(ValueRef v) const { return g_.node(v.node); }
  const TensorType& type(ValueRef v) const { return g_.type(v); }

  // The value of a float scalar constant (a one-element Weight), if v is one.
  std::optional<double> scalar(ValueRef v) const;
  // An interior node: read only by the chain it belongs to (its one reader, or `readers` reads of
  // it by chain nodes), not a graph output, not taken by another chain.
  bool interior(NodeId id, size_t readers = 1) const;
  // v flattened when it is a Mul (or a Div by a constant); nested ones only when interior. The
  // root (root = true) is flattened whoever reads it.
  Product product(ValueRef v, bool root) const;
  // v = Add(c, t) or Add(t, c) with an interior Add and a scalar c: returns t, c.
  std::optional<std::pair<ValueRef, double>> plus_constant(ValueRef v) const;
  // v through a Cast that changes nothing (HF casts to float32 and back; at float32 both are
  // no-ops), the Cast joining `nodes` when it is interior; through_noop_casts: through up to four.
  ValueRef through_noop_cast(ValueRef v, std::vector<NodeId>* nodes) const;
  ValueRef through_noop_casts(ValueRef v, std::vector<NodeId>* nodes) const;
  // An opaque default-domain op named `type` (an op the IR does not model); _unary: of one input
  // and one output.
  bool opaque_named(const Node& n, std::string_view type) const;
  bool opaque_unary(const Node& n, std::string_view type) const;
  // A Reshape, with a constant target (the IR's) or one computed at run time (an opaque one, as the
  // dynamo exporter writes them from Shape): a chain that removes it needs only its types.
  bool reshape(const Node& n) const { return n.kind == OpKind::kReshape || opaque_named(n, "Reshape"); }
  // Axes that are the trailing ones of a rank-`rank` value, in order, kept: returns the first.
  std::optional<int64_t> trailing_axes(const AxesParams& a, int64_t rank) const;

  bool claimed(NodeId id) const { return claimed_[static_cast<size_t>(id)]; }
  void claim(const std::vector<NodeId>& nodes);

 private:
  void flatten(ValueRef v, bool root, Product* p) const;

  const Graph& g_;
  std::vector<std::vector<Use>> uses_;
  std::vector<bool> is_output_;
  std::vector<bool> claimed_;
};

// One recognised chain, before it replaces its root.
struct Match {
  Node node;                  // the fused node, keeping the root's outputs and names (fused_node)
  std::vector<NodeId> chain;  // the chain's nodes, its root first
  std::string count_key;      // what it counts as in CompositeStats; "" = the fusion's name
  std::any plan;              // the fusion's own data for build(), when the node is made there
};

class Fusion {
 public:
  explicit Fusion(FusionInfo info) : info_(std::move(info)) {}
  virtual ~Fusion() = default;
  const FusionInfo& info() const { return info_; }

  // The chain rooted at `root`, if it is one. A root whose op cannot end the chain returns nullopt
  // and leaves `why` empty (not a candidate); a candidate that fails says why, in a few words
  // ("scale 0.49, not 0.5"), for `optimise -vv`.
  virtual std::optional<Match> match(const Matcher& m, NodeId root, std::string* why) const = 0;

  // Makes the fused nodes of this fusion's matches in `out` (a copy of the matched graph, roots not
  // yet replaced), once the whole graph is matched: a fusion whose node needs new nodes around it
  // adds them here and returns true (the graph is then sorted again). Default: the nodes as matched.
  virtual bool build(const Graph& /*in*/, Graph* /*out*/, const std::vector<Match*>& /*matches*/) const { return false; }

 private:
  FusionInfo info_;
};

// The fused op that replaces a chain's root: it keeps the root's outputs and names.
Node fused_node(const Node& root, OpKind kind, OpParams params, std::vector<ValueRef> inputs);
// New nodes for build(): a node of one output, a Weight, an opaque default-domain op.
ValueRef add_node(Graph* g, OpKind kind, OpParams params, std::vector<ValueRef> inputs, TensorType out);
ValueRef add_weight(Graph* g, TensorPtr value, const std::string& name);
ValueRef add_opaque(Graph* g, const char* op_type, std::vector<ValueRef> inputs, TensorType out);

// The registered fusions, in registry.def's order.
const std::vector<const Fusion*>& registry();

}  // namespace rlflow::ir::fusion
