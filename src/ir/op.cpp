#include "rlflow/ir/op.h"

#include <array>
#include <sstream>
#include <type_traits>

#include "rlflow/util/hash.h"

namespace rlflow::ir {

namespace {

// The op table. A new OpKind needs its row here (the static_assert below says so) and a case in
// every switch over OpKind (-Werror=switch says where).
#define RLFLOW_OP(kind, onnx_type, form, cost) \
  OpInfo { OpKind::k##kind, #kind, onnx_type, "", OpForm::form, CostClass::cost, false, 1 }
// A plain op (OpInfo::plain): the row is all it needs.
#define RLFLOW_PLAIN_OP(kind, form, cost, since) \
  OpInfo { OpKind::k##kind, #kind, #kind, "", OpForm::form, CostClass::cost, true, since }
constexpr std::array<OpInfo, kNumOpKinds> kOps = {{
    RLFLOW_OP(Input, "", kSource, kFree),
    RLFLOW_OP(Weight, "", kSource, kFree),
    RLFLOW_OP(Constant, "", kSource, kFill),  // folded into an initializer on export
    RLFLOW_OP(Conv, "Conv", kOther, kConv),
    RLFLOW_OP(MatMul, "MatMul", kOther, kMatMul),
    RLFLOW_OP(Gemm, "Gemm", kOther, kMatMul),
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
    RLFLOW_OP(Clip, "Clip", kElementwiseUnary, kVector),
    RLFLOW_OP(Softmax, "Softmax", kOther, kVector),
    RLFLOW_OP(LayerNorm, "LayerNormalization", kOther, kVector),
    RLFLOW_OP(ReduceMean, "ReduceMean", kOther, kVector),
    RLFLOW_OP(BatchNorm, "BatchNormalization", kOther, kVector),
    RLFLOW_OP(MaxPool, "MaxPool", kOther, kPool),
    RLFLOW_OP(AveragePool, "AveragePool", kOther, kPool),
    RLFLOW_OP(GlobalAveragePool, "GlobalAveragePool", kOther, kVector),
    RLFLOW_OP(Concat, "Concat", kOther, kLayout),
    RLFLOW_OP(Split, "Split", kOther, kLayout),
    RLFLOW_OP(Transpose, "Transpose", kOther, kLayout),
    RLFLOW_OP(Reshape, "Reshape", kOther, kView),
    RLFLOW_OP(Flatten, "Flatten", kOther, kView),
    RLFLOW_OP(Pad, "Pad", kOther, kLayout),
    RLFLOW_OP(Slice, "Slice", kOther, kSlice),
    RLFLOW_OP(Gather, "Gather", kOther, kGather),
    RLFLOW_OP(Squeeze, "Squeeze", kOther, kView),
    RLFLOW_OP(Unsqueeze, "Unsqueeze", kOther, kView),
    RLFLOW_OP(Enlarge, "Pad", kOther, kLayout),  // TASO's kernel enlargement is a Pad of the weight
    RLFLOW_OP(ScalarMul, "Mul", kElementwiseUnary, kVector),  // Mul by a scalar initializer
    RLFLOW_OP(Cast, "Cast", kElementwiseUnary, kLayout),
    RLFLOW_OP(Gelu, "Gelu", kElementwiseUnary, kSpecial),
    RLFLOW_OP(HardSigmoid, "HardSigmoid", kElementwiseUnary, kVector),
    RLFLOW_OP(HardSwish, "HardSwish", kElementwiseUnary, kVector),
    RLFLOW_OP(Opaque, "", kOther, kOpaque),
    // After Opaque: kinds are numbered in cost signatures (recorded cost tables), so new ones go last.
    RLFLOW_OP(RMSNorm, "RMSNormalization", kOther, kVector),  // ONNX opset 23
    RLFLOW_OP(RotaryEmbedding, "RotaryEmbedding", kOther, kVector),  // ONNX opset 23
    // Priced as its two GEMMs, reading Q, K, V (and the mask) and writing the output once: a fused
    // kernel keeps the (S, L) scores out of memory.
    RLFLOW_OP(Attention, "Attention", kOther, kMatMul),  // ONNX opset 23
    RLFLOW_PLAIN_OP(Exp, kElementwiseUnary, kSpecial, 1),
}};
#undef RLFLOW_OP
#undef RLFLOW_PLAIN_OP

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

bool is_elementwise_binary(OpKind k) { return op_info(k).form == OpForm::kElementwiseBinary; }
bool is_elementwise_unary(OpKind k) { return op_info(k).form == OpForm::kElementwiseUnary; }
bool is_source(OpKind k) { return op_info(k).form == OpForm::kSource; }

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kSigmoid: return "sigmoid";
    case Activation::kTanh: return "tanh";
  }
  return "?";
}

void hash_params(Hasher& h, const OpParams& params) {
  h.add(params.index());
  std::visit(
      [&h](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, ConvParams>) {
          h.add(p.strides).add(p.pads).add(p.dilations).add_i(p.group).add(static_cast<uint64_t>(p.act));
        } else if constexpr (std::is_same_v<P, PoolParams>) {
          h.add(p.kernel).add(p.strides).add(p.pads).add(p.ceil_mode).add(p.count_include_pad);
        } else if constexpr (std::is_same_v<P, GemmParams>) {
          h.add_f(p.alpha).add_f(p.beta).add(p.trans_a).add(p.trans_b);
        } else if constexpr (std::is_same_v<P, AxisParams>) {
          h.add_i(p.axis);
        } else if constexpr (std::is_same_v<P, AxesParams>) {
          h.add(p.axes).add(p.keepdims);
        } else if constexpr (std::is_same_v<P, SplitParams>) {
          h.add_i(p.axis).add(p.sizes);
        } else if constexpr (std::is_same_v<P, TransposeParams>) {
          h.add(p.perm);
        } else if constexpr (std::is_same_v<P, ReshapeParams>) {
          h.add(p.shape);
        } else if constexpr (std::is_same_v<P, PadParams>) {
          h.add(p.pads).add(static_cast<uint64_t>(p.mode)).add_f(p.value);
        } else if constexpr (std::is_same_v<P, SliceParams>) {
          h.add(p.starts).add(p.ends).add(p.axes).add(p.steps);
        } else if constexpr (std::is_same_v<P, NormParams>) {
          h.add_i(p.axis).add_f(p.epsilon);
        } else if constexpr (std::is_same_v<P, ClipParams>) {
          h.add_f(p.min).add_f(p.max);
        } else if constexpr (std::is_same_v<P, EnlargeParams>) {
          h.add(p.kernel);
        } else if constexpr (std::is_same_v<P, ScalarParams>) {
          h.add_f(p.value);
        } else if constexpr (std::is_same_v<P, CastParams>) {
          h.add(static_cast<uint64_t>(p.to));
        } else if constexpr (std::is_same_v<P, GeluParams>) {
          h.add(p.tanh);
        } else if constexpr (std::is_same_v<P, HardSigmoidParams>) {
          h.add_f(p.alpha).add_f(p.beta);
        } else if constexpr (std::is_same_v<P, RotaryParams>) {
          h.add(p.interleaved).add_i(p.num_heads).add_i(p.rotary_embedding_dim);
        } else if constexpr (std::is_same_v<P, AttentionParams>) {
          h.add(p.is_causal).add_f(p.scale).add_i(p.q_num_heads).add_i(p.kv_num_heads);
        } else if constexpr (std::is_same_v<P, ConstantParams>) {
          h.add(static_cast<uint64_t>(p.fill)).add(p.shape).add(static_cast<uint64_t>(p.dtype)).add_f(p.value);
        } else if constexpr (std::is_same_v<P, OpaqueParams>) {
          h.add(p.domain).add(p.op_type).add(p.attributes).add_i(p.since_version).add(p.input_slots).add(p.output_slots);
        }
      },
      params);
}

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
        } else if constexpr (std::is_same_v<P, AxisParams>) {
          os << "axis=" << p.axis;
        } else if constexpr (std::is_same_v<P, AxesParams>) {
          os << "axes=" << join(p.axes) << " keepdims=" << p.keepdims;
        } else if constexpr (std::is_same_v<P, SplitParams>) {
          os << "axis=" << p.axis << " sizes=" << join(p.sizes);
        } else if constexpr (std::is_same_v<P, TransposeParams>) {
          os << "perm=" << join(p.perm);
        } else if constexpr (std::is_same_v<P, ReshapeParams>) {
          os << "shape=" << join(p.shape);
        } else if constexpr (std::is_same_v<P, PadParams>) {
          os << "pads=" << join(p.pads) << " mode=" << static_cast<int>(p.mode) << " value=" << p.value;
        } else if constexpr (std::is_same_v<P, SliceParams>) {
          os << "starts=" << join(p.starts) << " ends=" << join(p.ends) << " axes=" << join(p.axes)
             << " steps=" << join(p.steps);
        } else if constexpr (std::is_same_v<P, NormParams>) {
          os << "axis=" << p.axis << " epsilon=" << p.epsilon;
        } else if constexpr (std::is_same_v<P, ClipParams>) {
          os << "min=" << p.min << " max=" << p.max;
        } else if constexpr (std::is_same_v<P, EnlargeParams>) {
          os << "kernel=" << join(p.kernel);
        } else if constexpr (std::is_same_v<P, ScalarParams>) {
          os << "value=" << p.value;
        } else if constexpr (std::is_same_v<P, CastParams>) {
          os << "to=" << dtype_name(p.to);
        } else if constexpr (std::is_same_v<P, GeluParams>) {
          os << "approximate=" << (p.tanh ? "tanh" : "none");
        } else if constexpr (std::is_same_v<P, HardSigmoidParams>) {
          os << "alpha=" << p.alpha << " beta=" << p.beta;
        } else if constexpr (std::is_same_v<P, RotaryParams>) {
          os << "interleaved=" << p.interleaved << " num_heads=" << p.num_heads << " rotary_embedding_dim=" << p.rotary_embedding_dim;
        } else if constexpr (std::is_same_v<P, AttentionParams>) {
          os << "is_causal=" << p.is_causal << " scale=" << p.scale << " q_num_heads=" << p.q_num_heads
             << " kv_num_heads=" << p.kv_num_heads;
        } else if constexpr (std::is_same_v<P, ConstantParams>) {
          os << "fill=" << static_cast<int>(p.fill) << " shape=" << join(p.shape) << " value=" << p.value;
        } else if constexpr (std::is_same_v<P, OpaqueParams>) {
          os << (p.domain.empty() ? "" : p.domain + ".") << p.op_type;
        }
      },
      params);
  return os.str();
}

}  // namespace rlflow::ir
