// HardSwish rooted at the Mul: x * HardSigmoid(x) with alpha 1/6 and beta 1/2, in either order, as
// exporters write it below opset 14.
#include "fusion.h"

namespace rlflow::ir::fusion {
namespace {

class HardSwish final : public Fusion {
 public:
  HardSwish() : Fusion({"hard_swish", "HardSwish", kHardSwishOpset, {"hard_swish"}, "x * HardSigmoid(x; 1/6, 1/2)"}) {}

  std::optional<Match> match(const Matcher& m, NodeId root, std::string* why) const override {
    const Node& r = m.graph().node(root);
    if (r.kind != OpKind::kMul || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      const ValueRef x = r.inputs[static_cast<size_t>(k)], h = r.inputs[static_cast<size_t>(1 - k)];
      const Node& hn = m.node(h);
      if (hn.kind != OpKind::kHardSigmoid) continue;
      if (hn.inputs[0] != x || !m.interior(h.node) || m.type(x) != r.outputs[0]) {
        *why = "the HardSigmoid is not of the other factor, or is read elsewhere";
        continue;
      }
      const auto& p = std::get<HardSigmoidParams>(hn.params);
      if (!near(p.alpha, 1.0 / 6.0) || !near(p.beta, 0.5)) {
        *why = "HardSigmoid alpha " + num(p.alpha) + " beta " + num(p.beta) + ", not 1/6 and 1/2";
        continue;
      }
      return Match{fused_node(r, OpKind::kHardSwish, {}, {x}), {root, h.node}, "", {}};
    }
    return std::nullopt;
  }
};

}  // namespace

const Fusion& hard_swish_fusion() {
  static const HardSwish f;
  return f;
}

}  // namespace rlflow::ir::fusion
