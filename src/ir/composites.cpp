#include "rlflow/ir/composites.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string_view>

#include "rlflow/ir/shape_inference.h"

namespace rlflow::ir {

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // the tanh approximation's sqrt(2/pi)
constexpr double kTanhCubic = 0.044715;

// float32 constants written by exporters: a relative tolerance well above float rounding and far
// below the distance to any other value a model would use.
bool near(double a, double b) { return std::abs(a - b) <= 1e-5 * std::max(std::abs(a), std::abs(b)); }

// A product (Mul, and Div by a constant) flattened into its constant part and its other factors.
struct Product {
  double scale = 1.0;
  std::vector<ValueRef> factors;
  std::vector<NodeId> interior;  // the Mul/Div nodes flattened, the root included
};

// The fused op that replaces a chain's root: it keeps the root's outputs and names.
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

// An attention chain recognised, before the nodes around the fused op are built: the operands as
// the graph has them and what must be done to them (see Matcher::attention).
struct AttentionPlan {
  ValueRef q, k, v;
  std::optional<std::vector<int64_t>> k_perm;  // K = Transpose(k, perm) when set, else K = k
  std::optional<ValueRef> mask;                // additive (float) or bool (true = attend)
  TensorPtr bias;  // a constant added to the mask (the mask when there is none): a Where's condition as 0 / fill
  bool causal = false;
  double scale = 1.0;
  bool flat = false;  // 3-D (N, S, E) operands: Unsqueeze to (N, 1, S, E), Attention, Squeeze
  int64_t kv_heads = 0;
};

// Finds the chains in one graph; chains already fused are claimed so no node joins two.
class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), uses_(g.consumers()), is_output_(g.size(), false), claimed_(g.size(), false) {
    for (const auto& o : g.outputs()) is_output_[static_cast<size_t>(o.value.node)] = true;
  }

  const Node& node(ValueRef v) const { return g_.node(v.node); }

  // The value of a float scalar constant (a one-element Weight), if v is one.
  std::optional<double> scalar(ValueRef v) const {
    const Node& n = node(v);
    if (n.kind != OpKind::kWeight || !n.value || n.value->numel() != 1 || !is_float(n.value->dtype())) return std::nullopt;
    return n.value->as_double()[0];
  }

  // An interior node: read only by the chain it belongs to (its one reader, or `readers` reads of
  // it by chain nodes), not a graph output, not taken by another chain.
  bool interior(NodeId id, size_t readers = 1) const {
    return !is_output_[static_cast<size_t>(id)] && !claimed_[static_cast<size_t>(id)] && uses_[static_cast<size_t>(id)].size() == readers &&
           g_.node(id).outputs.size() == 1;
  }

  // Flattens v when it is a Mul (or a Div by a constant); nested ones only when interior.
  void flatten(ValueRef v, bool root, Product* p) const {
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

  Product product(ValueRef v, bool root) const {
    Product p;
    flatten(v, root, &p);
    return p;
  }

  // v = Add(c, t) or Add(t, c) with an interior Add and a scalar c: returns t, c.
  std::optional<std::pair<ValueRef, double>> plus_constant(ValueRef v) const {
    const Node& n = node(v);
    if (n.kind != OpKind::kAdd || !interior(v.node)) return std::nullopt;
    for (int k = 0; k < 2; ++k)
      if (auto c = scalar(n.inputs[static_cast<size_t>(k)])) return std::make_pair(n.inputs[static_cast<size_t>(1 - k)], *c);
    return std::nullopt;
  }

  // x^3 written as Pow(x, 3) or as a product of three x: returns x.
  std::optional<ValueRef> cube_of(const Product& p, std::vector<NodeId>* chain) const {
    if (p.factors.size() == 3 && p.factors[0] == p.factors[1] && p.factors[1] == p.factors[2]) return p.factors[0];
    if (p.factors.size() != 1) return std::nullopt;
    const Node& n = node(p.factors[0]);
    if (n.kind != OpKind::kPow || !interior(p.factors[0].node)) return std::nullopt;
    auto e = scalar(n.inputs[1]);
    if (!e || *e != 3.0) return std::nullopt;
    chain->push_back(p.factors[0].node);
    return n.inputs[0];
  }

  // GELU rooted at the Mul `root`: 0.5 * x * (1 + erf(x / sqrt 2)) or
  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), multiplied in any order.
  std::optional<Node> gelu(NodeId root, std::vector<NodeId>* chain) const {
    const Node& r = g_.node(root);
    if (r.kind != OpKind::kMul || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    Product top = product({root, 0}, true);
    if (!near(top.scale, 0.5) || top.factors.size() != 2) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      const ValueRef x = top.factors[static_cast<size_t>(k)], s = top.factors[static_cast<size_t>(1 - k)];
      if (g_.type(x) != r.outputs[0]) continue;
      auto one_plus = plus_constant(s);
      if (!one_plus || !near(one_plus->second, 1.0)) continue;
      const ValueRef t = one_plus->first;
      const Node& tn = node(t);
      if ((tn.kind != OpKind::kErf && tn.kind != OpKind::kTanh) || !interior(t.node)) continue;
      std::vector<NodeId> nodes = top.interior;
      nodes.push_back(s.node);
      nodes.push_back(t.node);
      Product arg = product(tn.inputs[0], false);
      if (arg.factors.empty() || arg.interior.empty()) continue;
      nodes.insert(nodes.end(), arg.interior.begin(), arg.interior.end());
      if (tn.kind == OpKind::kErf) {
        if (arg.factors.size() != 1 || arg.factors[0] != x || !near(arg.scale, 1.0 / kSqrt2)) continue;
      } else {
        // sqrt(2/pi) * (x + 0.044715 * x^3)
        if (arg.factors.size() != 1 || !near(arg.scale, kSqrt2OverPi)) continue;
        const ValueRef sum = arg.factors[0];
        const Node& sn = node(sum);
        if (sn.kind != OpKind::kAdd || !interior(sum.node)) continue;
        nodes.push_back(sum.node);
        bool ok = false;
        for (int j = 0; j < 2 && !ok; ++j) {
          if (sn.inputs[static_cast<size_t>(j)] != x) continue;
          Product cubic = product(sn.inputs[static_cast<size_t>(1 - j)], false);
          if (cubic.interior.empty() || !near(cubic.scale, kTanhCubic)) continue;
          std::vector<NodeId> cube_nodes = cubic.interior;
          auto base = cube_of(cubic, &cube_nodes);
          if (!base || *base != x) continue;
          nodes.insert(nodes.end(), cube_nodes.begin(), cube_nodes.end());
          ok = true;
        }
        if (!ok) continue;
      }
      *chain = std::move(nodes);
      return fused_node(r, OpKind::kGelu, GeluParams{tn.kind == OpKind::kTanh}, {x});
    }
    return std::nullopt;
  }

  // LayerNorm rooted at the bias Add: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma + beta,
  // the means over the trailing axes.
  std::optional<Node> layer_norm(NodeId root, std::vector<NodeId>* chain) const {
    const Node& r = g_.node(root);
    if (r.kind != OpKind::kAdd || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    const int64_t rank = r.outputs[0].rank();
    for (int k = 0; k < 2; ++k) {
      const ValueRef scaled = r.inputs[static_cast<size_t>(k)], beta = r.inputs[static_cast<size_t>(1 - k)];
      const Node& sn = node(scaled);
      if (sn.kind != OpKind::kMul || !interior(scaled.node) || node(beta).kind != OpKind::kWeight) continue;
      for (int j = 0; j < 2; ++j) {
        const ValueRef normed = sn.inputs[static_cast<size_t>(j)], gamma = sn.inputs[static_cast<size_t>(1 - j)];
        const Node& nn = node(normed);
        if (nn.kind != OpKind::kDiv || !interior(normed.node) || node(gamma).kind != OpKind::kWeight) continue;
        const ValueRef d = nn.inputs[0], sd = nn.inputs[1];
        const Node& dn = node(d);
        const Node& sdn = node(sd);
        if (dn.kind != OpKind::kSub || sdn.kind != OpKind::kSqrt || !interior(sd.node)) continue;
        auto var_eps = plus_constant(sdn.inputs[0]);
        if (!var_eps) continue;
        const ValueRef var = var_eps->first, x = dn.inputs[0], mean = dn.inputs[1];
        const Node& vn = node(var);
        const Node& mn = node(mean);
        if (vn.kind != OpKind::kReduceMean || !interior(var.node) || mn.kind != OpKind::kReduceMean || !interior(mean.node) ||
            mn.inputs[0] != x)
          continue;
        const auto& ma = std::get<AxesParams>(mn.params);
        if (ma != std::get<AxesParams>(vn.params) || !ma.keepdims || ma.axes.empty()) continue;
        const int64_t axis = ma.axes.front();
        bool trailing = true;
        for (size_t i = 0; i < ma.axes.size(); ++i) trailing = trailing && ma.axes[i] == axis + static_cast<int64_t>(i);
        if (!trailing || ma.axes.back() != rank - 1 || g_.type(x) != r.outputs[0]) continue;
        // The square of d: Pow(d, 2) or Mul(d, d); d is read by it and by the Div, nothing else.
        const ValueRef sq = vn.inputs[0];
        const Node& qn = node(sq);
        const bool square = (qn.kind == OpKind::kPow && qn.inputs[0] == d && scalar(qn.inputs[1]) == 2.0) ||
                            (qn.kind == OpKind::kMul && qn.inputs[0] == d && qn.inputs[1] == d);
        if (!square || !interior(sq.node) || !interior(d.node, qn.kind == OpKind::kMul ? 3 : 2)) continue;
        const Shape norm(r.outputs[0].shape.begin() + axis, r.outputs[0].shape.end());
        auto param_ok = [&](ValueRef v) { return g_.type(v).shape == norm && g_.type(v).dtype == r.outputs[0].dtype; };
        if (!param_ok(gamma) || !param_ok(beta)) continue;
        *chain = {root, scaled.node, normed.node, d.node, sd.node, sdn.inputs[0].node, var.node, mean.node, sq.node};
        return fused_node(r, OpKind::kLayerNorm, NormParams{axis, var_eps->second}, {x, gamma, beta});
      }
    }
    return std::nullopt;
  }

  // HardSwish rooted at the Mul: x * HardSigmoid(x) with alpha 1/6 and beta 1/2, in either order.
  std::optional<Node> hard_swish(NodeId root, std::vector<NodeId>* chain) const {
    const Node& r = g_.node(root);
    if (r.kind != OpKind::kMul || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      const ValueRef x = r.inputs[static_cast<size_t>(k)], h = r.inputs[static_cast<size_t>(1 - k)];
      const Node& hn = node(h);
      if (hn.kind != OpKind::kHardSigmoid || hn.inputs[0] != x || !interior(h.node) || g_.type(x) != r.outputs[0]) continue;
      const auto& p = std::get<HardSigmoidParams>(hn.params);
      if (!near(p.alpha, 1.0 / 6.0) || !near(p.beta, 0.5)) continue;
      *chain = {root, h.node};
      return fused_node(r, OpKind::kHardSwish, {}, {x});
    }
    return std::nullopt;
  }

  // v through a Cast that changes nothing (HF's LlamaRMSNorm casts to float32 and back; at float32
  // both are no-ops), the Cast joining the chain when it is interior.
  ValueRef through_noop_cast(ValueRef v, std::vector<NodeId>* nodes) const {
    const Node& n = node(v);
    if (n.kind != OpKind::kCast || !interior(v.node) || g_.type(n.inputs[0]) != n.outputs[0]) return v;
    nodes->push_back(v.node);
    return n.inputs[0];
  }

  // v through any number of such Casts (HF's eager attention casts the probabilities twice).
  ValueRef through_noop_casts(ValueRef v, std::vector<NodeId>* nodes) const {
    for (int i = 0; i < 4; ++i) {
      const ValueRef u = through_noop_cast(v, nodes);
      if (u == v) break;
      v = u;
    }
    return v;
  }

  // 1 / s written as Div(1, s) (PyTorch's rsqrt) or Reciprocal(s) (an op the IR keeps opaque): returns s.
  std::optional<ValueRef> reciprocal_of(ValueRef v) const {
    const Node& n = node(v);
    if (!interior(v.node)) return std::nullopt;
    if (n.kind == OpKind::kDiv && scalar(n.inputs[0]) == 1.0) return n.inputs[1];
    if (n.kind == OpKind::kOpaque && n.inputs.size() == 1) {
      const auto& p = std::get<OpaqueParams>(n.params);
      if ((p.domain.empty() || p.domain == "ai.onnx") && p.op_type == "Reciprocal") return n.inputs[0];
    }
    return std::nullopt;
  }

  // RMSNorm rooted at the scale Mul: x / sqrt(mean(x^2) + eps) * scale, the mean over the trailing
  // axes, the division written as Div(x, rms) or as x * (1 / rms), the factors in either order.
  std::optional<Node> rms_norm(NodeId root, std::vector<NodeId>* chain) const {
    const Node& r = g_.node(root);
    if (r.kind != OpKind::kMul || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    const int64_t rank = r.outputs[0].rank();
    for (int k = 0; k < 2; ++k) {
      std::vector<NodeId> nodes{root};
      const ValueRef scale = r.inputs[static_cast<size_t>(1 - k)];
      if (node(scale).kind != OpKind::kWeight) continue;
      const ValueRef normed = through_noop_cast(r.inputs[static_cast<size_t>(k)], &nodes);
      const Node& nn = node(normed);
      if (!interior(normed.node)) continue;
      // normed = Div(x, rms) or Mul(x, 1 / rms)
      std::optional<ValueRef> x, rms;
      std::optional<NodeId> inverse;
      if (nn.kind == OpKind::kDiv) {
        x = nn.inputs[0];
        rms = nn.inputs[1];
      } else if (nn.kind == OpKind::kMul) {
        for (int j = 0; j < 2 && !rms; ++j)
          if (auto s = reciprocal_of(nn.inputs[static_cast<size_t>(j)])) {
            x = nn.inputs[static_cast<size_t>(1 - j)];
            rms = s;
            inverse = nn.inputs[static_cast<size_t>(j)].node;
          }
      }
      if (!x || !rms || g_.type(*x) != r.outputs[0]) continue;
      const Node& sn = node(*rms);
      if (sn.kind != OpKind::kSqrt || !interior(rms->node)) continue;
      auto ms_eps = plus_constant(sn.inputs[0]);
      if (!ms_eps) continue;
      const ValueRef ms = ms_eps->first;
      const Node& mn = node(ms);
      if (mn.kind != OpKind::kReduceMean || !interior(ms.node)) continue;
      const auto& ma = std::get<AxesParams>(mn.params);
      if (!ma.keepdims || ma.axes.empty()) continue;
      const int64_t axis = ma.axes.front();
      bool trailing = ma.axes.back() == rank - 1;
      for (size_t i = 0; i < ma.axes.size(); ++i) trailing = trailing && ma.axes[i] == axis + static_cast<int64_t>(i);
      if (!trailing) continue;
      // The square of x: Pow(x, 2) or Mul(x, x).
      const ValueRef sq = mn.inputs[0];
      const Node& qn = node(sq);
      const bool square = (qn.kind == OpKind::kPow && qn.inputs[0] == *x && scalar(qn.inputs[1]) == 2.0) ||
                          (qn.kind == OpKind::kMul && qn.inputs[0] == *x && qn.inputs[1] == *x);
      if (!square || !interior(sq.node)) continue;
      const Shape norm(r.outputs[0].shape.begin() + axis, r.outputs[0].shape.end());
      const auto& st = g_.type(scale);
      auto b = broadcast_shapes(st.shape, norm);
      if (!b || *b != norm || st.dtype != r.outputs[0].dtype) continue;
      nodes.push_back(normed.node);
      if (inverse) nodes.push_back(*inverse);
      nodes.insert(nodes.end(), {rms->node, sn.inputs[0].node, ms.node, sq.node});
      *chain = std::move(nodes);
      return fused_node(r, OpKind::kRMSNorm, NormParams{axis, ms_eps->second}, {*x, scale});
    }
    return std::nullopt;
  }

  // An opaque default-domain op of one input and one output named `type` (ops the IR does not model).
  bool opaque_unary(const Node& n, std::string_view type) const {
    if (n.kind != OpKind::kOpaque || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
    const auto& p = std::get<OpaqueParams>(n.params);
    return (p.domain.empty() || p.domain == "ai.onnx") && p.op_type == type;
  }

  // Whether v's two halves along its last axis are provably equal: a Weight whose halves are, or an
  // elementwise chain (Cast, Cos, Sin, arithmetic with a scalar constant) over Concat(f, f) on the last
  // axis, as HF computes cos(cat(freqs, freqs)). An elementwise op of a Concat of equal halves has
  // equal halves.
  bool equal_halves(ValueRef v, int depth = 0) const {
    const Node& n = node(v);
    const TensorType& t = g_.type(v);
    if (depth > 8 || t.rank() < 1 || t.shape.back() % 2 != 0) return false;
    if (n.kind == OpKind::kWeight) {
      if (!n.value) return false;
      const auto x = n.value->as_double();
      const auto d = static_cast<size_t>(t.shape.back()), h = d / 2;
      for (size_t r = 0; r < x.size(); r += d)
        for (size_t i = 0; i < h; ++i)
          if (x[r + i] != x[r + h + i]) return false;
      return true;
    }
    if (n.kind == OpKind::kConcat)
      return n.inputs.size() == 2 && n.inputs[0] == n.inputs[1] && std::get<AxisParams>(n.params).axis == t.rank() - 1;
    if (n.kind == OpKind::kUnsqueeze) {
      const auto& a = std::get<AxesParams>(n.params).axes;
      return std::find(a.begin(), a.end(), t.rank() - 1) == a.end() && equal_halves(n.inputs[0], depth + 1);
    }
    if (n.kind == OpKind::kCast || opaque_unary(n, "Cos") || opaque_unary(n, "Sin")) return g_.type(n.inputs[0]).shape == t.shape && equal_halves(n.inputs[0], depth + 1);
    if (n.kind == OpKind::kMul || n.kind == OpKind::kDiv || n.kind == OpKind::kAdd || n.kind == OpKind::kSub) {
      for (int k = 0; k < 2; ++k)
        if (scalar(n.inputs[static_cast<size_t>(k)]) && g_.type(n.inputs[static_cast<size_t>(1 - k)]).shape == t.shape)
          return equal_halves(n.inputs[static_cast<size_t>(1 - k)], depth + 1);
    }
    return false;
  }

  // Slice(x, [b, e) on the last axis, step 1), interior.
  bool last_axis_slice(ValueRef v, ValueRef x, int64_t b, int64_t e) const {
    const Node& n = node(v);
    if (n.kind != OpKind::kSlice || n.inputs[0] != x || !interior(v.node)) return false;
    const auto& p = std::get<SliceParams>(n.params);
    return p.axes == std::vector<int64_t>{g_.type(x).rank() - 1} && p.starts == std::vector<int64_t>{b} && p.ends == std::vector<int64_t>{e} &&
           p.steps == std::vector<int64_t>{1};
  }

  // HF LLaMA's rotary embedding rooted at the Add: x * cos + rotate_half(x) * sin, with
  // rotate_half(x) = Concat(Neg(x[..., D/2:]), x[..., :D/2]), x (B, H, S, D), cos and sin (B, 1, S, D)
  // with equal halves, so that they are the op's (B, S, D/2) caches written twice. Returns the
  // fused node with cos and sin (the 4-D values) as its inputs 1 and 2; the caller puts the caches there.
  std::optional<Node> rotary(NodeId root, std::vector<NodeId>* chain) const {
    const Node& r = g_.node(root);
    if (r.kind != OpKind::kAdd || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype) || r.outputs[0].rank() != 4) return std::nullopt;
    const Shape& xs = r.outputs[0].shape;
    const int64_t d = xs[3], h = d / 2;
    if (d % 2 != 0) return std::nullopt;
    auto cache_ok = [&](ValueRef c) {
      const TensorType& t = g_.type(c);
      // The dynamo exporter computes the caches from positions without a batch axis: (1, 1, S, D),
      // broadcast over the batch; half_cache then expands them to the batch.
      return t.dtype == r.outputs[0].dtype && (t.shape == Shape{xs[0], 1, xs[2], d} || t.shape == Shape{1, 1, xs[2], d}) &&
             equal_halves(c);
    };
    for (int k = 0; k < 2; ++k) {
      const ValueRef a = r.inputs[static_cast<size_t>(k)], b = r.inputs[static_cast<size_t>(1 - k)];
      const Node& an = node(a);
      const Node& bn = node(b);
      if (an.kind != OpKind::kMul || bn.kind != OpKind::kMul || !interior(a.node) || !interior(b.node)) continue;
      for (int j = 0; j < 2; ++j) {
        const ValueRef x = an.inputs[static_cast<size_t>(j)], cos = an.inputs[static_cast<size_t>(1 - j)];
        if (g_.type(x) != r.outputs[0]) continue;
        for (int i = 0; i < 2; ++i) {
          const ValueRef rot = bn.inputs[static_cast<size_t>(i)], sin = bn.inputs[static_cast<size_t>(1 - i)];
          const Node& cn = node(rot);
          if (cn.kind != OpKind::kConcat || cn.inputs.size() != 2 || !interior(rot.node) || std::get<AxisParams>(cn.params).axis != 3) continue;
          const ValueRef neg = cn.inputs[0], first = cn.inputs[1];
          const Node& nn = node(neg);
          if (!opaque_unary(nn, "Neg") || !interior(neg.node)) continue;
          if (!last_axis_slice(nn.inputs[0], x, h, d) || !last_axis_slice(first, x, 0, h)) continue;
          if (!cache_ok(cos) || !cache_ok(sin)) continue;
          *chain = {root, a.node, b.node, rot.node, neg.node, nn.inputs[0].node, first.node};
          return fused_node(r, OpKind::kRotaryEmbedding, RotaryParams{}, {x, cos, sin});
        }
      }
    }
    return std::nullopt;
  }

  // A constant (S, L) pattern over a mask broadcast to `full` (..., S, L): every (S, L) plane equal
  // to the causal one, upper-left aligned (key j visible to query i iff j <= i), S == L. `allowed`
  // says whether one element lets its key be seen.
  template <class Allowed>
  bool causal_constant(const Tensor& t, const Shape& full, Allowed allowed) const {
    if (full.size() < 2) return false;
    const int64_t s = full[full.size() - 2], l = full.back();
    if (s != l || t.shape().size() > full.size()) return false;
    const auto x = t.as_double();
    const Shape& ts = t.shape();
    const int64_t ms = ts.size() >= 2 ? ts[ts.size() - 2] : 1, ml = ts.empty() ? 1 : ts.back();
    if (ms != s || ml != l) return false;  // a plane broadcast along S or L is not causal
    for (size_t base = 0; base < x.size(); base += static_cast<size_t>(s * l))
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < l; ++j)
          if (allowed(x[base + static_cast<size_t>(i * l + j)]) != (j <= i)) return false;
    return true;
  }

  // HF LLaMA's repeat_kv: Reshape(Expand(Unsqueeze(x, 2) to (B, Hkv, r, L, E)) to (B, Hkv*r, L, E)),
  // each node interior: returns x and Hkv.
  std::optional<std::pair<ValueRef, int64_t>> repeat_kv(ValueRef v, std::vector<NodeId>* nodes) const {
    const Node& rn = node(v);
    if (!reshape(rn) || !interior(v.node)) return std::nullopt;
    const ValueRef e = rn.inputs[0];
    const Node& en = node(e);
    if (!opaque_named(en, "Expand") || en.inputs.empty() || !interior(e.node)) return std::nullopt;
    const ValueRef u = en.inputs[0];
    const Node& un = node(u);
    if (un.kind != OpKind::kUnsqueeze || !interior(u.node) || std::get<AxesParams>(un.params).axes != std::vector<int64_t>{2})
      return std::nullopt;
    const Shape& xs = g_.type(un.inputs[0]).shape;
    const Shape& es = g_.type(e).shape;
    const Shape& rs = g_.type(v).shape;
    if (xs.size() != 4 || es.size() != 5 || rs.size() != 4) return std::nullopt;
    if (es != Shape{xs[0], xs[1], es[2], xs[2], xs[3]} || rs != Shape{xs[0], xs[1] * es[2], xs[2], xs[3]}) return std::nullopt;
    nodes->insert(nodes->end(), {v.node, e.node, u.node});
    return std::make_pair(un.inputs[0], xs[1]);
  }

  // Attention rooted at the MatMul: MatMul(Softmax(scale * MatMul(Q, K^T) [+ mask], axis -1), V), the
  // scale a Div or Mul by a scalar constant on the scores or on Q, K^T a Transpose (composed into the
  // op's K) or any value (transposed back), the mask an Add of a float value or a Where(bool constant,
  // scores, very negative scalar) (HF GPT-2), float32 no-op Casts anywhere along the way. 4-D
  // (B, H, S, E) operands, or 3-D (N, S, E) ones (PyTorch's nn.MultiheadAttention).
  std::optional<AttentionPlan> attention(NodeId root, std::vector<NodeId>* chain) const {
    const Node& r = g_.node(root);
    if (r.kind != OpKind::kMatMul || r.outputs.size() != 1 || r.outputs[0].dtype != DType::kFloat32) return std::nullopt;
    const int64_t rank = r.outputs[0].rank();
    if (rank != 3 && rank != 4) return std::nullopt;
    std::vector<NodeId> nodes{root};
    AttentionPlan plan;
    plan.flat = rank == 3;
    plan.v = r.inputs[1];
    ValueRef probs = through_noop_casts(r.inputs[0], &nodes);
    // torch.onnx writes SDPA's probabilities as Where(IsNaN(p), 0, p): NaN rows, which only a fully
    // masked row with an infinite fill (or a NaN input) makes, become 0. Taken only where the fill is
    // finite (checked below), so that for every finite input the guard changes nothing.
    const bool nan_guard = this->nan_guard(&probs, &nodes);
    const Node& pn = node(probs);
    if (pn.kind != OpKind::kSoftmax || !interior(probs.node, nan_guard ? 2 : 1) || std::get<AxisParams>(pn.params).axis != rank - 1)
      return std::nullopt;
    nodes.push_back(probs.node);
    ValueRef x = through_noop_casts(pn.inputs[0], &nodes);
    const Shape scores_shape = g_.type(x).shape;
    const auto big_negative = [&](ValueRef c) {
      auto v = scalar(c);
      return v && *v <= -1e4;
    };
    // v through an interior Mul by a non-zero scalar constant (or Div by one, where `div`), the
    // constant folded into the plan's scale.
    auto unscale = [&](ValueRef v, bool div, std::vector<NodeId>* ns) -> ValueRef {
      const Node& n = node(v);
      if (!((div && n.kind == OpKind::kDiv) || n.kind == OpKind::kMul) || !interior(v.node)) return v;
      for (int k = 0; k < 2; ++k) {
        if (n.kind == OpKind::kDiv && k == 0) continue;  // only x / c
        auto c = scalar(n.inputs[static_cast<size_t>(k)]);
        if (!c || *c == 0) continue;
        plan.scale *= n.kind == OpKind::kDiv ? 1.0 / *c : *c;
        ns->push_back(v.node);
        return n.inputs[static_cast<size_t>(1 - k)];
      }
      return v;
    };
    // The scores: optionally scaled, a MatMul.
    auto scores = [&](ValueRef s, std::vector<NodeId>* ns) -> bool {
      s = unscale(through_noop_casts(s, ns), /*div=*/true, ns);
      const Node& mn = node(s);
      if (mn.kind != OpKind::kMatMul || !interior(s.node) || g_.type(s).shape != scores_shape) return false;
      ns->push_back(s.node);
      plan.q = unscale(mn.inputs[0], /*div=*/true, ns);
      // torch.onnx's SDPA scales Q and K^T each by sqrt(scale).
      const ValueRef kt = unscale(mn.inputs[1], /*div=*/false, ns);
      if (auto k = flat_transposed(kt, ns)) {  // torch.onnx's K^T through (B*H, E, L)
        plan.k = *k;
        return true;
      }
      const Node& kn = node(kt);
      std::vector<int64_t> swap(static_cast<size_t>(rank));
      for (int64_t i = 0; i < rank; ++i) swap[static_cast<size_t>(i)] = i;
      std::swap(swap[static_cast<size_t>(rank - 2)], swap[static_cast<size_t>(rank - 1)]);
      if (kn.kind == OpKind::kTranspose && interior(kt.node)) {
        // K^T = transpose(src, p), so K = transpose(src, p with its last two entries swapped).
        std::vector<int64_t> p = std::get<TransposeParams>(kn.params).perm;
        std::swap(p[static_cast<size_t>(rank - 2)], p[static_cast<size_t>(rank - 1)]);
        ns->push_back(kt.node);
        plan.k = kn.inputs[0];
        bool identity = true;
        for (int64_t i = 0; i < rank; ++i) identity = identity && p[static_cast<size_t>(i)] == i;
        if (!identity) plan.k_perm = p;
      } else {
        plan.k = kt;
        plan.k_perm = swap;
      }
      return true;
    };
    // The mask: Add(scores-side, mask) in either order, then Where(c, scores, -big) inside it.
    std::optional<ValueRef> add_mask;
    std::vector<NodeId> inner;
    bool found = false;
    const Node& xn = node(x);
    if (xn.kind == OpKind::kAdd && interior(x.node)) {
      for (int k = 0; k < 2 && !found; ++k) {
        std::vector<NodeId> ns{x.node};
        const ValueRef a = xn.inputs[static_cast<size_t>(k)], m = xn.inputs[static_cast<size_t>(1 - k)];
        if (g_.type(a).shape != scores_shape || g_.type(m).dtype != DType::kFloat32) continue;
        AttentionPlan saved = plan;
        if (where_scores(a, &ns, &plan, scores_shape, big_negative, scores) || scores(a, &ns)) {
          add_mask = m;
          inner = std::move(ns);
          found = true;
        } else {
          plan = saved;
        }
      }
    }
    if (!found) {
      std::vector<NodeId> ns;
      AttentionPlan saved = plan;
      if (where_scores(x, &ns, &plan, scores_shape, big_negative, scores) || scores(x, &ns)) {
        inner = std::move(ns);
        found = true;
      } else {
        plan = saved;
      }
    }
    if (!found) return std::nullopt;
    nodes.insert(nodes.end(), inner.begin(), inner.end());
    if (plan.bias) {
      // Where(c, scores, fill): the scores where c holds, fill elsewhere; as an added mask it is
      // 0 / fill, the same numbers (fill is so negative that adding the scores leaves it). Alone
      // and causal it is is_causal; with a mask added after it, the two are summed into one.
      if (add_mask) plan.mask = add_mask;
      else if (causal_constant(*plan.bias, scores_shape, [](double e) { return e == 0.0; })) plan.causal = true, plan.bias = nullptr;
    } else if (add_mask) {
      // A constant float mask that is exactly causal (0 where visible, very negative elsewhere).
      const Node& mn = node(*add_mask);
      bool causal = false;
      if (mn.kind == OpKind::kWeight && mn.value && !plan.causal &&
          causal_constant(*mn.value, scores_shape, [](double e) { return e == 0.0; })) {
        causal = true;
        for (double e : mn.value->as_double()) causal = causal && (e == 0.0 || e <= -1e4);
      }
      if (causal) plan.causal = true;
      else plan.mask = add_mask;
    }
    if (nan_guard && !finite_mask(plan)) return std::nullopt;
    // Types and shapes: Q (.., S, E), K (.., L, E), V (.., L, Ev), the batch dims equal.
    const TensorType& qt = g_.type(plan.q);
    const TensorType& vt = g_.type(plan.v);
    TensorType kt = g_.type(plan.k);
    if (plan.k_perm) {
      Shape s(kt.shape.size());
      if (plan.k_perm->size() != s.size()) return std::nullopt;
      for (size_t i = 0; i < s.size(); ++i) s[i] = kt.shape[static_cast<size_t>((*plan.k_perm)[i])];
      kt.shape = s;
    }
    if (qt.dtype != DType::kFloat32 || kt.dtype != DType::kFloat32 || vt.dtype != DType::kFloat32) return std::nullopt;
    if (qt.rank() != rank || kt.rank() != rank || vt.rank() != rank) return std::nullopt;
    const size_t sa = static_cast<size_t>(rank - 2), ea = static_cast<size_t>(rank - 1);
    for (size_t i = 0; i < sa; ++i)
      if (qt.shape[i] != kt.shape[i] || qt.shape[i] != vt.shape[i]) return std::nullopt;
    if (kt.shape[ea] != qt.shape[ea] || vt.shape[sa] != kt.shape[sa]) return std::nullopt;
    if (r.outputs[0].shape[sa] != qt.shape[sa] || r.outputs[0].shape[ea] != vt.shape[ea]) return std::nullopt;
    if (plan.mask) {
      const TensorType& mt = g_.type(*plan.mask);
      auto b = broadcast_shapes(mt.shape, scores_shape);
      if (!b || *b != scores_shape) return std::nullopt;
      if (plan.bias && !broadcast_shapes(mt.shape, plan.bias->shape())) return std::nullopt;
    }
    // GQA: K and V both repeated from the same number of kv heads, K untransposed.
    plan.kv_heads = rank == 4 ? qt.shape[1] : 1;
    if (rank == 4 && !plan.k_perm) {
      std::vector<NodeId> kv;
      auto kr = repeat_kv(plan.k, &kv);
      auto vr = kr ? repeat_kv(plan.v, &kv) : std::nullopt;
      if (kr && vr && kr->second == vr->second && qt.shape[1] % kr->second == 0) {
        plan.k = kr->first;
        plan.v = vr->first;
        plan.kv_heads = kr->second;
        nodes.insert(nodes.end(), kv.begin(), kv.end());
      }
    }
    plan.scale = static_cast<double>(static_cast<float>(plan.scale));  // a float attribute: written and read back the same
    *chain = std::move(nodes);
    return plan;
  }

  // p = Where(IsNaN(s), 0, s) with both nodes interior: moves p to s, the nodes into the chain.
  bool nan_guard(ValueRef* p, std::vector<NodeId>* nodes) const {
    const Node& wn = node(*p);
    if (!opaque_named(wn, "Where") || wn.inputs.size() != 3 || !interior(p->node)) return false;
    const ValueRef cond = wn.inputs[0], s = wn.inputs[2];
    const Node& cn = node(cond);
    auto zero = scalar(wn.inputs[1]);
    if (!opaque_unary(cn, "IsNaN") || cn.inputs[0] != s || !interior(cond.node) || !zero || *zero != 0.0) return false;
    nodes->insert(nodes->end(), {p->node, cond.node});
    *p = s;
    return true;
  }

  // Whether every mask value the plan adds is finite: a Where(c, a, b) of finite scalars (torch's
  // boolean-to-float mask), a finite constant, or none.
  bool finite_mask(const AttentionPlan& plan) const {
    auto finite = [](const std::vector<double>& v) { return std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); }); };
    if (plan.bias && !finite(plan.bias->as_double())) return false;
    if (!plan.mask) return true;
    const Node& mn = node(*plan.mask);
    if (mn.kind == OpKind::kWeight) return mn.value && finite(mn.value->as_double());
    if (!opaque_named(mn, "Where") || mn.inputs.size() != 3) return false;
    auto a = scalar(mn.inputs[1]), b = scalar(mn.inputs[2]);
    return a && b && std::isfinite(*a) && std::isfinite(*b);
  }

  // K^T written as Reshape(Transpose(Reshape(K, (B*H, L, E)), (0, 2, 1)), (B, H, E, L)), each node
  // interior: returns K (B, H, L, E).
  std::optional<ValueRef> flat_transposed(ValueRef kt, std::vector<NodeId>* ns) const {
    const Node& r2 = node(kt);
    if (!reshape(r2) || !interior(kt.node)) return std::nullopt;
    const ValueRef t = r2.inputs[0];
    const Node& tn = node(t);
    if (tn.kind != OpKind::kTranspose || !interior(t.node) || std::get<TransposeParams>(tn.params).perm != std::vector<int64_t>{0, 2, 1})
      return std::nullopt;
    const ValueRef r1 = tn.inputs[0];
    const Node& r1n = node(r1);
    if (!reshape(r1n) || !interior(r1.node)) return std::nullopt;
    const ValueRef k = r1n.inputs[0];
    const Shape& ks = g_.type(k).shape;
    if (ks.size() != 4 || g_.type(r1).shape != Shape{ks[0] * ks[1], ks[2], ks[3]} || g_.type(kt).shape != Shape{ks[0], ks[1], ks[3], ks[2]})
      return std::nullopt;
    ns->insert(ns->end(), {kt.node, t.node, r1.node});
    return k;
  }

  // Where(c, scores, -big) with c a bool constant of a shape broadcasting to the scores: a causal c
  // becomes is_causal, any other c the op's bool mask.
  template <class BigNegative, class Scores>
  bool where_scores(ValueRef w, std::vector<NodeId>* ns, AttentionPlan* plan, const Shape& scores_shape, BigNegative big_negative,
                    Scores scores) const {
    const Node& wn = node(w);
    if (!opaque_named(wn, "Where") || wn.inputs.size() != 3 || !interior(w.node)) return false;
    const Node& cn = node(wn.inputs[0]);
    if (cn.kind != OpKind::kWeight || !cn.value || cn.value->dtype() != DType::kBool || !big_negative(wn.inputs[2])) return false;
    auto b = broadcast_shapes(cn.value->shape(), scores_shape);
    if (!b || *b != scores_shape) return false;
    std::vector<NodeId> mine{w.node};
    AttentionPlan saved = *plan;
    if (!scores(wn.inputs[1], &mine)) {
      *plan = saved;
      return false;
    }
    const double fill = *scalar(wn.inputs[2]);
    std::vector<double> bias = cn.value->as_double();
    for (auto& e : bias) e = e != 0.0 ? 0.0 : fill;
    plan->bias = Tensor::from_doubles(DType::kFloat32, cn.value->shape(), bias);
    ns->insert(ns->end(), mine.begin(), mine.end());
    return true;
  }

  // A Reshape, with a constant target (the IR's) or one computed at run time (an opaque one, as the
  // dynamo exporter writes them from Shape): a chain that removes it needs only its types.
  bool reshape(const Node& n) const { return n.kind == OpKind::kReshape || opaque_named(n, "Reshape"); }

  bool opaque_named(const Node& n, std::string_view type) const {
    if (n.kind != OpKind::kOpaque) return false;
    const auto& p = std::get<OpaqueParams>(n.params);
    return (p.domain.empty() || p.domain == "ai.onnx") && p.op_type == type;
  }

  void claim(const std::vector<NodeId>& nodes) {
    for (auto id : nodes) claimed_[static_cast<size_t>(id)] = true;
  }

 private:
  const Graph& g_;
  std::vector<std::vector<Use>> uses_;
  std::vector<bool> is_output_;
  std::vector<bool> claimed_;
};

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

