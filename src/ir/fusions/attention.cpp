// Attention rooted at the last MatMul: MatMul(Softmax(scale * MatMul(Q, K^T) [+ mask], axis -1), V),
// eager attention as HF and torch.onnx write it, 4-D or nn.MultiheadAttention's 3-D, HF LLaMA's
// repeat_kv peeled into GQA. Matched below opset 23; the op and the nodes around it (K's transpose,
// the mask at its full shape, the heads axis of 3-D operands) are built once the graph is matched.
#include <algorithm>
#include <cmath>

#include "fusion.h"

namespace rlflow::ir::fusion {
namespace {

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
  // The float mask may hold float's lowest (torch's masked_fill(finfo.min)): written as
  // Max(mask, kMaskFloor). See kMaskFloor.
  bool clamp_mask = false;
};

// onnxruntime's CPU Attention (through 1.32) writes zeros for a row whose every score is masked to
// exactly float's lowest (or -inf), where the ONNX op and the chain it replaces give the mean of V
// (softmax over equal scores: measured, tests/data/decoders/llama.dynamo20.onnx at batch 3, whose
// padding mask is Where(c, 0, finfo.min)). A mask floored at -1e30 instead gives the same result as
// the chain in both: scores under 1e22 in size vanish beside either value when added, so a fully
// masked row is uniform and a masked entry of any other row weighs exp(-1e30) = 0.
constexpr double kMaskFloor = -1e30;

// The attention recogniser: the shared Matcher, and the pieces of the chain only attention has.
class AttentionMatcher {
 public:
  explicit AttentionMatcher(const Matcher& m) : m_(m) {}

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
    const Shape& xs = m_.graph().type(un.inputs[0]).shape;
    const Shape& es = m_.graph().type(e).shape;
    const Shape& rs = m_.graph().type(v).shape;
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
  std::optional<AttentionPlan> attention(NodeId root, std::vector<NodeId>* chain, std::string* why) const {
    const auto no = [why](const char* w) -> std::optional<AttentionPlan> {
      *why = w;
      return std::nullopt;
    };
    const Node& r = m_.graph().node(root);
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
    if (pn.kind != OpKind::kSoftmax) return std::nullopt;  // not a candidate: a MatMul of anything but probabilities
    if (!interior(probs.node, nan_guard ? 2 : 1) || std::get<AxisParams>(pn.params).axis != rank - 1)
      return no("the Softmax is read outside the chain or is not over the last axis");
    nodes.push_back(probs.node);
    ValueRef x = through_noop_casts(pn.inputs[0], &nodes);
    const Shape scores_shape = m_.graph().type(x).shape;
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
      if (mn.kind != OpKind::kMatMul || !interior(s.node) || m_.graph().type(s).shape != scores_shape) return false;
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
        if (m_.graph().type(a).shape != scores_shape || m_.graph().type(m).dtype != DType::kFloat32) continue;
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
    if (!found) return no("the Softmax input is not [masked] [scaled] MatMul(Q, K^T) of the scores' shape, interior");
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
    if (nan_guard && !finite_mask(plan)) return no("a NaN guard over a mask that is not provably finite");
    // Unguarded, a row the mask hides wholly with -inf is NaN in the chain, and zeros in
    // onnxruntime's Attention (or the mean of V once floored): a mask that can hold -inf stays a chain.
    if (!nan_guard && plan.mask && may_be_infinite(*plan.mask, 0))
      return no("the mask may hold -inf (a float input, an infinite constant or what is computed from one): a wholly masked row "
                "is NaN in the chain and not in Attention");
    // Types and shapes: Q (.., S, E), K (.., L, E), V (.., L, Ev), the batch dims equal.
    const TensorType& qt = m_.graph().type(plan.q);
    const TensorType& vt = m_.graph().type(plan.v);
    TensorType kt = m_.graph().type(plan.k);
    if (plan.k_perm) {
      Shape s(kt.shape.size());
      if (plan.k_perm->size() != s.size()) return no("K's transpose is not of its rank");
      for (size_t i = 0; i < s.size(); ++i) s[i] = kt.shape[static_cast<size_t>((*plan.k_perm)[i])];
      kt.shape = s;
    }
    if (qt.dtype != DType::kFloat32 || kt.dtype != DType::kFloat32 || vt.dtype != DType::kFloat32) return no("Q, K or V is not float32");
    if (qt.rank() != rank || kt.rank() != rank || vt.rank() != rank) return no("Q, K and V are not all of the output's rank");
    const size_t sa = static_cast<size_t>(rank - 2), ea = static_cast<size_t>(rank - 1);
    for (size_t i = 0; i < sa; ++i)
      if (qt.shape[i] != kt.shape[i] || qt.shape[i] != vt.shape[i]) return no("Q, K and V differ in their batch or head axes");
    if (kt.shape[ea] != qt.shape[ea] || vt.shape[sa] != kt.shape[sa] || r.outputs[0].shape[sa] != qt.shape[sa] ||
        r.outputs[0].shape[ea] != vt.shape[ea])
      return no("the shapes of Q, K, V and the output do not fit one attention");
    if (plan.mask) {
      const TensorType& mt = m_.graph().type(*plan.mask);
      auto b = broadcast_shapes(mt.shape, scores_shape);
      if (!b || *b != scores_shape || (plan.bias && !broadcast_shapes(mt.shape, plan.bias->shape())))
        return no("the mask does not broadcast to the scores");
      plan.clamp_mask = mt.dtype == DType::kFloat32 && !above_floor(*plan.mask);
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

  // Whether a float value may hold an infinity: a float graph input (an additive mask the caller
  // fills), a constant holding one, a division, an op not listed here, or a value-moving or
  // elementwise op listed below over such a value. A Cast from an integer or bool type is finite.
  // Arithmetic over finite values counts as finite, though it can overflow (2 * finfo.min): from a
  // finite-derived mask, a 0/1 pattern times a finite fill, it does not.
  bool may_be_infinite(ValueRef v, int depth) const {
    if (depth > 32) return true;
    const Node& n = node(v);
    const auto& g = m_.graph();
    auto any_input = [&](std::initializer_list<size_t> slots) {
      for (size_t k : slots)
        if (k < n.inputs.size() && may_be_infinite(n.inputs[k], depth + 1)) return true;
      return false;
    };
    auto every_input = [&] {
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (may_be_infinite(n.inputs[k], depth + 1)) return true;
      return false;
    };
    switch (n.kind) {
      case OpKind::kInput:
        return is_float(g.type(v).dtype);
      case OpKind::kWeight: {
        if (!n.value) return true;
        const auto x = n.value->as_double();
        return std::any_of(x.begin(), x.end(), [](double e) { return std::isinf(e); });
      }
      case OpKind::kCast:
        return is_float(g.type(n.inputs[0]).dtype) && any_input({0});
      case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul: case OpKind::kScalarMul:
        return any_input({0, 1});
      case OpKind::kUnsqueeze: case OpKind::kSqueeze: case OpKind::kReshape: case OpKind::kTranspose: case OpKind::kSlice:
      case OpKind::kGather: case OpKind::kFlatten:
        return any_input({0});
      case OpKind::kConcat:
        return every_input();
      case OpKind::kOpaque: {
        const auto& op = std::get<OpaqueParams>(n.params).op_type;
        if (op == "Where") return any_input({1, 2});
        if (op == "Cast") return n.inputs.empty() || (is_float(g.type(n.inputs[0]).dtype) && any_input({0}));
        if (op == "Expand" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Slice" || op == "Transpose" ||
            op == "Gather" || op == "GatherND" || op == "GatherElements" || op == "Identity" || op == "Tile")
          return any_input({0});
        if (op == "Add" || op == "Sub" || op == "Mul" || op == "Neg" || op == "Min" || op == "Max") return every_input();
        return true;
      }
      default:
        return true;
    }
  }

  // Whether a float mask's values are all above kMaskFloor, provably: a constant, or a Where of
  // two scalars.
  bool above_floor(ValueRef mask) const {
    const Node& mn = node(mask);
    auto above = [](double e) { return e > kMaskFloor; };
    if (mn.kind == OpKind::kWeight && mn.value) {
      const auto v = mn.value->as_double();
      return std::all_of(v.begin(), v.end(), above);
    }
    if (!opaque_named(mn, "Where") || mn.inputs.size() != 3) return false;
    auto a = scalar(mn.inputs[1]), b = scalar(mn.inputs[2]);
    return a && b && above(*a) && above(*b);
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
    const Shape& ks = m_.graph().type(k).shape;
    if (ks.size() != 4 || m_.graph().type(r1).shape != Shape{ks[0] * ks[1], ks[2], ks[3]} || m_.graph().type(kt).shape != Shape{ks[0], ks[1], ks[3], ks[2]})
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

 private:
  const Node& node(ValueRef v) const { return m_.node(v); }
  std::optional<double> scalar(ValueRef v) const { return m_.scalar(v); }
  bool interior(NodeId id, size_t readers = 1) const { return m_.interior(id, readers); }
  ValueRef through_noop_casts(ValueRef v, std::vector<NodeId>* nodes) const { return m_.through_noop_casts(v, nodes); }
  bool reshape(const Node& n) const { return m_.reshape(n); }
  bool opaque_named(const Node& n, std::string_view type) const { return m_.opaque_named(n, type); }
  bool opaque_unary(const Node& n, std::string_view type) const { return m_.opaque_unary(n, type); }

  const Matcher& m_;
};

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
  if (mask && p.clamp_mask)
    mask = add_opaque(g, "Max", {*mask, add_weight(g, Tensor::from_doubles(DType::kFloat32, {}, {kMaskFloor}), root.name + "_mask_floor")},
                      g->type(*mask));
  if (p.bias) {
    TensorPtr bias = p.bias;
    if (bias->dtype() == DType::kFloat32) {  // a constant's values floored where they are below kMaskFloor
      auto v = bias->as_double();
      auto low = [](double e) { return std::isfinite(e) && e < kMaskFloor; };  // -inf stays: not a masked_fill(finfo.min)
      if (std::any_of(v.begin(), v.end(), low)) {
        for (auto& e : v) e = low(e) ? kMaskFloor : e;
        bias = Tensor::from_doubles(DType::kFloat32, bias->shape(), v);
      }
    }
    const ValueRef b = add_weight(g, bias, root.name + "_mask_bias");
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


class Attention final : public Fusion {
 public:
  Attention()
      : Fusion({"attention", "Attention", kAttentionOpset, {"attention"},
                "MatMul(Softmax(scale * MatMul(Q, K^T) [+ mask]), V), with GQA's repeat_kv"}) {}

  std::optional<Match> match(const Matcher& m, NodeId root, std::string* why) const override {
    std::vector<NodeId> chain;
    auto plan = AttentionMatcher(m).attention(root, &chain, why);
    if (!plan) return std::nullopt;
    return Match{Node{}, std::move(chain), "", std::move(*plan)};
  }

  bool build(const Graph& in, Graph* out, const std::vector<Match*>& matches) const override {
    for (Match* mt : matches) mt->node = build_attention(out, in.node(mt->chain.front()), std::any_cast<const AttentionPlan&>(mt->plan));
    return !matches.empty();
  }
};

}  // namespace

const Fusion& attention_fusion() {
  static const Attention f;
  return f;
}

}  // namespace rlflow::ir::fusion
