// RMSNorm rooted at the scale Mul: x / sqrt(mean(x^2) + eps) * scale, the mean over the trailing axes,
// the division written as Div(x, rms) or as x * (1 / rms) (Div(1, .) or Reciprocal), the factors in
// either order, through float32 no-op Casts: PyTorch's and HF LLaMA's RMSNorm below opset 23.
#include "fusion.h"

namespace rlflow::ir::fusion {
namespace {

// 1 / s written as Div(1, s) (PyTorch's rsqrt) or Reciprocal(s) (an op the IR keeps opaque), interior:
// returns s.
std::optional<ValueRef> reciprocal_of(const Matcher& m, ValueRef v) {
  const Node& n = m.node(v);
  if (!m.interior(v.node)) return std::nullopt;
  if (n.kind == OpKind::kDiv && m.scalar(n.inputs[0]) == 1.0) return n.inputs[1];
  if (m.opaque_named(n, "Reciprocal") && n.inputs.size() == 1) return n.inputs[0];
  return std::nullopt;
}

class RMSNorm final : public Fusion {
 public:
  RMSNorm() : Fusion({"rms_norm", "RMSNormalization", kRMSNormOpset, {"rms_norm"}, "x / sqrt(mean(x^2) + eps) * scale"}) {}

  std::optional<Match> match(const Matcher& m, NodeId root, std::string* why) const override {
    const Node& r = m.graph().node(root);
    if (r.kind != OpKind::kMul || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    const int64_t rank = r.outputs[0].rank();
    for (int k = 0; k < 2; ++k) {
      std::vector<NodeId> nodes{root};
      const ValueRef scale = r.inputs[static_cast<size_t>(1 - k)];
      if (m.node(scale).kind != OpKind::kWeight) continue;
      const ValueRef normed = m.through_noop_cast(r.inputs[static_cast<size_t>(k)], &nodes);
      const Node& nn = m.node(normed);
      if (!m.interior(normed.node)) continue;
      // normed = Div(x, rms) or Mul(x, 1 / rms)
      std::optional<ValueRef> x, rms;
      std::optional<NodeId> inverse;
      if (nn.kind == OpKind::kDiv) {
        x = nn.inputs[0];
        rms = nn.inputs[1];
      } else if (nn.kind == OpKind::kMul) {
        for (int j = 0; j < 2 && !rms; ++j)
          if (auto s = reciprocal_of(m, nn.inputs[static_cast<size_t>(j)])) {
            x = nn.inputs[static_cast<size_t>(1 - j)];
            rms = s;
            inverse = nn.inputs[static_cast<size_t>(j)].node;
          }
      }
      if (!x || !rms) continue;
      const Node& sn = m.node(*rms);
      if (sn.kind != OpKind::kSqrt) continue;
      // From here on the Mul is a candidate: weight * (x / Sqrt(..)).
      if (m.type(*x) != r.outputs[0]) {
        *why = "x's type is not the output's";
        continue;
      }
      if (!m.interior(rms->node)) {
        *why = "the Sqrt is read outside the chain";
        continue;
      }
      auto ms_eps = m.plus_constant(sn.inputs[0]);
      if (!ms_eps) {
        *why = "the Sqrt's input is not an interior mean + eps";
        continue;
      }
      const ValueRef ms = ms_eps->first;
      const Node& mn = m.node(ms);
      if (mn.kind != OpKind::kReduceMean || !m.interior(ms.node)) {
        *why = "the mean is not an interior ReduceMean";
        continue;
      }
      const auto axis = m.trailing_axes(std::get<AxesParams>(mn.params), rank);
      if (!axis) {
        *why = "the mean is not over the trailing axes, kept";
        continue;
      }
      // The square of x: Pow(x, 2) or Mul(x, x).
      const ValueRef sq = mn.inputs[0];
      const Node& qn = m.node(sq);
      const bool square = (qn.kind == OpKind::kPow && qn.inputs[0] == *x && m.scalar(qn.inputs[1]) == 2.0) ||
                          (qn.kind == OpKind::kMul && qn.inputs[0] == *x && qn.inputs[1] == *x);
      if (!square || !m.interior(sq.node)) {
        *why = "the mean is not of an interior x^2 of the same x";
        continue;
      }
      const Shape norm(r.outputs[0].shape.begin() + *axis, r.outputs[0].shape.end());
      const auto& st = m.type(scale);
      auto b = broadcast_shapes(st.shape, norm);
      if (!b || *b != norm || st.dtype != r.outputs[0].dtype) {
        *why = "the scale does not broadcast to the normalised shape";
        continue;
      }
      nodes.push_back(normed.node);
      if (inverse) nodes.push_back(*inverse);
      nodes.insert(nodes.end(), {rms->node, sn.inputs[0].node, ms.node, sq.node});
      return Match{fused_node(r, OpKind::kRMSNorm, NormParams{*axis, ms_eps->second}, {*x, scale}), std::move(nodes), "", {}};
    }
    return std::nullopt;
  }
};

}  // namespace

const Fusion& rms_norm_fusion() {
  static const RMSNorm f;
  return f;
}

}  // namespace rlflow::ir::fusion