// The (B, S, D/2) cache RotaryEmbedding reads for a (B, 1, S, D) cos or sin whose halves are equal:
// its first half, as a new weight when it is one, else sliced off (once per value, for q and k alike).
// A (1, 1, S, D) one shared by the batch is expanded to x's batch, read at run time
// (Expand(cache, Concat(Shape(x)[0], [1, 1]))), whenever the batch can vary: the op takes no
// broadcast cache, and a batch of 1 written in would hold at batch 1 only. (A cache that already
// has the batch passes through the Expand unchanged.)
ValueRef half_cache(Graph* g, ValueRef c, ValueRef x, std::map<std::pair<NodeId, int>, ValueRef>* memo) {
  const auto key = std::make_pair(c.node, c.index);
  if (auto it = memo->find(key); it != memo->end()) return it->second;
  const TensorType t = g->type(c);
  const int64_t batch = g->type(x).shape[0];
  // In a dynamic graph the expansion is written whatever the sizes here: at batch 1 a cache that
  // follows the batch and one that does not look alike, and the graph must be the same at every size.
  const bool expand = t.shape[0] != batch || g->meta().dynamic();
  const int64_t h = t.shape[3] / 2;
  const Shape half{t.shape[0], t.shape[2], h};
  const Node& src = g->node(c.node);
  ValueRef out;
  if (src.kind == OpKind::kWeight) {
    const auto x = src.value->as_double();
    std::vector<double> v;
    for (size_t r = 0; r < x.size(); r += static_cast<size_t>(2 * h))
      v.insert(v.end(), x.begin() + static_cast<std::ptrdiff_t>(r), x.begin() + static_cast<std::ptrdiff_t>(r + static_cast<size_t>(h)));
    Node w;
    w.kind = OpKind::kWeight;
    w.value = Tensor::from_doubles(t.dtype, half, v);
    w.outputs = {{t.dtype, half}};
    w.name = src.name + "_half";
    out = {g->add(std::move(w)), 0};
  } else {
    Node s;
    s.kind = OpKind::kSlice;
    s.params = SliceParams{{0}, {h}, {3}, {1}};
    s.inputs = {c};
    s.outputs = {{t.dtype, {t.shape[0], 1, t.shape[2], h}}};
    const ValueRef sliced{g->add(std::move(s)), 0};
    Node q;
    q.kind = OpKind::kSqueeze;
    q.params = AxesParams{{1}, true};
    q.inputs = {sliced};
    q.outputs = {{t.dtype, half}};
    out = {g->add(std::move(q)), 0};
  }
  if (expand) {
    const ValueRef shape = add_opaque(g, "Shape", {x}, {DType::kInt64, {4}});
    const ValueRef zero = add_weight(g, Tensor::i64({0}), g->node(c.node).name + "_batch_axis");
    const ValueRef b = add_node(g, OpKind::kGather, AxisParams{0}, {shape, zero}, {DType::kInt64, {1}});
    const ValueRef ones = add_weight(g, Tensor::i64({1, 1}), g->node(c.node).name + "_cache_dims");
    const ValueRef target = add_node(g, OpKind::kConcat, AxisParams{0}, {b, ones}, {DType::kInt64, {3}});
    out = add_opaque(g, "Expand", {out, target}, {t.dtype, {batch, t.shape[2], t.shape[3] / 2}});
  }
  memo->emplace(key, out);
  return out;
}

