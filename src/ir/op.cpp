#include "rlflow/ir/op.h"
#include "rlflow/ir/op_def.h"

#include <array>
#include <sstream>
#include <type_traits>
#include <utility>

#include "rlflow/util/hash.h"

namespace rlflow::ir {

// The records (src/ir/ops/), one line each beside its row below.
extern const OpDef kDequantizeLinearDef;
extern const OpDef kRotaryEmbeddingDef;

namespace {

// Where a parameter struct sits in OpParams; an op without parameters has std::monostate.
template <class T = std::monostate, size_t I = 0>
constexpr uint8_t params_index() {
  if constexpr (std::is_same_v<std::variant_alternative_t<I, OpParams>, T>)
    return static_cast<uint8_t>(I);
  else
    return params_index<T, I + 1>();
}

// The op table. A new OpKind needs its row here (the static_assert below says so) and a case in
// every switch over OpKind (-Werror=switch says where).
#define RLFLOW_OP(kind, onnx_type, form, cost, ...) \
  OpInfo { OpKind::k##kind, #kind, onnx_type, "", OpForm::form, CostClass::cost, false, 1, params_index<__VA_ARGS__>() }
// A plain op (OpInfo::plain): the row is all it needs.
#define RLFLOW_PLAIN_OP(kind, form, cost, since, ...) \
  OpInfo { OpKind::k##kind, #kind, #kind, "", OpForm::form, CostClass::cost, true, since, params_index<__VA_ARGS__>() }
// A plain op with a record (ir/op_def.h): `def` is its OpDef, defined in src/ir/ops/.
#define RLFLOW_RECORD_OP(kind, domain, form, cost, since, def, ...) \
  OpInfo { OpKind::k##kind, #kind, #kind, domain, OpForm::form, CostClass::cost, true, since, params_index<__VA_ARGS__>(), &def }
constexpr std::array<OpInfo, kNumOpKinds> kOps = {{
    RLFLOW_OP(Input, "", kSource, kFree),
    RLFLOW_OP(Weight, "", kSource, kFree),
    RLFLOW_OP(Constant, "", kSource, kFill, ConstantParams),  // folded into an initializer on export
    RLFLOW_OP(Conv, "Conv", kOther, kConv, ConvParams),
    RLFLOW_OP(MatMul, "MatMul", kOther, kMatMul),
    RLFLOW_OP(Gemm, "Gemm", kOther, kMatMul, GemmParams),
    RLFLOW_OP(Add, "Add", kElementwiseBinary, kVector),
    RLFLOW_OP(Sub, "Sub", kElementwiseBinary, kVector),
    RLFLOW_OP(Mul, "Mul", kElementwiseBinary, kVector),
    RLFLOW_OP(Div, "Div", kElementwiseBinary, kVector),
    RLFLOW_OP(Pow, "Pow", kElementwiseBinary, kSpecial),
    RLFLOW_OP(Sqrt, "Sqrt", kElementwiseUnary, kVector),
    RLFLOW_OP(Relu, "Relu", kElementwiseUnary, kVector),
    RLFLOW_OP(Sigmoid, "Sigmoid", kElementwiseUnary, kSpecial),
    RLFLOW_OP(Tanh, "Tanh", kElementwiseUnary, kSpecial),
    RLFLOW_OP(Erf, "Erf", kElementwiseUnary, kSpecial),
    RLFLOW_OP(Clip, "Clip", kElementwiseUnary, kVector, ClipParams),
    RLFLOW_OP(Softmax, "Softmax", kOther, kVector, AxisParams),
    RLFLOW_OP(LayerNorm, "LayerNormalization", kOther, kVector, NormParams),
    RLFLOW_OP(ReduceMean, "ReduceMean", kOther, kVector, AxesParams),
    RLFLOW_OP(BatchNorm, "BatchNormalization", kOther, kVector, NormParams),
    RLFLOW_OP(MaxPool, "MaxPool", kOther, kPool, PoolParams),
    RLFLOW_OP(AveragePool, "AveragePool", kOther, kPool, PoolParams),
    RLFLOW_OP(GlobalAveragePool, "GlobalAveragePool", kOther, kVector),
    RLFLOW_OP(Concat, "Concat", kOther, kLayout, AxisParams),
    RLFLOW_OP(Split, "Split", kOther, kLayout, SplitParams),
    RLFLOW_OP(Transpose, "Transpose", kOther, kLayout, TransposeParams),
    RLFLOW_OP(Reshape, "Reshape", kOther, kView, ReshapeParams),
    RLFLOW_OP(Flatten, "Flatten", kOther, kView, AxisParams),
    RLFLOW_OP(Pad, "Pad", kOther, kLayout, PadParams),
    RLFLOW_OP(Slice, "Slice", kOther, kSlice, SliceParams),
    RLFLOW_OP(Gather, "Gather", kOther, kGather, AxisParams),
    RLFLOW_OP(Squeeze, "Squeeze", kOther, kView, AxesParams),
    RLFLOW_OP(Unsqueeze, "Unsqueeze", kOther, kView, AxesParams),
    RLFLOW_OP(Enlarge, "Pad", kOther, kLayout, EnlargeParams),  // TASO's kernel enlargement is a Pad of the weight
    RLFLOW_OP(ScalarMul, "Mul", kElementwiseUnary, kVector, ScalarParams),  // Mul by a scalar initializer
    RLFLOW_OP(Cast, "Cast", kElementwiseUnary, kLayout, CastParams),
    RLFLOW_OP(Gelu, "Gelu", kElementwiseUnary, kSpecial, GeluParams),
    RLFLOW_OP(HardSigmoid, "HardSigmoid", kElementwiseUnary, kVector, HardSigmoidParams),
    RLFLOW_OP(HardSwish, "HardSwish", kElementwiseUnary, kVector),
    RLFLOW_OP(Opaque, "", kOther, kOpaque, OpaqueParams),
    // After Opaque: kinds are numbered in cost signatures (recorded cost tables), so new ones go last.
    RLFLOW_OP(RMSNorm, "RMSNormalization", kOther, kVector, NormParams),  // ONNX opset 23
    RLFLOW_RECORD_OP(RotaryEmbedding, "", kOther, kVector, 23, kRotaryEmbeddingDef, RotaryParams),  // ONNX opset 23
    // Priced as its two GEMMs, reading Q, K, V (and the mask) and writing the output once: a fused
    // kernel keeps the (S, L) scores out of memory.
    RLFLOW_OP(Attention, "Attention", kOther, kMatMul, AttentionParams),  // ONNX opset 23
    RLFLOW_PLAIN_OP(Exp, kElementwiseUnary, kSpecial, 1),
    RLFLOW_PLAIN_OP(LeakyRelu, kElementwiseUnary, kVector, 6, LeakyReluParams),
    RLFLOW_RECORD_OP(DequantizeLinear, "", kOther, kVector, 10, kDequantizeLinearDef, DequantizeParams),
}};
#undef RLFLOW_OP
#undef RLFLOW_PLAIN_OP
#undef RLFLOW_RECORD_OP

constexpr bool one_row_per_kind_in_order() {
  for (size_t i = 0; i < kOps.size(); ++i)
    if (static_cast<size_t>(kOps[i].kind) != i) return false;
  return true;
}
static_assert(one_row_per_kind_in_order(), "kOps needs one row per OpKind, in the order of RLFLOW_OP_KINDS");

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}
}  // namespace

const OpInfo& op_info(OpKind k) { return kOps[static_cast<size_t>(k)]; }

std::string_view op_name(OpKind k) { return op_info(k).name; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return op.kind;
  return std::nullopt;
}

Arity plain_arity(OpKind k) {
  const OpInfo& info = op_info(k);
  if (info.def) return {info.def->min_inputs, info.def->max_inputs};
  const int n = info.form == OpForm::kElementwiseBinary ? 2 : info.form == OpForm::kSource ? 0 : 1;
  return {n, n};
}

bool is_elementwise_binary(OpKind k) { return op_info(k).form == OpForm::kElementwiseBinary; }
bool is_elementwise_unary(OpKind k) { return op_info(k).form == OpForm::kElementwiseUnary; }
bool is_source(OpKind k) { return op_info(k).form == OpForm::kSource; }
bool moves_values_only(OpKind k) {
  switch (op_info(k).cost) {
    case CostClass::kFree:
    case CostClass::kFill:
    case CostClass::kView:
    case CostClass::kLayout:
    case CostClass::kSlice:
    case CostClass::kGather: return true;
    case CostClass::kOpaque:
    case CostClass::kConv:
    case CostClass::kMatMul:
    case CostClass::kVector:
    case CostClass::kSpecial:
    case CostClass::kPool: return false;
  }
  return false;
}

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kTanh: return "tanh";
  }
  return "?";
}

namespace {
template <size_t... I>
OpParams make_params(size_t index, std::index_sequence<I...>) {
  static OpParams (*const make[])() = {[]() -> OpParams { return std::variant_alternative_t<I, OpParams>{}; }...};
  return make[index]();
}
}  // namespace

OpParams default_params(OpKind k) { return make_params(op_info(k).params, std::make_index_sequence<std::variant_size_v<OpParams>>{}); }

void hash_params(Hasher& h, const OpParams& params) {
  h.add(params.index());
  std::visit(
      [&h](const auto& p) {
        for_each_field(p, [&h](std::string_view, const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_enum_v<T>)
            h.add(static_cast<uint64_t>(v));
          else if constexpr (std::is_same_v<T, double>)
            h.add_f(v);
          else if constexpr (std::is_same_v<T, int64_t>)
            h.add_i(v);
          else  // bool, std::string, std::vector<int64_t>
            h.add(v);
        });
      },
      params);
}

