#include "rlflow/ir/op.h"

#include <array>
#include <sstream>
#include <type_traits>

#include "rlflow/util/hash.h"

namespace rlflow::ir {

namespace {
constexpr std::array<std::string_view, kNumOpKinds> kNames = {
#define RLFLOW_X(n) #n,
    RLFLOW_OP_KINDS(RLFLOW_X)
#undef RLFLOW_X
};

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}
}  // namespace

std::string_view op_name(OpKind k) { return kNames[static_cast<size_t>(k)]; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

bool is_elementwise_binary(OpKind k) {
  return k == OpKind::kAdd || k == OpKind::kSub || k == OpKind::kMul || k == OpKind::kDiv || k == OpKind::kPow;
}

bool is_elementwise_unary(OpKind k) {
  switch (k) {
    case OpKind::kRelu: case OpKind::kSigmoid: case OpKind::kTanh: case OpKind::kErf: case OpKind::kSqrt:
    case OpKind::kClip: case OpKind::kScalarMul: case OpKind::kCast: case OpKind::kGelu: case OpKind::kHardSigmoid:
    case OpKind::kHardSwish: return true;
    default: return false;
  }
}

bool is_source(OpKind k) { return k == OpKind::kInput || k == OpKind::kWeight || k == OpKind::kConstant; }

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
