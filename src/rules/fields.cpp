// Typed op parameters seen as named fields, so patterns can constrain and build them by name.
#include <optional>
#include <set>
#include <string_view>
#include <type_traits>
#include <vector>

#include "rlflow/rules/rule.h"

namespace rlflow::rules {

using ir::OpKind;

namespace {

// Where a kind's rules see its parameter struct (ir/op.h: describe) differently from the struct:
// a field they do not name takes a fixed value, and an optional one a default when absent.
struct FieldRule {
  OpKind kind;
  std::string_view field;
  enum { kHidden, kOptional } how;
  int64_t value;
};
constexpr FieldRule kFieldRules[] = {
    {OpKind::kSqueeze, "keepdims", FieldRule::kHidden, 1},
    {OpKind::kUnsqueeze, "keepdims", FieldRule::kHidden, 1},
    {OpKind::kBatchNorm, "axis", FieldRule::kHidden, 1},  // the channel axis, always
    {OpKind::kGelu, "approximate", FieldRule::kOptional, 0},
    {OpKind::kConstant, "dtype", FieldRule::kOptional, 0},  // float32
};

const FieldRule* field_rule(OpKind kind, std::string_view field) {
  for (const auto& r : kFieldRules)
    if (r.kind == kind && r.field == field) return &r;
  return nullptr;
}

// The largest value of each enum a field holds (a rule file's number is checked against it).
constexpr int64_t enum_max(ir::Activation) { return static_cast<int64_t>(ir::Activation::kTanh); }
constexpr int64_t enum_max(ir::PadMode) { return static_cast<int64_t>(ir::PadMode::kEdge); }
constexpr int64_t enum_max(ir::DType) { return static_cast<int64_t>(ir::DType::kBFloat16); }
constexpr int64_t enum_max(ir::ConstantFill) { return static_cast<int64_t>(ir::ConstantFill::kAvgPoolKernel); }

// Opaque ops (rlflow does not model them) have no fields a rule can name; the others have every
// field of their struct but the strings and the hidden ones.
template <class F>
void for_each_rule_field(OpKind kind, const ir::OpParams& params, F&& f) {
  if (kind == OpKind::kOpaque) return;
  std::visit(
      [&](const auto& p) {
        ir::for_each_field(p, [&](std::string_view name, const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (!std::is_same_v<T, std::string>) {
            const auto* r = field_rule(kind, name);
            if (!r || r->how != FieldRule::kHidden) f(name, v);
          }
        });
      },
      params);
}

struct FieldSpec {
  std::set<std::string, std::less<>> ints, reals;
};

const FieldSpec& spec(OpKind k) {
  static const auto specs = [] {
    std::vector<FieldSpec> all(ir::kNumOpKinds);
    for (int i = 0; i < ir::kNumOpKinds; ++i) {
      const auto kind = static_cast<OpKind>(i);
      for_each_rule_field(kind, ir::default_params(kind), [&](std::string_view name, const auto& v) {
        (std::is_same_v<std::decay_t<decltype(v)>, double> ? all[i].reals : all[i].ints).emplace(name);
      });
    }
    return all;
  }();
  return specs[static_cast<size_t>(k)];
}

}  // namespace

bool is_real_field(OpKind kind, const std::string& field) { return spec(kind).reals.count(field) > 0; }
bool is_known_field(OpKind kind, const std::string& field) {
  return spec(kind).ints.count(field) > 0 || spec(kind).reals.count(field) > 0;
}

Fields params_to_fields(OpKind kind, const ir::OpParams& params) {
  Fields f;
  for_each_rule_field(kind, params, [&](std::string_view name, const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, double>)
      f.reals.emplace(name, v);
    else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
      f.ints.emplace(name, v);
    else  // int64_t, bool, an enum
      f.ints.emplace(name, std::vector<int64_t>{static_cast<int64_t>(v)});
  });
  return f;
}

Expected<ir::OpParams> params_from_fields(OpKind kind, const Fields& f) {
  if (kind == OpKind::kOpaque) return ir::OpParams{};
  ir::OpParams out = ir::default_params(kind);
  std::optional<Error> failed;
  auto fail = [&](std::string_view field, const std::string& why) {
    if (!failed) failed = Error::bad_input(std::string(ir::op_name(kind)) + ": field '" + std::string(field) + "' " + why);
  };
  std::visit(
      [&](auto& p) {
        ir::for_each_field(p, [&](std::string_view name, auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (!std::is_same_v<T, std::string>) {
            const auto* rule = field_rule(kind, name);
            if constexpr (std::is_same_v<T, double>) {  // reals default to the struct's value
              if (auto it = f.reals.find(std::string(name)); it != f.reals.end()) v = it->second;
              return;
            } else {
              const auto it = f.ints.find(std::string(name));
              std::vector<int64_t> value;
              if (rule && rule->how == FieldRule::kHidden) {
                value = {rule->value};
              } else if (it != f.ints.end()) {
                value = it->second;
              } else if (rule && rule->how == FieldRule::kOptional) {
                value = {rule->value};
              } else {
                return fail(name, "has no value");
              }
              if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                v = std::move(value);
              } else {
                if (value.size() != 1) return fail(name, "must be a scalar");
                if constexpr (std::is_enum_v<T>) {
                  if (value[0] < 0 || value[0] > enum_max(T{}))
                    return fail(name, "must be 0.." + std::to_string(enum_max(T{})));
                  v = static_cast<T>(value[0]);
                } else if constexpr (std::is_same_v<T, bool>) {
                  v = value[0] != 0;
                } else {
                  v = value[0];
                }
              }
            }
          }
        });
      },
      out);
  if (failed) return *failed;
  return out;
}

Fields default_fields(OpKind kind, int64_t nsp) {
  if (ir::op_info(kind).plain) return params_to_fields(kind, ir::default_params(kind));  // the struct's defaults
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
    case OpKind::kAttention: return {{{"is_causal", {0}}, {"q_num_heads", {0}}, {"kv_num_heads", {0}}}, {{"scale", 0.0}}};
  }
  return {};
}

}  // namespace rlflow::rules