// The log form. Recorded cost tables store it beside each signature's hash (cost/recorded.cpp
// checks it), so the structs whose form differs from their `describe` keep a branch of their own;
// every other struct, and every new one, prints its fields as described.
std::string params_str(const OpParams& params) {
  std::ostringstream os;
  std::visit(
      [&os](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, ConvParams>) {
          os << "strides=" << join(p.strides) << " pads=" << join(p.pads) << " dilations=" << join(p.dilations)
             << " group=" << p.group;
          if (p.act != Activation::kNone) os << " act=" << activation_name(p.act);
        } else if constexpr (std::is_same_v<P, PoolParams>) {
          os << "kernel=" << join(p.kernel) << " strides=" << join(p.strides) << " pads=" << join(p.pads);
        } else if constexpr (std::is_same_v<P, GemmParams>) {
          os << "alpha=" << p.alpha << " beta=" << p.beta << " transA=" << p.trans_a << " transB=" << p.trans_b;
        } else if constexpr (std::is_same_v<P, CastParams>) {
          os << "to=" << dtype_name(p.to);
        } else if constexpr (std::is_same_v<P, GeluParams>) {
          os << "approximate=" << (p.tanh ? "tanh" : "none");
        } else if constexpr (std::is_same_v<P, ConstantParams>) {
          os << "fill=" << static_cast<int>(p.fill) << " shape=" << join(p.shape) << " value=" << p.value;
        } else if constexpr (std::is_same_v<P, OpaqueParams>) {
          os << (p.domain.empty() ? "" : p.domain + ".") << p.op_type;
        } else {  // the rest: its fields as described, "alpha=0.1"
          const char* sep = "";
          for_each_field(p, [&](std::string_view name, const auto& v) {
            using T = std::decay_t<decltype(v)>;
            os << sep << name << "=";
            sep = " ";
            if constexpr (std::is_same_v<T, std::vector<int64_t>>) os << join(v);
            else if constexpr (std::is_enum_v<T>) os << static_cast<int64_t>(v);
            else os << v;
          });
        }
      },
      params);
  return os.str();
}

}  // namespace rlflow::ir

