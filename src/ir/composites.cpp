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
      return t.dtype == r.outputs[0].dtype && t.shape == Shape{xs[0], 1, xs[2], d} && equal_halves(c);
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

  void claim(const std::vector<NodeId>& nodes) {
    for (auto id : nodes) claimed_[static_cast<size_t>(id)] = true;
  }

 private:
  const Graph& g_;
  std::vector<std::vector<Use>> uses_;
  std::vector<bool> is_output_;
  std::vector<bool> claimed_;
};

// The (B, S, D/2) cache RotaryEmbedding reads for a (B, 1, S, D) cos or sin whose halves are equal:
// its first half, as a new weight when it is one, else sliced off (once per value, for q and k alike).
ValueRef half_cache(Graph* g, ValueRef c, std::map<std::pair<NodeId, int>, ValueRef>* memo) {
  const auto key = std::make_pair(c.node, c.index);
  if (auto it = memo->find(key); it != memo->end()) return it->second;
  const TensorType t = g->type(c);
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
  memo->emplace(key, out);
  return out;
}

}  // namespace

Graph recognise_composites(const Graph& g, CompositeStats* stats, std::optional<int64_t> opset) {
  const int64_t v = opset ? *opset : g.meta().opset("");
  CompositeStats local;
  CompositeStats& st = stats ? *stats : local;
  Matcher m(g);
  // Roots are visited last to first so a chain is claimed whole before a node inside it could be
  // taken as another chain's root. The fused node replaces the root in place: its inputs all come
  // before the root, so the order stays topological, and the chain's other nodes fall dead.
  std::vector<std::pair<NodeId, Node>> replace;
  for (size_t i = g.size(); i-- > 0;) {
    const auto id = static_cast<NodeId>(i);
    std::vector<NodeId> chain;
    if (auto n = v >= kLayerNormOpset ? m.layer_norm(id, &chain) : std::nullopt) {
      ++st.layer_norm;
      m.claim(chain);
      replace.emplace_back(id, std::move(*n));
    } else if (auto gn = v >= kGeluOpset ? m.gelu(id, &chain) : std::nullopt) {
      ++(std::get<GeluParams>(gn->params).tanh ? st.gelu_tanh : st.gelu);
      m.claim(chain);
      replace.emplace_back(id, std::move(*gn));
    } else if (auto hs = v >= kHardSwishOpset ? m.hard_swish(id, &chain) : std::nullopt) {
      ++st.hard_swish;
      m.claim(chain);
      replace.emplace_back(id, std::move(*hs));
    } else if (auto rn = v >= kRMSNormOpset ? m.rms_norm(id, &chain) : std::nullopt) {
      ++st.rms_norm;
      m.claim(chain);
      replace.emplace_back(id, std::move(*rn));
    } else if (auto re = v >= kRotaryEmbeddingOpset ? m.rotary(id, &chain) : std::nullopt) {
      ++st.rotary_embedding;
      m.claim(chain);
      replace.emplace_back(id, std::move(*re));
    }
  }
  if (replace.empty()) return g;
  Graph out = g;
  // A rotary embedding reads caches that are new nodes, added after its root: sorted again below.
  bool added = false;
  std::map<std::pair<NodeId, int>, ValueRef> caches;
  for (auto& [id, n] : replace) {
    if (n.kind == OpKind::kRotaryEmbedding) {
      for (size_t k = 1; k < 3; ++k) n.inputs[k] = half_cache(&out, n.inputs[k], &caches);
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
