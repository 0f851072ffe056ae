// Typed op parameters seen as named fields, so patterns can constrain and build them by name.
#include <set>

#include "rlflow/rules/rule.h"

namespace rlflow::rules {

using ir::OpKind;

namespace {

struct FieldSpec {
  std::set<std::string> ints, reals;
};

const FieldSpec& spec(OpKind k) {
  static const std::map<OpKind, FieldSpec> specs = {
      {OpKind::kConv, {{"strides", "pads", "dilations", "group", "act"}, {}}},
      {OpKind::kMaxPool, {{"kernel", "strides", "pads", "ceil_mode", "count_include_pad"}, {}}},
      {OpKind::kAveragePool, {{"kernel", "strides", "pads", "ceil_mode", "count_include_pad"}, {}}},
      {OpKind::kGemm, {{"trans_a", "trans_b"}, {"alpha", "beta"}}},
      {OpKind::kSoftmax, {{"axis"}, {}}},
      {OpKind::kConcat, {{"axis"}, {}}},
      {OpKind::kFlatten, {{"axis"}, {}}},
      {OpKind::kGather, {{"axis"}, {}}},
      {OpKind::kReduceMean, {{"axes", "keepdims"}, {}}},
      {OpKind::kSqueeze, {{"axes"}, {}}},
      {OpKind::kUnsqueeze, {{"axes"}, {}}},
      {OpKind::kSplit, {{"axis", "sizes"}, {}}},
      {OpKind::kTranspose, {{"perm"}, {}}},
      {OpKind::kReshape, {{"shape"}, {}}},
      {OpKind::kPad, {{"pads", "mode"}, {"value"}}},
      {OpKind::kSlice, {{"starts", "ends", "axes", "steps"}, {}}},
      {OpKind::kLayerNorm, {{"axis"}, {"epsilon"}}},
      {OpKind::kRMSNorm, {{"axis"}, {"epsilon"}}},
      {OpKind::kRotaryEmbedding, {{"interleaved", "num_heads", "rotary_embedding_dim"}, {}}},
      {OpKind::kAttention, {{"is_causal", "q_num_heads", "kv_num_heads"}, {"scale"}}},
      {OpKind::kBatchNorm, {{}, {"epsilon"}}},
      {OpKind::kClip, {{}, {"min", "max"}}},
      {OpKind::kEnlarge, {{"kernel"}, {}}},
      {OpKind::kScalarMul, {{}, {"value"}}},
      {OpKind::kCast, {{"to"}, {}}},
      {OpKind::kGelu, {{"approximate"}, {}}},
      {OpKind::kHardSigmoid, {{}, {"alpha", "beta"}}},
      {OpKind::kConstant, {{"fill", "shape", "dtype"}, {"value"}}},
  };
  static const FieldSpec none;
  auto it = specs.find(k);
  return it == specs.end() ? none : it->second;
}

int64_t flag(bool b) { return b ? 1 : 0; }

}  // namespace

bool is_real_field(OpKind kind, const std::string& field) { return spec(kind).reals.count(field) > 0; }
bool is_known_field(OpKind kind, const std::string& field) {
  return spec(kind).ints.count(field) > 0 || spec(kind).reals.count(field) > 0;
}

Fields params_to_fields(OpKind kind, const ir::OpParams& params) {
  Fields f;
  auto& I = f.ints;
  auto& R = f.reals;
  if (auto* p = std::get_if<ir::ConvParams>(&params)) {
    I = {{"strides", p->strides}, {"pads", p->pads}, {"dilations", p->dilations}, {"group", {p->group}},
         {"act", {static_cast<int64_t>(p->act)}}};
  } else if (auto* p = std::get_if<ir::PoolParams>(&params)) {
    I = {{"kernel", p->kernel}, {"strides", p->strides}, {"pads", p->pads}, {"ceil_mode", {flag(p->ceil_mode)}},
         {"count_include_pad", {flag(p->count_include_pad)}}};
  } else if (auto* p = std::get_if<ir::GemmParams>(&params)) {
    I = {{"trans_a", {flag(p->trans_a)}}, {"trans_b", {flag(p->trans_b)}}};
    R = {{"alpha", p->alpha}, {"beta", p->beta}};
  } else if (auto* p = std::get_if<ir::AxisParams>(&params)) {
    I = {{"axis", {p->axis}}};
  } else if (auto* p = std::get_if<ir::AxesParams>(&params)) {
    I = {{"axes", p->axes}};
    if (kind == OpKind::kReduceMean) I["keepdims"] = {flag(p->keepdims)};
  } else if (auto* p = std::get_if<ir::SplitParams>(&params)) {
    I = {{"axis", {p->axis}}, {"sizes", p->sizes}};
  } else if (auto* p = std::get_if<ir::TransposeParams>(&params)) {
    I = {{"perm", p->perm}};
  } else if (auto* p = std::get_if<ir::ReshapeParams>(&params)) {
    I = {{"shape", p->shape}};
  } else if (auto* p = std::get_if<ir::PadParams>(&params)) {
    I = {{"pads", p->pads}, {"mode", {static_cast<int64_t>(p->mode)}}};
    R = {{"value", p->value}};
  } else if (auto* p = std::get_if<ir::SliceParams>(&params)) {
    I = {{"starts", p->starts}, {"ends", p->ends}, {"axes", p->axes}, {"steps", p->steps}};
  } else if (auto* p = std::get_if<ir::NormParams>(&params)) {
    if (kind == OpKind::kLayerNorm || kind == OpKind::kRMSNorm) I = {{"axis", {p->axis}}};
    R = {{"epsilon", p->epsilon}};
  } else if (auto* p = std::get_if<ir::ClipParams>(&params)) {
    R = {{"min", p->min}, {"max", p->max}};
  } else if (auto* p = std::get_if<ir::EnlargeParams>(&params)) {
    I = {{"kernel", p->kernel}};
  } else if (auto* p = std::get_if<ir::ScalarParams>(&params)) {
    R = {{"value", p->value}};
  } else if (auto* p = std::get_if<ir::CastParams>(&params)) {
    I = {{"to", {static_cast<int64_t>(p->to)}}};
  } else if (auto* p = std::get_if<ir::GeluParams>(&params)) {
    I = {{"approximate", {p->tanh ? 1 : 0}}};
  } else if (auto* p = std::get_if<ir::HardSigmoidParams>(&params)) {
    R = {{"alpha", p->alpha}, {"beta", p->beta}};
  } else if (auto* p = std::get_if<ir::RotaryParams>(&params)) {
    I = {{"interleaved", {p->interleaved ? 1 : 0}}, {"num_heads", {p->num_heads}}, {"rotary_embedding_dim", {p->rotary_embedding_dim}}};
  } else if (auto* p = std::get_if<ir::AttentionParams>(&params)) {
    I = {{"is_causal", {p->is_causal ? 1 : 0}}, {"q_num_heads", {p->q_num_heads}}, {"kv_num_heads", {p->kv_num_heads}}};
    R = {{"scale", p->scale}};
  } else if (auto* p = std::get_if<ir::ConstantParams>(&params)) {
    I = {{"fill", {static_cast<int64_t>(p->fill)}}, {"shape", p->shape}, {"dtype", {static_cast<int64_t>(p->dtype)}}};
    R = {{"value", p->value}};
  }
  return f;
}

Expected<ir::OpParams> params_from_fields(OpKind kind, const Fields& f) {
  auto need = [&](const std::string& k) -> Expected<std::vector<int64_t>> {
    auto it = f.ints.find(k);
    if (it == f.ints.end()) return Error::bad_input(std::string(ir::op_name(kind)) + ": field '" + k + "' has no value");
    return it->second;
  };
  auto scalar = [&](const std::string& k) -> Expected<int64_t> {
    auto v = need(k);
    if (!v) return v.error();
    if (v->size() != 1) return Error::bad_input(std::string(ir::op_name(kind)) + ": field '" + k + "' must be a scalar");
    return (*v)[0];
  };
  auto real = [&](const std::string& k, double dflt) {
    auto it = f.reals.find(k);
    return it == f.reals.end() ? dflt : it->second;
  };
#define RL_NEED(var, key)        \
  auto var = need(key);          \
  if (!var) return var.error();
#define RL_SCALAR(var, key)      \
  auto var = scalar(key);        \
  if (!var) return var.error();
  switch (kind) {
    case OpKind::kConv: {
      RL_NEED(s, "strides") RL_NEED(p, "pads") RL_NEED(d, "dilations") RL_SCALAR(g, "group") RL_SCALAR(a, "act")
      if (*a < 0 || *a > 3) return Error::bad_input("Conv: act must be 0..3");
      return ir::OpParams{ir::ConvParams{*s, *p, *d, *g, static_cast<ir::Activation>(*a)}};
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: {
      RL_NEED(k, "kernel") RL_NEED(s, "strides") RL_NEED(p, "pads") RL_SCALAR(c, "ceil_mode") RL_SCALAR(ci, "count_include_pad")
      return ir::OpParams{ir::PoolParams{*k, *s, *p, *c != 0, *ci != 0}};
    }
    case OpKind::kGemm: {
      RL_SCALAR(ta, "trans_a") RL_SCALAR(tb, "trans_b")
      return ir::OpParams{ir::GemmParams{real("alpha", 1.0), real("beta", 1.0), *ta != 0, *tb != 0}};
    }
    case OpKind::kSoftmax:
    case OpKind::kConcat:
    case OpKind::kFlatten:
    case OpKind::kGather: {
      RL_SCALAR(a, "axis")
      return ir::OpParams{ir::AxisParams{*a}};
    }
    case OpKind::kReduceMean: {
      RL_NEED(a, "axes") RL_SCALAR(k, "keepdims")
      return ir::OpParams{ir::AxesParams{*a, *k != 0}};
    }
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: {
      RL_NEED(a, "axes")
      return ir::OpParams{ir::AxesParams{*a, true}};
    }
    case OpKind::kSplit: {
      RL_SCALAR(a, "axis") RL_NEED(s, "sizes")
      return ir::OpParams{ir::SplitParams{*a, *s}};
    }
    case OpKind::kTranspose: {
      RL_NEED(p, "perm")
      return ir::OpParams{ir::TransposeParams{*p}};
    }
    case OpKind::kReshape: {
      RL_NEED(s, "shape")
      return ir::OpParams{ir::ReshapeParams{*s}};
    }
    case OpKind::kPad: {
      RL_NEED(p, "pads") RL_SCALAR(m, "mode")
      return ir::OpParams{ir::PadParams{*p, static_cast<ir::PadMode>(*m), real("value", 0.0)}};
    }
    case OpKind::kSlice: {
      RL_NEED(s, "starts") RL_NEED(e, "ends") RL_NEED(a, "axes") RL_NEED(st, "steps")
      return ir::OpParams{ir::SliceParams{*s, *e, *a, *st}};
    }
    case OpKind::kLayerNorm:
    case OpKind::kRMSNorm: {
      RL_SCALAR(a, "axis")
      return ir::OpParams{ir::NormParams{*a, real("epsilon", 1e-5)}};
    }
    case OpKind::kBatchNorm: return ir::OpParams{ir::NormParams{1, real("epsilon", 1e-5)}};
    case OpKind::kClip: {
      ir::ClipParams c;
      c.min = real("min", c.min);
      c.max = real("max", c.max);
      return ir::OpParams{c};
    }
    case OpKind::kEnlarge: {
      RL_NEED(k, "kernel")
      return ir::OpParams{ir::EnlargeParams{*k}};
    }
    case OpKind::kScalarMul: return ir::OpParams{ir::ScalarParams{real("value", 1.0)}};
    case OpKind::kCast: {
      RL_SCALAR(t, "to")
      return ir::OpParams{ir::CastParams{static_cast<ir::DType>(*t)}};
    }
    case OpKind::kGelu: return ir::OpParams{ir::GeluParams{f.ints.count("approximate") && !f.ints.at("approximate").empty() && f.ints.at("approximate")[0] != 0}};
    case OpKind::kHardSigmoid: return ir::OpParams{ir::HardSigmoidParams{real("alpha", 0.2), real("beta", 0.5)}};
    case OpKind::kConstant: {
      RL_SCALAR(fl, "fill") RL_NEED(s, "shape")
      auto dt = f.ints.count("dtype") ? f.ints.at("dtype").at(0) : 0;
      return ir::OpParams{ir::ConstantParams{static_cast<ir::ConstantFill>(*fl), *s, static_cast<ir::DType>(dt), real("value", 0.0)}};
    }
    case OpKind::kRotaryEmbedding: {
      RL_SCALAR(i, "interleaved") RL_SCALAR(h, "num_heads") RL_SCALAR(r, "rotary_embedding_dim")
      return ir::OpParams{ir::RotaryParams{*i != 0, *h, *r}};
    }
    case OpKind::kAttention: {
      RL_SCALAR(c, "is_causal") RL_SCALAR(hq, "q_num_heads") RL_SCALAR(hkv, "kv_num_heads")
      return ir::OpParams{ir::AttentionParams{*c != 0, real("scale", 0.0), *hq, *hkv}};
    }
    default:  // ops without parameters (plain ones included)
      break;
  }
#undef RL_NEED
#undef RL_SCALAR
  return ir::OpParams{};
}

Fields default_fields(OpKind kind, int64_t nsp) {
  const auto n = static_cast<size_t>(std::max<int64_t>(nsp, 0));
  const std::vector<int64_t> ones(n, 1), zeros2(2 * n, 0);
  switch (kind) {
    case OpKind::kConv: return {{{"strides", ones}, {"pads", zeros2}, {"dilations", ones}, {"group", {1}}, {"act", {0}}}, {}};
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
      return {{{"kernel", std::vector<int64_t>(n, 3)}, {"strides", ones}, {"pads", zeros2}, {"ceil_mode", {0}}, {"count_include_pad", {0}}}, {}};
    case OpKind::kGemm: return {{{"trans_a", {0}}, {"trans_b", {0}}}, {{"alpha", 1.0}, {"beta", 1.0}}};
    case OpKind::kReduceMean: return {{{"keepdims", {1}}}, {}};
    case OpKind::kGelu: return {{{"approximate", {0}}}, {}};
    case OpKind::kHardSigmoid: return {{}, {{"alpha", 0.2}, {"beta", 0.5}}};
    case OpKind::kPad: return {{{"mode", {0}}}, {{"value", 0.0}}};
    case OpKind::kBatchNorm:
    case OpKind::kRMSNorm:
    case OpKind::kLayerNorm: return {{{"axis", {-1}}}, {{"epsilon", 1e-5}}};
    default:  // no field with a default of its own
      break;
    case OpKind::kRotaryEmbedding: return {{{"interleaved", {0}}, {"num_heads", {0}}, {"rotary_embedding_dim", {0}}}, {}};
    case OpKind::kAttention: return {{{"is_causal", {0}}, {"q_num_heads", {0}}, {"kv_num_heads", {0}}}, {{"scale", 0.0}}};
  }
  return {};
}

}  // namespace rlflow::rules