namespace rlflow::ir {

namespace {
template <class>
inline constexpr bool kUnsupportedField = false;
}  // namespace

Attributes plain_attributes(const OpParams& params) {
  Attributes a;
  std::visit(
      [&a](const auto& p) {
        for_each_field(p, [&a](std::string_view name, const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool> || std::is_enum_v<T> || std::is_integral_v<T>)
            a.set(std::string(name), static_cast<int64_t>(v));
          else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::string>)
            a.set(std::string(name), v);
          else
            static_assert(kUnsupportedField<T>, "a field type that an ONNX attribute cannot hold");
        });
      },
      params);
  return a;
}

Expected<OpParams> plain_params(OpKind k, const Attributes& a) {
  OpParams params = default_params(k);
  size_t known = 0;
  std::string error;
  std::visit(
      [&](auto& p) {
        for_each_field(p, [&](std::string_view field, auto& v) {
          using T = std::decay_t<decltype(v)>;
          const auto it = a.all().find(std::string(field));
          if (it == a.all().end() || !error.empty()) return;
          ++known;
          const AttrValue& value = it->second;
          bool ok = true;
          if constexpr (std::is_same_v<T, double>) {
            if (const auto* d = std::get_if<double>(&value)) v = *d;
            else if (const auto* i = std::get_if<int64_t>(&value)) v = static_cast<double>(*i);
            else ok = false;
          } else if constexpr (std::is_same_v<T, bool> || std::is_enum_v<T> || std::is_integral_v<T>) {
            if (const auto* i = std::get_if<int64_t>(&value)) v = static_cast<T>(*i);
            else ok = false;
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::string>) {
            if (const auto* x = std::get_if<T>(&value)) v = *x;
            else ok = false;
          } else {
            static_assert(kUnsupportedField<T>, "a field type that an ONNX attribute cannot hold");
          }
          if (!ok) error = "attribute '" + std::string(field) + "' of " + std::string(op_name(k)) + " has another type";
        });
      },
      params);
  if (!error.empty()) return Error::unsupported(error);
  if (known != a.all().size())
    for (const auto& entry : a.all()) {
      const std::string& name = entry.first;  // a named reference: clang does not let a lambda capture a binding
      bool field = false;
      std::visit([&](const auto& p) { for_each_field(p, [&](std::string_view f, const auto&) { field = field || f == name; }); }, params);
      if (!field) return Error::unsupported("attribute '" + name + "' is not one rlflow models for " + std::string(op_name(k)));
    }
  return params;
}

}  // namespace rlflow::ir
