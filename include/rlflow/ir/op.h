#pragma once
// Operator kinds and their typed parameters.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "rlflow/ir/attributes.h"
#include "rlflow/ir/dtype.h"
#include "rlflow/util/expected.h"

namespace rlflow {
class Hasher;
}

namespace rlflow::ir {

struct OpDef;  // an op's record (ir/op_def.h): what its row alone cannot say

#define RLFLOW_OP_KINDS(X)                                                                    \
  X(Input) X(Weight) X(Constant) X(Conv) X(MatMul) X(Gemm) X(Add) X(Sub) X(Mul) X(Div) X(Pow) \
  X(Sqrt) X(Relu) X(Sigmoid) X(Tanh) X(Erf) X(Clip) X(Softmax) X(LayerNorm) X(ReduceMean)     \
  X(BatchNorm) X(MaxPool) X(AveragePool) X(GlobalAveragePool) X(Concat) X(Split)              \
  X(Transpose) X(Reshape) X(Flatten) X(Pad) X(Slice) X(Gather) X(Squeeze) X(Unsqueeze)        \
  X(Enlarge) X(ScalarMul) X(Cast) X(Gelu) X(HardSigmoid) X(HardSwish) X(Opaque) X(RMSNorm) X(RotaryEmbedding) \
  X(Attention) X(Exp) X(LeakyRelu) X(DequantizeLinear)

enum class OpKind : uint8_t {
#define RLFLOW_X(n) k##n,
  RLFLOW_OP_KINDS(RLFLOW_X)
#undef RLFLOW_X
};

inline constexpr int kNumOpKinds = 0
#define RLFLOW_X(n) +1
    RLFLOW_OP_KINDS(RLFLOW_X)
#undef RLFLOW_X
    ;

// What an op is, as far as code that does not look at its parameters cares.
enum class OpForm : uint8_t {
  kSource,             // no inputs: Input, Weight, Constant
  kElementwiseUnary,   // one input, an output of its shape (Cast changes the type)
  kElementwiseBinary,  // two inputs, numpy broadcasting
  kOther
};

// How the analytic roofline prices an op (cost/work.cpp turns it into compute and memory rates).
enum class CostClass : uint8_t {
  kFree,     // a value that exists before the graph runs (Input, Weight)
  kOpaque,   // an op rlflow does not model: a fixed guess
  kConv,     // convolution (a pointwise one runs, and is priced, as a GEMM)
  kMatMul,   // GEMM libraries, tensor cores
  kVector,   // elementwise arithmetic, normalisations, reductions: vector rate, streaming memory
  kSpecial,  // transcendental elementwise (erf, tanh, sigmoid, pow): many instructions per element
  kPool,     // sliding-window pooling kernels
  kLayout,   // strided or indexed data movement (transpose, concat, split, pad, cast)
  kSlice,    // layout; reads only the selected elements
  kGather,   // layout; reads the indices and one data element per output element
  kView,     // metadata only, no kernel runs
  kFill,     // writes its output, reads nothing
};

// One row per OpKind (src/ir/op.cpp): what is per op and not a converter of its own.
struct OpInfo {
  OpKind kind;
  std::string_view name;         // the IR name (rule files, logs): the OpKind without its k
  std::string_view onnx_type;    // the ONNX op it is written as (its newest form; export may decompose it
                                 // for older opsets); "" when it is not one node: graph inputs and
                                 // initializers, and Opaque (whose op type is per node)
  std::string_view onnx_domain;  // "" = ai.onnx
  OpForm form;
  CostClass cost;
  // A plain op is the ONNX op `onnx_type`, its inputs and its one output one to one, whose ONNX
  // attributes are its parameter struct's fields under their `describe` names (most have none):
  // import, export, shape inference (by its form), rule fields, the log form and the executor
  // (through the ONNX op table, src/exec/onnx_ops.cpp) handle it from this row and its struct
  // alone, from opset `since` (plain_attributes, plain_params).
  bool plain = false;
  int since = 1;  // plain ops: the first opset of its domain that has the ONNX op
  uint8_t params = 0;  // the index in OpParams of its parameter struct (0: none); default_params
  // A plain op that is not elementwise (or has optional inputs) has a record (ir/op_def.h, one
  // file in src/ir/ops/): its inputs, its shape function, its FLOPs and which forms it models.
  const OpDef* def = nullptr;
};
const OpInfo& op_info(OpKind k);

std::string_view op_name(OpKind k);
std::optional<OpKind> op_from_name(std::string_view name);
bool is_elementwise_binary(OpKind k);  // Add Sub Mul Div Pow, numpy broadcasting
bool is_elementwise_unary(OpKind k);   // Relu Sigmoid Tanh Erf Sqrt Clip ScalarMul Cast Gelu HardSigmoid HardSwish
bool is_source(OpKind k);              // Input Weight Constant: no inputs
// An op that only moves, selects or relabels values (sources, views, layout, slicing, gathering),
// by its cost class: exact in every dtype. Every other op computes, and rlflow's rules and proofs
// treat what it computes as real arithmetic, which integer types (wrapping, truncating division)
// and runtimes' integer kernels (onnxruntime has no integer Gemm) do not follow.
bool moves_values_only(OpKind k);
inline bool is_commutative(OpKind k) { return k == OpKind::kAdd || k == OpKind::kMul; }  // inputs swap

enum class Activation : uint8_t { kNone, kRelu, kSigmoid, kTanh };
std::string_view activation_name(Activation a);

// Every parameter struct describes its fields once, in order: describe(p, f) calls f(name, field)
// for each, with p const or not. The hash (hash_params) and the rule fields (rules/fields.cpp:
// what a rule names, reads and builds) derive from it, so a new field is one line there. The name
// is the one rule files use. Order matters: the hash follows it, and recorded cost tables are
// keyed by the hash, so fields are only ever appended.
template <class P, class F>
void for_each_field(P& p, F&& f) {
  if constexpr (!std::is_same_v<std::remove_const_t<P>, std::monostate>) std::remove_const_t<P>::describe(p, f);
}

// Spatial attributes are always fully spelled out (one entry per spatial dim; pads as
// begin..., end...), so two equal convolutions have equal parameters.
struct ConvParams {
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  Activation act = Activation::kNone;  // fused activation; exported as a separate node
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("strides", p.strides); f("pads", p.pads); f("dilations", p.dilations); f("group", p.group); f("act", p.act);
  }
  bool operator==(const ConvParams&) const = default;
};
struct PoolParams {
  std::vector<int64_t> kernel, strides, pads;
  bool ceil_mode = false;
  bool count_include_pad = false;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("kernel", p.kernel); f("strides", p.strides); f("pads", p.pads); f("ceil_mode", p.ceil_mode); f("count_include_pad", p.count_include_pad);
  }
  bool operator==(const PoolParams&) const = default;
};
struct GemmParams {
  double alpha = 1.0, beta = 1.0;
  bool trans_a = false, trans_b = false;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("alpha", p.alpha); f("beta", p.beta); f("trans_a", p.trans_a); f("trans_b", p.trans_b);
  }
  bool operator==(const GemmParams&) const = default;
};
// Softmax, Concat, Flatten, Gather: one axis, normalised to be non-negative.
struct AxisParams {
  int64_t axis = 0;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("axis", p.axis);
  }
  bool operator==(const AxisParams&) const = default;
};
// ReduceMean, Squeeze, Unsqueeze: sorted non-negative axes.
struct AxesParams {
  std::vector<int64_t> axes;
  bool keepdims = true;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("axes", p.axes); f("keepdims", p.keepdims);
  }
  bool operator==(const AxesParams&) const = default;
};
struct SplitParams {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("axis", p.axis); f("sizes", p.sizes);
  }
  bool operator==(const SplitParams&) const = default;
};
struct TransposeParams {
  std::vector<int64_t> perm;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("perm", p.perm);
  }
  bool operator==(const TransposeParams&) const = default;
};
struct ReshapeParams {
  Shape shape;  // fully resolved: no 0 or -1
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("shape", p.shape);
  }
  bool operator==(const ReshapeParams&) const = default;
};
enum class PadMode : uint8_t { kConstant, kReflect, kEdge };
struct PadParams {
  std::vector<int64_t> pads;  // begin..., end... for every dim
  PadMode mode = PadMode::kConstant;
  double value = 0.0;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("pads", p.pads); f("mode", p.mode); f("value", p.value);
  }
  bool operator==(const PadParams&) const = default;
};
// Normalised: one entry per sliced axis, clamped to the input's extent.
struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("starts", p.starts); f("ends", p.ends); f("axes", p.axes); f("steps", p.steps);
  }
  bool operator==(const SliceParams&) const = default;
};
// LayerNorm and RMSNorm (axis: the first normalised dim) and BatchNorm (axis unused).
struct NormParams {
  int64_t axis = -1;
  double epsilon = 1e-5;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("axis", p.axis); f("epsilon", p.epsilon);
  }
  bool operator==(const NormParams&) const = default;
};
struct ClipParams {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("min", p.min); f("max", p.max);
  }
  bool operator==(const ClipParams&) const = default;
};
// TASO's Enlarge: zero-pad a conv kernel (centred) to a larger spatial size.
struct EnlargeParams {
  std::vector<int64_t> kernel;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("kernel", p.kernel);
  }
  bool operator==(const EnlargeParams&) const = default;
};
struct ScalarParams {
  double value = 1.0;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("value", p.value);
  }
  bool operator==(const ScalarParams&) const = default;
};
struct CastParams {
  DType to = DType::kFloat32;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("to", p.to);
  }
  bool operator==(const CastParams&) const = default;
};
// GELU (ONNX Gelu, opset 20): x * Phi(x) exactly, or its tanh approximation.
struct GeluParams {
  bool tanh = false;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("approximate", p.tanh);
  }
  bool operator==(const GeluParams&) const = default;
};
// ONNX HardSigmoid: max(0, min(1, alpha x + beta)). HardSwish (no parameters) is
// x * HardSigmoid(x) with alpha 1/6, beta 1/2.
struct HardSigmoidParams {
  double alpha = 0.2, beta = 0.5;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("alpha", p.alpha); f("beta", p.beta);
  }
  bool operator==(const HardSigmoidParams&) const = default;
};
// ONNX RotaryEmbedding (opset 23): rotates pairs of X's first rotary_embedding_dim features (0: all)
// by the cached angles; interleaved pairs (x0, x1), (x2, x3), ... instead of halves. num_heads is
// needed (and only allowed) for a 3-D X of shape (B, S, H*D).
struct RotaryParams {
  bool interleaved = false;
  int64_t num_heads = 0, rotary_embedding_dim = 0;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("interleaved", p.interleaved); f("num_heads", p.num_heads); f("rotary_embedding_dim", p.rotary_embedding_dim);
  }
  bool operator==(const RotaryParams&) const = default;
};
// ONNX Attention (opset 23): softmax(scale * Q K^T + mask) V, with is_causal masking the upper
// triangle (aligned to the upper left, as ONNX states it) and grouped-query attention when K and V
// have fewer heads than Q. scale 0 means ONNX's default 1/sqrt(head_size). q_num_heads and
// kv_num_heads are needed (and only allowed) for the 3-D form (B, S, H*E).
struct AttentionParams {
  bool is_causal = false;
  double scale = 0.0;
  int64_t q_num_heads = 0, kv_num_heads = 0;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("is_causal", p.is_causal); f("scale", p.scale); f("q_num_heads", p.q_num_heads); f("kv_num_heads", p.kv_num_heads);
  }
  bool operator==(const AttentionParams&) const = default;
};
// TASO's constant-generating ops; they fold into initializers at export.
enum class ConstantFill : uint8_t {
  kValue,         // every element = value
  kIdentityConv,  // [C, C/group... ] kernel that makes a conv the identity
  kAvgPoolKernel  // [C, 1, kh, kw] depthwise kernel with 1/(kh*kw)
};
struct ConstantParams {
  ConstantFill fill = ConstantFill::kValue;
  Shape shape;
  DType dtype = DType::kFloat32;
  double value = 0.0;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("fill", p.fill); f("shape", p.shape); f("dtype", p.dtype); f("value", p.value);
  }
  bool operator==(const ConstantParams&) const = default;
};
// LeakyRelu (a plain op: its field is its ONNX attribute).
struct LeakyReluParams {
  double alpha = 0.01;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("alpha", p.alpha);
  }
  bool operator==(const LeakyReluParams&) const = default;
};
// ONNX DequantizeLinear (a record op, src/ir/ops/quantize.cpp): (x - zero_point) * scale, per
// tensor or per axis. output_dtype is ONNX's TensorProto number (0: the scale's type).
struct DequantizeParams {
  int64_t axis = 1, block_size = 0, output_dtype = 0;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("axis", p.axis); f("block_size", p.block_size); f("output_dtype", p.output_dtype);
  }
  bool operator==(const DequantizeParams&) const = default;
};
// An ONNX op rlflow does not model: kept verbatim so the model round-trips.
struct OpaqueParams {
  std::string domain, op_type;
  std::string attributes;  // serialized onnx NodeProto holding only the attributes
  int64_t since_version = 0;
  // ONNX input/output slot of each IR input/output: optional slots left empty ("") in between.
  std::vector<int64_t> input_slots, output_slots;
  // The attributes parsed (filled on import; what the executor reads). Derived from `attributes`,
  // so equality and the hash ignore it.
  AttributesPtr attrs;
  template <class P, class F>
  static void describe(P& p, F&& f) {
    f("domain", p.domain); f("op_type", p.op_type); f("attributes", p.attributes); f("since_version", p.since_version);
    f("input_slots", p.input_slots); f("output_slots", p.output_slots);  // not attrs: derived from attributes
  }
  bool operator==(const OpaqueParams& o) const {
    return domain == o.domain && op_type == o.op_type && attributes == o.attributes && since_version == o.since_version &&
           input_slots == o.input_slots && output_slots == o.output_slots;
  }
};

using OpParams = std::variant<std::monostate, ConvParams, PoolParams, GemmParams, AxisParams, AxesParams,
                              SplitParams, TransposeParams, ReshapeParams, PadParams, SliceParams, NormParams,
                              ClipParams, EnlargeParams, ScalarParams, CastParams, ConstantParams, OpaqueParams, GeluParams,
                              HardSigmoidParams, RotaryParams, AttentionParams, LeakyReluParams,
                              DequantizeParams>;

// The parameters a node of kind k starts from: its struct (op_info(k).params), default-constructed.
OpParams default_params(OpKind k);

void hash_params(Hasher& h, const OpParams& p);
std::string params_str(const OpParams& p);  // short human-readable form for logs and errors

// A plain op's ONNX attributes: every field of its parameters under its describe name (bools and
// enums as ints, so a plain op's enum must use ONNX's numbering).
Attributes plain_attributes(const OpParams& p);
// A plain op's parameters from its ONNX attributes: the struct's defaults, then each attribute by
// name. An attribute that is not a field, or of another type, is an error naming it (the importer
// then keeps the node opaque: a form newer than the IR models).
Expected<OpParams> plain_params(OpKind k, const Attributes& a);

}  // namespace rlflow::ir