// t's values broadcast (numpy rules) to `to`, row-major.
std::vector<double> broadcast_values(const Tensor& t, const Shape& to) {
  const auto x = t.as_double();
  const Shape& s = t.shape();
  const size_t r = to.size(), off = r - s.size();
  int64_t n = 1;
  for (auto d : to) n *= d;
  std::vector<double> out(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (size_t d = off; d < r; ++d) src = src * s[d - off] + (s[d - off] == 1 ? 0 : idx[d]);
    out[static_cast<size_t>(i)] = x[static_cast<size_t>(src)];
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < to[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// The Attention op for a recognised chain, its operands built in g; returns the node that replaces
// the root (the op, or for 3-D operands the Squeeze of its heads axis).
Node build_attention(Graph* g, const Node& root, const AttentionPlan& p) {
  const bool flat = p.flat;
  ValueRef q = p.q, k = p.k, v = p.v;
  if (p.k_perm) {
    TensorType t = g->type(k);
    Shape s(t.shape.size());
    for (size_t i = 0; i < s.size(); ++i) s[i] = t.shape[static_cast<size_t>((*p.k_perm)[i])];
    t.shape = s;
    k = add_node(g, OpKind::kTranspose, TransposeParams{*p.k_perm}, {k}, t);
  }
  auto heads_axis = [&](ValueRef x) {
    TensorType t = g->type(x);
    t.shape.insert(t.shape.begin() + 1, 1);
    return add_node(g, OpKind::kUnsqueeze, AxesParams{{1}, true}, {x}, t);
  };
  if (flat) q = heads_axis(q), k = heads_axis(k), v = heads_axis(v);
  const Shape qs = g->type(q).shape, ks = g->type(k).shape;
  std::vector<ValueRef> ins{q, k, v};
  std::optional<ValueRef> mask = p.mask;
  if (p.bias) {
    const ValueRef b = add_weight(g, p.bias, root.name + "_mask_bias");
    if (mask) {
      auto s = broadcast_shapes(g->type(*mask).shape, p.bias->shape());
      mask = add_node(g, OpKind::kAdd, {}, {b, *mask}, {DType::kFloat32, s ? *s : p.bias->shape()});
    } else {
      mask = b;
    }
  }
  if (mask) {
    // onnxruntime (through 1.32) refuses a (B, 1, 1, L) mask: every mask is given its S axis and
    // the batch, at least (B, 1, S, L).
    const TensorType mt = g->type(*mask);
    const int64_t heads = !flat && mt.rank() == 4 && mt.shape[1] == qs[1] ? qs[1] : 1;
    const Shape target{qs[0], heads, qs[2], ks[2]};
    const Node& src = g->node(mask->node);
    ValueRef m = *mask;
    if (src.kind == OpKind::kWeight && src.value) {
      if (mt.shape != target) {
        Shape full = target;
        if (flat) full.erase(full.begin() + 1);  // broadcast to (N, S, L), then read as (N, 1, S, L)
        m = add_weight(g, Tensor::from_doubles(mt.dtype, target, broadcast_values(*src.value, full)), src.name + "_expanded");
      }
    } else if (mt.shape != target) {
      if (flat && mt.rank() == 3) m = heads_axis(m);
      m = add_node(g, OpKind::kAdd, {}, {m, add_weight(g, Tensor::from_doubles(mt.dtype, target, std::vector<double>(
                                                                                   static_cast<size_t>(target[0] * target[1] * target[2] * target[3]), 0.0)),
                                                               root.name + "_mask_broadcast")},
                   {mt.dtype, target});
    }
    ins.push_back(m);
  }
  const AttentionParams ap{p.causal, p.scale, 0, 0};
  if (!flat) return fused_node(root, OpKind::kAttention, ap, ins);
  Shape ys = root.outputs[0].shape;
  ys.insert(ys.begin() + 1, 1);
  const ValueRef y = add_node(g, OpKind::kAttention, ap, ins, {root.outputs[0].dtype, ys});
  return fused_node(root, OpKind::kSqueeze, AxesParams{{1}, true}, {y});
}

}  // namespace

bool is_noop_cast(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  return n.kind == OpKind::kCast && n.inputs.size() == 1 && n.outputs.size() == 1 && g.type(n.inputs[0]) == n.outputs[0];
}

namespace {

// Readers of a no-op Cast read its input instead (through any run of them); a Cast that is a graph
// output stays, keeping the output's producer. Returns how many Casts nothing reads any more
// (remove_dead_nodes then drops them).
int bypass_noop_casts(Graph* g) {
  std::vector<bool> is_output(g->size(), false);
  for (const auto& o : g->outputs()) is_output[static_cast<size_t>(o.value.node)] = true;
  auto skip = [&](NodeId id) { return is_noop_cast(*g, id) && !is_output[static_cast<size_t>(id)]; };
  int n = 0;
  for (size_t i = 0; i < g->size(); ++i) n += skip(static_cast<NodeId>(i));
  if (n == 0) return 0;
  for (size_t i = 0; i < g->size(); ++i) {
    const auto id = static_cast<NodeId>(i);
    for (size_t k = 0; k < g->node(id).inputs.size(); ++k) {
      ValueRef v = g->node(id).inputs[k];
      while (skip(v.node)) v = g->node(v.node).inputs[0];
      g->mutable_node(id).inputs[k] = v;
    }
  }
  return n;
}

}  // namespace

const std::vector<std::string>& fusion_names() {
  static const std::vector<std::string> names = {"layer_norm", "gelu", "hard_swish", "rms_norm", "rotary_embedding", "attention"};
  return names;
}

Graph recognise_composites(const Graph& g, CompositeStats* stats, std::optional<int64_t> opset, const FusionSet& disabled) {
  const int64_t v = opset ? *opset : g.meta().opset("");
  // A fusion runs where its op exists at the output's opset and it is not disabled by name.
  const auto on = [&](const char* name, int64_t since) { return v >= since && disabled.count(name) == 0; };
  CompositeStats local;
  CompositeStats& st = stats ? *stats : local;
  Matcher m(g);
  // Roots are visited last to first so a chain is claimed whole before a node inside it could be
  // taken as another chain's root. The fused node replaces the root in place: its inputs all come
  // before the root, so the order stays topological, and the chain's other nodes fall dead.
  std::vector<std::pair<NodeId, Node>> replace;
  std::map<NodeId, AttentionPlan> attention;  // built once the whole graph is matched
  for (size_t i = g.size(); i-- > 0;) {
    const auto id = static_cast<NodeId>(i);
    std::vector<NodeId> chain;
    if (auto n = on("layer_norm", kLayerNormOpset) ? m.layer_norm(id, &chain) : std::nullopt) {
      ++st.layer_norm;
      m.claim(chain);
      st.records.push_back({"layer_norm", chain});
      replace.emplace_back(id, std::move(*n));
    } else if (auto gn = on("gelu", kGeluOpset) ? m.gelu(id, &chain) : std::nullopt) {
      ++(std::get<GeluParams>(gn->params).tanh ? st.gelu_tanh : st.gelu);
      m.claim(chain);
      st.records.push_back({"gelu", chain});
      replace.emplace_back(id, std::move(*gn));
    } else if (auto hs = on("hard_swish", kHardSwishOpset) ? m.hard_swish(id, &chain) : std::nullopt) {
      ++st.hard_swish;
      m.claim(chain);
      st.records.push_back({"hard_swish", chain});
      replace.emplace_back(id, std::move(*hs));
    } else if (auto rn = on("rms_norm", kRMSNormOpset) ? m.rms_norm(id, &chain) : std::nullopt) {
      ++st.rms_norm;
      m.claim(chain);
      st.records.push_back({"rms_norm", chain});
      replace.emplace_back(id, std::move(*rn));
    } else if (auto re = on("rotary_embedding", kRotaryEmbeddingOpset) ? m.rotary(id, &chain) : std::nullopt) {
      ++st.rotary_embedding;
      m.claim(chain);
      st.records.push_back({"rotary_embedding", chain});
      replace.emplace_back(id, std::move(*re));
    } else if (auto at = on("attention", kAttentionOpset) ? m.attention(id, &chain) : std::nullopt) {
      ++st.attention;
      m.claim(chain);
      st.records.push_back({"attention", chain});
      attention.emplace(id, std::move(*at));
      replace.emplace_back(id, Node{});
    }
  }
  Graph out = g;
  if (!replace.empty()) {
    // A rotary embedding reads caches that are new nodes, added after its root: sorted again below.
    bool added = false;
    std::map<std::pair<NodeId, int>, ValueRef> caches;
    // A cache expanded to the batch reads the batch off the earliest x among the rotary ops that
    // share it: every other one comes after that x, so no cycle can form.
    std::map<std::pair<NodeId, int>, ValueRef> batch_of;
    for (const auto& [id, n] : replace)
      if (n.kind == OpKind::kRotaryEmbedding)
        for (size_t k = 1; k < 3; ++k) {
          auto [it, fresh] = batch_of.emplace(std::make_pair(n.inputs[k].node, n.inputs[k].index), n.inputs[0]);
          if (!fresh && n.inputs[0].node < it->second.node) it->second = n.inputs[0];
        }
    for (auto& [id, n] : replace) {
      if (auto it = attention.find(id); it != attention.end()) {
        n = build_attention(&out, g.node(id), it->second);
        added = true;
      }
      if (n.kind == OpKind::kRotaryEmbedding) {
        for (size_t k = 1; k < 3; ++k) n.inputs[k] = half_cache(&out, n.inputs[k], batch_of.at({n.inputs[k].node, n.inputs[k].index}), &caches);
        added = true;
      }
      out.mutable_node(id) = std::move(n);
    }
    if (added) {
      auto sorted = topo_sorted(out.nodes(), out.outputs(), out.meta());
      if (!sorted) return g;
      out = std::move(*sorted);
    }
    out = remove_dead_nodes(std::move(out));
  }
  // No-op Casts outside the chains (those inside went with them).
  const int casts = bypass_noop_casts(&out);
  if (casts > 0) out = remove_dead_nodes(std::move(out));
  if (replace.empty() && casts == 0) return g;
  st.noop_cast += casts;
  st.removed_nodes += static_cast<int>(g.num_ops() - out.num_ops());
  return out;
}

std::vector<std::vector<NodeId>> rms_norm_chains(const Graph& g) {
  Matcher m(g);
  std::vector<std::vector<NodeId>> out;
  for (size_t i = g.size(); i-- > 0;) {
    std::vector<NodeId> chain;
    if (m.rms_norm(static_cast<NodeId>(i), &chain)) {
      m.claim(chain);
      out.push_back(std::move(chain));
    }
  }
  return out;
}

}  // namespace rlflow::ir
