// GELU rooted at the outer Mul: 0.5 * x * (1 + erf(x / sqrt 2)) (exact) or
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) (tanh approximation), multiplied in any
// order, as PyTorch writes them below opset 20. Counted as gelu and gelu_tanh.
#include "fusion.h"

namespace rlflow::ir::fusion {
namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // the tanh approximation's sqrt(2/pi)
constexpr double kTanhCubic = 0.044715;

// x^3 written as Pow(x, 3) or as a product of three x: returns x.
std::optional<ValueRef> cube_of(const Matcher& m, const Product& p, std::vector<NodeId>* chain) {
  if (p.factors.size() == 3 && p.factors[0] == p.factors[1] && p.factors[1] == p.factors[2]) return p.factors[0];
  if (p.factors.size() != 1) return std::nullopt;
  const Node& n = m.node(p.factors[0]);
  if (n.kind != OpKind::kPow || !m.interior(p.factors[0].node)) return std::nullopt;
  auto e = m.scalar(n.inputs[1]);
  if (!e || *e != 3.0) return std::nullopt;
  chain->push_back(p.factors[0].node);
  return n.inputs[0];
}

class Gelu final : public Fusion {
 public:
  Gelu()
      : Fusion({"gelu", "Gelu", kGeluOpset, {"gelu", "gelu_tanh"},
                "0.5 * x * (1 + erf(x / sqrt 2)), or its tanh approximation"}) {}

  std::optional<Match> match(const Matcher& m, NodeId root, std::string* why) const override {
    const Node& r = m.graph().node(root);
    if (r.kind != OpKind::kMul || r.outputs.size() != 1 || !is_float(r.outputs[0].dtype)) return std::nullopt;
    Product top = m.product({root, 0}, true);
    if (top.factors.size() != 2) return std::nullopt;
    // A candidate has a factor c + Erf(.) or c + Tanh(.); any other Mul is not one.
    const auto erf_like = [&](ValueRef s) {
      auto pc = m.plus_constant(s);
      return pc && (m.node(pc->first).kind == OpKind::kErf || m.node(pc->first).kind == OpKind::kTanh);
    };
    if (!erf_like(top.factors[0]) && !erf_like(top.factors[1])) return std::nullopt;
    if (!near(top.scale, 0.5)) {
      *why = "constant factor " + num(top.scale) + ", not 0.5";
      return std::nullopt;
    }
    for (int k = 0; k < 2; ++k) {
      const ValueRef x = top.factors[static_cast<size_t>(k)], s = top.factors[static_cast<size_t>(1 - k)];
      auto one_plus = m.plus_constant(s);
      if (!one_plus) continue;
      if (m.type(x) != r.outputs[0]) {
        *why = "x's type is not the output's";
        continue;
      }
      if (!near(one_plus->second, 1.0)) {
        *why = num(one_plus->second) + " + t, not 1 + t";
        continue;
      }
      const ValueRef t = one_plus->first;
      const Node& tn = m.node(t);
      if ((tn.kind != OpKind::kErf && tn.kind != OpKind::kTanh) || !m.interior(t.node)) {
        *why = "1 + t where t is not an interior Erf or Tanh";
        continue;
      }
      std::vector<NodeId> nodes = top.interior;
      nodes.push_back(s.node);
      nodes.push_back(t.node);
      Product arg = m.product(tn.inputs[0], false);
      if (arg.factors.empty() || arg.interior.empty()) {
        *why = "the Erf/Tanh argument is not a scaled product";
        continue;
      }
      nodes.insert(nodes.end(), arg.interior.begin(), arg.interior.end());
      if (tn.kind == OpKind::kErf) {
        if (arg.factors.size() != 1 || arg.factors[0] != x || !near(arg.scale, 1.0 / kSqrt2)) {
          *why = "erf argument is not x / sqrt 2 (scale " + num(arg.scale) + ")";
          continue;
        }
      } else {
        // sqrt(2/pi) * (x + 0.044715 * x^3)
        if (arg.factors.size() != 1 || !near(arg.scale, kSqrt2OverPi)) {
          *why = "tanh argument scale " + num(arg.scale) + ", not sqrt(2/pi)";
          continue;
        }
        const ValueRef sum = arg.factors[0];
        const Node& sn = m.node(sum);
        if (sn.kind != OpKind::kAdd || !m.interior(sum.node)) {
          *why = "tanh argument is not sqrt(2/pi) * (x + c x^3)";
          continue;
        }
        nodes.push_back(sum.node);
        bool ok = false;
        for (int j = 0; j < 2 && !ok; ++j) {
          if (sn.inputs[static_cast<size_t>(j)] != x) continue;
          Product cubic = m.product(sn.inputs[static_cast<size_t>(1 - j)], false);
          if (cubic.interior.empty() || !near(cubic.scale, kTanhCubic)) continue;
          std::vector<NodeId> cube_nodes = cubic.interior;
          auto base = cube_of(m, cubic, &cube_nodes);
          if (!base || *base != x) continue;
          nodes.insert(nodes.end(), cube_nodes.begin(), cube_nodes.end());
          ok = true;
        }
        if (!ok) {
          *why = "no 0.044715 * x^3 term of the same x";
          continue;
        }
      }
      const bool tanh = tn.kind == OpKind::kTanh;
      return Match{fused_node(r, OpKind::kGelu, GeluParams{tanh}, {x}), std::move(nodes), tanh ? "gelu_tanh" : "gelu", {}};
    }
    return std::nullopt;
  }
};

}  // namespace

const Fusion& gelu_fusion() {
  static const Gelu f;
  return f;
}

}  // namespace rlflow::ir::fusion
