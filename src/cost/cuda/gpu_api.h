#pragma once
// Internal to cost: the boundary between the C++20 cost library and the CUDA code. The .cu files
// compile as C++17 and never see ir:: types, so an op crosses this boundary as a plain OpDesc
// (built by src/cost/cudnn_backend.cpp from an OpSignature). No CUDA headers here either.
// The CUDA code is a loadable module (util/module.h), librlflow_cudnn.so: the binary loads it the
// first time it measures on a GPU, and neither builds nor links cuDNN and cuBLAS for anything else.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/util/expected.h"

namespace rlflow::cost::gpu {

struct TensorDesc {
  std::vector<int64_t> shape;
  int elem_bytes = 4;
  bool is_f32 = true;  // float32; anything else is moved as raw bytes (Cast, integer indices)
  bool is_int64 = false;
  enum class Half { kNone, kFloat16, kBFloat16 } half = Half::kNone;  // 16-bit float storage
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * static_cast<size_t>(elem_bytes); }
};

enum class Kind {
  kConv, kMatMul, kGemm,
  kMaxPool, kAvgPool, kGlobalAvgPool, kSoftmax, kBatchNorm, kLayerNorm, kReduceMean,
  kRelu, kSigmoid, kTanh,                  // cuDNN activation
  kAdd, kSub, kMul, kDiv, kPow,            // broadcasting binary kernel
  kSqrt, kErf, kClip, kScale, kGelu, kGeluTanh, kHardSigmoid, kHardSwish,  // unary kernel
  kTranspose, kSlice, kPad, kGather, kConcat, kSplit, kCast, kFill,
  kView                                    // Reshape and friends: no kernel, the output aliases the input
};

enum class Act { kNone, kRelu, kSigmoid, kTanh };
enum class PadMode { kConstant, kReflect, kEdge };

struct OpDesc {
  Kind kind = Kind::kView;
  std::string label;  // for error messages
  std::vector<TensorDesc> inputs, outputs;
  // Conv and pooling (spatial dims only); pads as begin..., end...
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t group = 1;
  Act act = Act::kNone;
  bool count_include_pad = false;
  // Gemm
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 1;
  // Softmax, Concat, Split, Gather: the axis; ReduceMean: axes; Transpose: perm
  int64_t axis = 0;
  std::vector<int64_t> axes, perm;
  // Slice: per input dim (dims not sliced: start 0, step 1). Pad: begin pads per dim.
  std::vector<int64_t> starts, steps, pad_begin;
  PadMode pad_mode = PadMode::kConstant;
  double value = 0;     // Pad value, Scale factor, Fill value
  double lo = 0, hi = 0;  // Clip bounds
  double epsilon = 1e-5;
};

// A whole graph in execution order, for measuring it end to end.
struct Program {
  std::vector<TensorDesc> values;
  std::vector<int> sources;  // values filled with data before the run: inputs, weights, constants
  struct Step {
    OpDesc op;
    std::vector<int> in, out;  // indices into values
  };
  std::vector<Step> steps;
};

struct RuntimeOptions {
  int device = 0;
  int warmup = 8;
  int repeats = 32;
  size_t workspace_bytes = size_t{256} << 20;
  bool allow_tf32 = true;  // fp32 convolutions and GEMMs may use TF32 tensor cores
};

// A program made ready to run, as a deployed runtime runs it: buffers allocated, workspaces and
// algorithms chosen, warm-up runs done, and the whole sequence captured as one CUDA graph. Timing it
// replays the graph, so it measures GPU time without a host launch per kernel. Borrows its
// Runtime's handles: the Runtime must outlive it.
class PreparedProgram {
 public:
  virtual ~PreparedProgram() = default;
  // Median over `repeats` samples of the milliseconds of one run; each sample times `inner`
  // back-to-back runs between two events and divides.
  virtual Expected<double> time(int repeats, int inner) = 0;
  // "CUDA graph replay", or "eager kernel launches (CUDA graph capture failed: ...)".
  virtual std::string method() const = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  // Median milliseconds of one run of the op, with inputs filled with data.
  virtual Expected<double> time_op(const OpDesc& op) = 0;
  // Prepares `p` (see PreparedProgram) after `warmup` eager runs.
  virtual Expected<std::unique_ptr<PreparedProgram>> prepare_program(const Program& p, int warmup) = 0;
  virtual std::string fingerprint() const = 0;
  virtual std::string device_name() const = 0;
};

// Fails with a clear message when no device is usable (in the module: src/cost/cuda/cudnn_runtime.cu).
Expected<std::unique_ptr<Runtime>> create_runtime(const RuntimeOptions& opts);

// The module's table; its entry point is `extern "C" const CudnnModule* rlflow_cudnn_module()`.
struct CudnnModule {
  // Bumped whenever this table or a type it passes (this header) changes: a module built from other
  // sources is refused.
  static constexpr int kAbi = 1;
  int abi = kAbi;
  Expected<std::unique_ptr<Runtime>> (*create_runtime)(const RuntimeOptions& opts) = nullptr;
};

// The table itself, for programs that link rlflow_cost_cuda (the Python module) and hand it over
// with cost::use_cudnn_module.
const CudnnModule& cudnn_module_table();

}  // namespace rlflow::cost::gpu
