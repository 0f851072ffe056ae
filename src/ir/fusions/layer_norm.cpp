// LayerNorm rooted at the bias Add: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma + beta,
// the means over the trailing axes, the square as Pow(d, 2) or Mul(d, d), as exporters write it below
// opset 17.
#include "fusion.h"

namespace rlflow::ir::fusion {
namespace {

class LayerNorm final : public Fusion {
 public:
  LayerNorm() : Fusion({"layer_norm", "LayerNormalization", kLayerNormOpset, {"layer_norm"}, "(x - mean) / sqrt(var + eps) * gamma + beta"}) {}

  std::optional<Match> match(const Matcher& m, NodeId root, std::string* why) const override {
    const Node& r = m.graph().node(root);
    if (r.kind != OpKind::kAdd || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    const int64_t rank = r.outputs[0].rank();
    for (int k = 0; k < 2; ++k) {
      const ValueRef scaled = r.inputs[static_cast<size_t>(k)], beta = r.inputs[static_cast<size_t>(1 - k)];
      const Node& sn = m.node(scaled);
      if (sn.kind != OpKind::kMul || !m.interior(scaled.node) || m.node(beta).kind != OpKind::kWeight) continue;
      for (int j = 0; j < 2; ++j) {
        const ValueRef normed = sn.inputs[static_cast<size_t>(j)], gamma = sn.inputs[static_cast<size_t>(1 - j)];
        const Node& nn = m.node(normed);
        if (nn.kind != OpKind::kDiv || !m.interior(normed.node) || m.node(gamma).kind != OpKind::kWeight) continue;
        // From here on the Add is a candidate: Div(.., ..) * weight + weight.
        const ValueRef d = nn.inputs[0], sd = nn.inputs[1];
        const Node& dn = m.node(d);
        const Node& sdn = m.node(sd);
        if (dn.kind != OpKind::kSub || sdn.kind != OpKind::kSqrt || !m.interior(sd.node)) {
          *why = "not (x - mean) / Sqrt(..), or the Sqrt is read elsewhere";
          continue;
        }
        auto var_eps = m.plus_constant(sdn.inputs[0]);
        if (!var_eps) {
          *why = "the Sqrt's input is not an interior var + eps";
          continue;
        }
        const ValueRef var = var_eps->first, x = dn.inputs[0], mean = dn.inputs[1];
        const Node& vn = m.node(var);
        const Node& mn = m.node(mean);
        if (vn.kind != OpKind::kReduceMean || !m.interior(var.node) || mn.kind != OpKind::kReduceMean || !m.interior(mean.node) ||
            mn.inputs[0] != x) {
          *why = "the variance or the mean is not an interior ReduceMean of x";
          continue;
        }
        const auto& ma = std::get<AxesParams>(mn.params);
        const auto axis = m.trailing_axes(ma, rank);
        if (ma != std::get<AxesParams>(vn.params) || !axis) {
          *why = "the means are not over the same trailing axes, kept";
          continue;
        }
        if (m.type(x) != r.outputs[0]) {
          *why = "x's type is not the output's";
          continue;
        }
        // The square of d: Pow(d, 2) or Mul(d, d); d is read by it and by the Div, nothing else.
        const ValueRef sq = vn.inputs[0];
        const Node& qn = m.node(sq);
        const bool square = (qn.kind == OpKind::kPow && qn.inputs[0] == d && m.scalar(qn.inputs[1]) == 2.0) ||
                            (qn.kind == OpKind::kMul && qn.inputs[0] == d && qn.inputs[1] == d);
        if (!square || !m.interior(sq.node) || !m.interior(d.node, qn.kind == OpKind::kMul ? 3 : 2)) {
          *why = "the variance is not the mean of (x - mean)^2, or x - mean is read elsewhere";
          continue;
        }
        const Shape norm(r.outputs[0].shape.begin() + *axis, r.outputs[0].shape.end());
        auto param_ok = [&](ValueRef v) { return m.type(v).shape == norm && m.type(v).dtype == r.outputs[0].dtype; };
        if (!param_ok(gamma) || !param_ok(beta)) {
          *why = "gamma or beta is not of the normalised shape";
          continue;
        }
        std::vector<NodeId> chain{root, scaled.node, normed.node, d.node, sd.node, sdn.inputs[0].node, var.node, mean.node, sq.node};
        return Match{fused_node(r, OpKind::kLayerNorm, NormParams{*axis, var_eps->second}, {x, gamma, beta}), std::move(chain), "", {}};
      }
    }
    return std::nullopt;
  }
};

}  // namespace

const Fusion& layer_norm_fusion() {
  static const LayerNorm f;
  return f;
}

}  // namespace rlflow::ir::fusion
