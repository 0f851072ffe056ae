// HF LLaMA's rotary embedding rooted at the Add: x * cos + rotate_half(x) * sin, with
// rotate_half(x) = Concat(Neg(x[..., D/2:]), x[..., :D/2]), x (B, H, S, D), cos and sin (B, 1, S, D)
// or (1, 1, S, D) with provably equal halves, so that they are the op's (B, S, D/2) caches written
// twice. Matched below opset 23; the caches are cut to their first half when the op is built.
#include <algorithm>
#include <map>

#include "fusion.h"

namespace rlflow::ir::fusion {
namespace {

// Whether v's two halves along its last axis are provably equal: a Weight whose halves are, or an
// elementwise chain (Cast, Cos, Sin, arithmetic with a scalar constant) over Concat(f, f) on the last
// axis, as HF computes cos(cat(freqs, freqs)). An elementwise op of a Concat of equal halves has
// equal halves.
bool equal_halves(const Matcher& m, ValueRef v, int depth = 0) {
  const Node& n = m.node(v);
  const TensorType& t = m.type(v);
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
    return std::find(a.begin(), a.end(), t.rank() - 1) == a.end() && equal_halves(m, n.inputs[0], depth + 1);
  }
  if (n.kind == OpKind::kCast || m.opaque_unary(n, "Cos") || m.opaque_unary(n, "Sin"))
    return m.type(n.inputs[0]).shape == t.shape && equal_halves(m, n.inputs[0], depth + 1);
  if (n.kind == OpKind::kMul || n.kind == OpKind::kDiv || n.kind == OpKind::kAdd || n.kind == OpKind::kSub) {
    for (int k = 0; k < 2; ++k)
      if (m.scalar(n.inputs[static_cast<size_t>(k)]) && m.type(n.inputs[static_cast<size_t>(1 - k)]).shape == t.shape)
        return equal_halves(m, n.inputs[static_cast<size_t>(1 - k)], depth + 1);
  }
  return false;
}

// Slice(x, [b, e) on the last axis, step 1), interior.
bool last_axis_slice(const Matcher& m, ValueRef v, ValueRef x, int64_t b, int64_t e) {
  const Node& n = m.node(v);
  if (n.kind != OpKind::kSlice || n.inputs[0] != x || !m.interior(v.node)) return false;
  const auto& p = std::get<SliceParams>(n.params);
  return p.axes == std::vector<int64_t>{m.type(x).rank() - 1} && p.starts == std::vector<int64_t>{b} && p.ends == std::vector<int64_t>{e} &&
         p.steps == std::vector<int64_t>{1};
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
    out = add_weight(g, Tensor::from_doubles(t.dtype, half, v), src.name + "_half");
  } else {
    const ValueRef sliced = add_node(g, OpKind::kSlice, SliceParams{{0}, {h}, {3}, {1}}, {c}, {t.dtype, {t.shape[0], 1, t.shape[2], h}});
    out = add_node(g, OpKind::kSqueeze, AxesParams{{1}, true}, {sliced}, {t.dtype, half});
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

class RotaryEmbedding final : public Fusion {
 public:
  RotaryEmbedding()
      : Fusion({"rotary_embedding", "RotaryEmbedding", kRotaryEmbeddingOpset, {"rotary_embedding"},
                "x * cos + Concat(-x[.., D/2:], x[.., :D/2]) * sin (HF's rotate_half)"}) {}

  std::optional<Match> match(const Matcher& m, NodeId root, std::string* why) const override {
    const Node& r = m.graph().node(root);
    if (r.kind != OpKind::kAdd || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype) || r.outputs[0].rank() != 4) return std::nullopt;
    const Shape& xs = r.outputs[0].shape;
    const int64_t d = xs[3], h = d / 2;
    auto cache_ok = [&](ValueRef c) {
      const TensorType& t = m.type(c);
      // The dynamo exporter computes the caches from positions without a batch axis: (1, 1, S, D),
      // broadcast over the batch; half_cache then expands them to the batch.
      return t.dtype == r.outputs[0].dtype && (t.shape == Shape{xs[0], 1, xs[2], d} || t.shape == Shape{1, 1, xs[2], d}) &&
             equal_halves(m, c);
    };
    for (int k = 0; k < 2; ++k) {
      const ValueRef a = r.inputs[static_cast<size_t>(k)], b = r.inputs[static_cast<size_t>(1 - k)];
      const Node& an = m.node(a);
      const Node& bn = m.node(b);
      if (an.kind != OpKind::kMul || bn.kind != OpKind::kMul || !m.interior(a.node) || !m.interior(b.node)) continue;
      for (int j = 0; j < 2; ++j) {
        const ValueRef x = an.inputs[static_cast<size_t>(j)], cos = an.inputs[static_cast<size_t>(1 - j)];
        if (m.type(x) != r.outputs[0]) continue;
        for (int i = 0; i < 2; ++i) {
          const ValueRef rot = bn.inputs[static_cast<size_t>(i)], sin = bn.inputs[static_cast<size_t>(1 - i)];
          const Node& cn = m.node(rot);
          if (cn.kind != OpKind::kConcat || cn.inputs.size() != 2 || !m.interior(rot.node) || std::get<AxisParams>(cn.params).axis != 3) continue;
          // From here on the Add is a candidate: x * c + Concat(.., ..) * s.
          if (d % 2 != 0) {
            *why = "odd head size";
            continue;
          }
          const ValueRef neg = cn.inputs[0], first = cn.inputs[1];
          const Node& nn = m.node(neg);
          if (!m.opaque_unary(nn, "Neg") || !m.interior(neg.node)) {
            *why = "the Concat's first half is not an interior Neg";
            continue;
          }
          if (!last_axis_slice(m, nn.inputs[0], x, h, d) || !last_axis_slice(m, first, x, 0, h)) {
            *why = "the Concat is not of x's two halves, swapped";
            continue;
          }
          if (!cache_ok(cos) || !cache_ok(sin)) {
            *why = "cos or sin is not of shape (B|1, 1, S, D) with provably equal halves";
            continue;
          }
          std::vector<NodeId> chain{root, a.node, b.node, rot.node, neg.node, nn.inputs[0].node, first.node};
          return Match{fused_node(r, OpKind::kRotaryEmbedding, RotaryParams{}, {x, cos, sin}), std::move(chain), "", {}};
        }
      }
    }
    return std::nullopt;
  }

  // The fused nodes read (B, S, D/2) caches, cut from the 4-D cos and sin once per value.
  bool build(const Graph& /*in*/, Graph* out, const std::vector<Match*>& matches) const override {
    if (matches.empty()) return false;
    std::map<std::pair<NodeId, int>, ValueRef> caches;
    // A cache expanded to the batch reads the batch off the earliest x among the rotary ops that
    // share it: every other one comes after that x, so no cycle can form.
    std::map<std::pair<NodeId, int>, ValueRef> batch_of;
    for (const Match* mt : matches)
      for (size_t k = 1; k < 3; ++k) {
        const Node& n = mt->node;
        auto [it, fresh] = batch_of.emplace(std::make_pair(n.inputs[k].node, n.inputs[k].index), n.inputs[0]);
        if (!fresh && n.inputs[0].node < it->second.node) it->second = n.inputs[0];
      }
    for (Match* mt : matches) {
      Node& n = mt->node;
      for (size_t k = 1; k < 3; ++k) n.inputs[k] = half_cache(out, n.inputs[k], batch_of.at({n.inputs[k].node, n.inputs[k].index}), &caches);
    }
    return true;
  }
};

}  // namespace

const Fusion& rotary_embedding_fusion() {
  static const RotaryEmbedding f;
  return f;
}

}  // namespace rlflow::ir::fusion
