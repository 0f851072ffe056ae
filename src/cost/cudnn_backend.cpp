// The host side of the cudnn backend: turns signatures and graphs into the plain descriptions the
// CUDA code (C++17, src/cost/cuda) understands, and loads that code, a module of its own
// (librlflow_cudnn.so), the first time it is asked to measure. Compiled with or without CUDA;
// without it, runtime() says so.
#include <cfloat>
#include <cmath>
#include <map>

#include "cuda/gpu_api.h"
#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/cost/measure.h"
#include "rlflow/util/module.h"

namespace rlflow::cost {

namespace {

gpu::TensorDesc tensor(const ir::TensorType& t) {
  gpu::TensorDesc d;
  d.shape = t.shape;
  d.elem_bytes = static_cast<int>(ir::dtype_size(t.dtype));
  d.is_f32 = t.dtype == ir::DType::kFloat32;
  d.is_int64 = t.dtype == ir::DType::kInt64;
  if (t.dtype == ir::DType::kFloat16) d.half = gpu::TensorDesc::Half::kFloat16;
  if (t.dtype == ir::DType::kBFloat16) d.half = gpu::TensorDesc::Half::kBFloat16;
  return d;
}

double finite_or(double v, double fallback) { return std::isfinite(v) ? v : fallback; }

Expected<gpu::OpDesc> to_desc(const OpSignature& s, std::string label) {
  using ir::OpKind;
  using gpu::Kind;
  gpu::OpDesc d;
  d.label = std::move(label);
  for (const auto& t : s.inputs) d.inputs.push_back(tensor(t));
  for (const auto& t : s.outputs) d.outputs.push_back(tensor(t));
  auto need = [&](auto* p) -> Status {
    if (!p) return Error::bad_input(d.label + ": parameters do not match the op kind");
    return {};
  };
  switch (s.kind) {
    case OpKind::kConv: {
      const auto* p = std::get_if<ir::ConvParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kConv;
      d.strides = p->strides;
      d.pads = p->pads;
      d.dilations = p->dilations;
      d.group = p->group;
      d.act = static_cast<gpu::Act>(static_cast<int>(p->act));
      break;
    }
    case OpKind::kMatMul: d.kind = Kind::kMatMul; break;
    case OpKind::kGemm: {
      const auto* p = std::get_if<ir::GemmParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kGemm;
      d.trans_a = p->trans_a;
      d.trans_b = p->trans_b;
      d.alpha = p->alpha;
      d.beta = p->beta;
      break;
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: {
      const auto* p = std::get_if<ir::PoolParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = s.kind == OpKind::kMaxPool ? Kind::kMaxPool : Kind::kAvgPool;
      d.kernel = p->kernel;
      d.strides = p->strides;
      d.pads = p->pads;
      d.count_include_pad = p->count_include_pad;
      break;
    }
    case OpKind::kGlobalAveragePool: d.kind = Kind::kGlobalAvgPool; break;
    case OpKind::kSoftmax: {
      const auto* p = std::get_if<ir::AxisParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kSoftmax;
      d.axis = p->axis;
      break;
    }
    case OpKind::kLayerNorm:
    case OpKind::kBatchNorm: {
      const auto* p = std::get_if<ir::NormParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = s.kind == OpKind::kLayerNorm ? Kind::kLayerNorm : Kind::kBatchNorm;
      d.axis = p->axis;
      d.epsilon = p->epsilon;
      break;
    }
    case OpKind::kRMSNorm: {
      // Timed with the LayerNorm kernel without a bias: the same passes over x and the scale, one
      // reduction more than RMSNorm needs, so an upper bound until it has a kernel of its own.
      const auto* p = std::get_if<ir::NormParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      if (s.inputs.size() != 2) return Error::bad_input(d.label + ": RMSNorm expects 2 inputs");
      d.kind = Kind::kLayerNorm;
      d.axis = p->axis;
      d.epsilon = p->epsilon;
      break;
    }
    case OpKind::kRotaryEmbedding: {
      // No cuDNN kernel: timed as the broadcasting multiply of X by itself, one streaming read of
      // X and one write of Y, the traffic of a fused rotation but for the (smaller) cache reads,
      // so a lower bound until it has a kernel of its own.
      if (s.inputs.size() < 3) return Error::bad_input(d.label + ": RotaryEmbedding expects 3 or 4 inputs");
      d.kind = Kind::kMul;
      d.inputs = {tensor(s.inputs[0]), tensor(s.inputs[0])};
      break;
    }
    case OpKind::kAttention: {
      // No fused SDPA kernel here (cuDNN's needs its graph API, which this runtime does not drive):
      // timed as the Q K^T GEMM of the kv-head groups, (B, Hkv, r*S, E) by (B, Hkv, E, L), the
      // inputs' sizes those of Q and K. Half the FLOPs of the fused op and an (S, L) write it does
      // not make, so an estimate until it has a kernel of its own. Its output is the scores', so it
      // is not replayed in a whole-graph program (prepare_graph_gpu refuses it).
      if (s.inputs.size() < 3 || s.inputs[0].rank() < 3) return Error::bad_input(d.label + ": Attention expects 3 or 4 inputs");
      const ir::TensorType &q = s.inputs[0], &k = s.inputs[1];
      const auto* p = std::get_if<ir::AttentionParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      const bool four = q.rank() == 4;
      const int64_t b = q.shape[0], hq = four ? q.shape[1] : p->q_num_heads, hkv = four ? k.shape[1] : p->kv_num_heads;
      if (hq <= 0 || hkv <= 0) return Error::bad_input(d.label + ": Attention without head counts");
      const int64_t seq = four ? q.shape[2] : q.shape[1], len = four ? k.shape[2] : k.shape[1];
      const int64_t e = four ? q.shape[3] : q.shape[2] / hq;
      ir::TensorType a = q, bt = k, o = q;
      a.shape = {b, hkv, (hq / hkv) * seq, e};
      bt.shape = {b, hkv, e, len};
      o.shape = {b, hkv, (hq / hkv) * seq, len};
      d.kind = Kind::kMatMul;
      d.inputs = {tensor(a), tensor(bt)};
      d.outputs = {tensor(o)};
      break;
    }
    case OpKind::kReduceMean: {
      const auto* p = std::get_if<ir::AxesParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kReduceMean;
      d.axes = p->axes;
      break;
    }
    case OpKind::kRelu: d.kind = Kind::kRelu; break;
    case OpKind::kSigmoid: d.kind = Kind::kSigmoid; break;
    case OpKind::kTanh: d.kind = Kind::kTanh; break;
    case OpKind::kAdd: d.kind = Kind::kAdd; break;
    case OpKind::kSub: d.kind = Kind::kSub; break;
    case OpKind::kMul: d.kind = Kind::kMul; break;
    case OpKind::kDiv: d.kind = Kind::kDiv; break;
    case OpKind::kPow: d.kind = Kind::kPow; break;
    case OpKind::kSqrt: d.kind = Kind::kSqrt; break;
    case OpKind::kErf: d.kind = Kind::kErf; break;
    case OpKind::kGelu: {
      const auto* p = std::get_if<ir::GeluParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = p->tanh ? Kind::kGeluTanh : Kind::kGelu;
      break;
    }
    case OpKind::kHardSigmoid: {
      const auto* p = std::get_if<ir::HardSigmoidParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kHardSigmoid;
      d.lo = p->alpha;  // the unary kernel's two parameters: alpha, beta
      d.hi = p->beta;
      break;
    }
    case OpKind::kHardSwish: d.kind = Kind::kHardSwish; break;
    case OpKind::kClip: {
      const auto* p = std::get_if<ir::ClipParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kClip;
      d.lo = finite_or(p->min, -FLT_MAX);
      d.hi = finite_or(p->max, FLT_MAX);
      break;
    }
    case OpKind::kScalarMul: {
      const auto* p = std::get_if<ir::ScalarParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kScale;
      d.value = p->value;
      break;
    }
    case OpKind::kCast: d.kind = Kind::kCast; break;
    case OpKind::kTranspose: {
      const auto* p = std::get_if<ir::TransposeParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kTranspose;
      d.perm = p->perm;
      if (s.inputs.empty() || d.perm.size() != s.inputs[0].shape.size()) return Error::bad_input(d.label + ": Transpose perm");
      break;
    }
    case OpKind::kSlice: {
      const auto* p = std::get_if<ir::SliceParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      if (s.inputs.empty()) return Error::bad_input(d.label + ": Slice without input");
      d.kind = Kind::kSlice;
      const size_t r = s.inputs[0].shape.size();
      d.starts.assign(r, 0);
      d.steps.assign(r, 1);
      for (size_t k = 0; k < p->axes.size() && k < p->starts.size() && k < p->steps.size(); ++k) {
        const auto a = static_cast<size_t>(p->axes[k]);
        if (a >= r) return Error::bad_input(d.label + ": Slice axis out of range");
        d.starts[a] = p->starts[k];
        d.steps[a] = p->steps[k];
      }
      break;
    }
    case OpKind::kPad: {
      const auto* p = std::get_if<ir::PadParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      if (s.inputs.empty()) return Error::bad_input(d.label + ": Pad without input");
      d.kind = Kind::kPad;
      const size_t r = s.inputs[0].shape.size();
      d.pad_begin.assign(p->pads.begin(), p->pads.begin() + static_cast<long>(std::min(r, p->pads.size())));
      d.pad_begin.resize(r, 0);
      d.pad_mode = static_cast<gpu::PadMode>(static_cast<int>(p->mode));
      d.value = p->value;
      break;
    }
    case OpKind::kEnlarge: {
      const auto* p = std::get_if<ir::EnlargeParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      if (s.inputs.empty()) return Error::bad_input(d.label + ": Enlarge without input");
      d.kind = Kind::kPad;  // a centred zero pad of the kernel's spatial dims
      const auto& in = s.inputs[0].shape;
      d.pad_begin.assign(in.size(), 0);
      for (size_t i = 0; i < p->kernel.size() && 2 + i < in.size(); ++i) d.pad_begin[2 + i] = (p->kernel[i] - in[2 + i]) / 2;
      break;
    }
    case OpKind::kGather:
    case OpKind::kConcat: {
      const auto* p = std::get_if<ir::AxisParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = s.kind == OpKind::kGather ? Kind::kGather : Kind::kConcat;
      d.axis = p->axis;
      break;
    }
    case OpKind::kSplit: {
      const auto* p = std::get_if<ir::SplitParams>(&s.params);
      RLFLOW_TRY_STATUS(need(p));
      d.kind = Kind::kSplit;
      d.axis = p->axis;
      break;
    }
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: d.kind = Kind::kView; break;
    case OpKind::kConstant: {
      d.kind = Kind::kFill;
      if (const auto* p = std::get_if<ir::ConstantParams>(&s.params)) d.value = p->value;
      break;
    }
    case OpKind::kInput:
    case OpKind::kWeight:
    case OpKind::kOpaque:
      return Error::internal(d.label + ": " + std::string(ir::op_name(s.kind)) + " has no kernel");
    default:  // the other plain ops (ir::OpInfo::plain, no_gpu_kernel): no kernel, as for opaque ones
      return Error::unsupported(d.label + ": " + std::string(ir::op_name(s.kind)) + " has no GPU kernel");
  }
  return d;
}

// Opaque ops, and the plain ops (ir::OpInfo::plain) but those to_desc times all the same.
bool no_gpu_kernel(ir::OpKind k) {
  return k == ir::OpKind::kOpaque || (ir::op_info(k).plain && k != ir::OpKind::kRotaryEmbedding);
}

gpu::RuntimeOptions runtime_options(const GpuOptions& o) {
  gpu::RuntimeOptions r;
  r.device = o.device;
  r.warmup = o.warmup;
  r.repeats = o.repeats;
  r.workspace_bytes = o.workspace_bytes;
  r.allow_tf32 = o.allow_tf32;
  return r;
}

class CudnnCostModel : public CostModel {
 public:
  explicit CudnnCostModel(std::unique_ptr<gpu::Runtime> rt) : rt_(std::move(rt)) {}
  Expected<double> op_cost(const OpSignature& sig) override {
    if (no_gpu_kernel(sig.kind)) return kOpaqueCostMs;  // no kernel to time
    if (sig.kind == ir::OpKind::kInput || sig.kind == ir::OpKind::kWeight) return 0.0;
    auto d = to_desc(sig, std::string(ir::op_name(sig.kind)));
    if (!d) return d.error();
    return rt_->time_op(*d);
  }
  std::string device_fingerprint() const override { return rt_->fingerprint(); }
  std::string name() const override { return "cudnn"; }
  // The runner this prices (prepare_graph_gpu) runs a Conv's only-reader Relu as its epilogue.
  std::vector<bool> runtime_fused(const ir::Graph& g, const std::vector<bool>& constant) const override {
    return cudnn_runner_fused_nodes(g, constant);
  }
  bool fuses_conv_activation(ir::Activation a) const override { return a == ir::Activation::kRelu; }

 private:
  std::unique_ptr<gpu::Runtime> rt_;
};

ModuleSlot<gpu::CudnnModule>& cudnn_slot() {
  static ModuleSlot<gpu::CudnnModule> s("librlflow_cudnn.so", "RLFLOW_CUDNN_MODULE", "rlflow_cudnn_module",
                                        "rlflow's cuDNN module");
  return s;
}

// A runtime on the GPU, through the module.
Expected<std::unique_ptr<gpu::Runtime>> runtime(const GpuOptions& opts) {
#ifdef RLFLOW_HAVE_CUDNN
  auto m = cudnn_slot().get("the cudnn cost backend");
  if (!m) return m.error();
  return (*m)->create_runtime(runtime_options(opts));
#else
  return Error::unsupported("the cudnn cost backend is not compiled into this binary (built without CUDA/cuDNN)");
#endif
}

}  // namespace

bool cudnn_backend_compiled() {
#ifdef RLFLOW_HAVE_CUDNN
  return cudnn_slot().present();
#else
  return false;
#endif
}

std::string cudnn_backend_absent() {
#ifdef RLFLOW_HAVE_CUDNN
  return cudnn_slot().present() ? "" : cudnn_slot().not_built();
#else
  return "this rlflow was built without CUDA/cuDNN";
#endif
}

void use_cudnn_module(const gpu::CudnnModule* module) { cudnn_slot().use(module); }

Expected<std::unique_ptr<CostModel>> make_cudnn_cost_model(const GpuOptions& opts) {
  auto rt = runtime(opts);
  if (!rt) return rt.error();
  return std::unique_ptr<CostModel>(std::make_unique<CudnnCostModel>(std::move(*rt)));
}

namespace {

class CudnnGraphSession : public GpuGraphSession {
 public:
  CudnnGraphSession(std::unique_ptr<gpu::Runtime> rt, std::unique_ptr<gpu::PreparedProgram> prog, int skipped)
      : rt_(std::move(rt)), prog_(std::move(prog)), skipped_(skipped) {}
  ~CudnnGraphSession() override { prog_.reset(); }  // before the runtime whose handles it borrows
  Expected<double> run_ms(int inner) override { return prog_->time(1, inner); }
  std::string method() const override { return prog_->method() + " on " + rt_->device_name(); }
  int skipped_opaque() const override { return skipped_; }

 private:
  std::unique_ptr<gpu::Runtime> rt_;
  std::unique_ptr<gpu::PreparedProgram> prog_;
  int skipped_;
};

}  // namespace

Expected<std::unique_ptr<GpuGraphSession>> prepare_graph_gpu(const ir::Graph& file, const MeasureOptions& mo, const GpuOptions& opts) {
  auto rt = runtime(opts);
  if (!rt) return rt.error();
  // The runner's own fusion, as every GPU runtime makes it: a Conv's only-reader Relu runs as the
  // Conv's epilogue (the cudnn and recorded costs price it so).
  const ir::Graph g = cudnn_runner_graph(file);
  const auto constant = constant_nodes(g);
  gpu::Program p;
  std::map<ir::ValueRef, int> value_of;
  int skipped = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto id = static_cast<ir::NodeId>(i);
    const auto& n = g.node(id);
    std::vector<int> outs;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      value_of[{id, static_cast<int32_t>(k)}] = static_cast<int>(p.values.size());
      outs.push_back(static_cast<int>(p.values.size()));
      p.values.push_back(tensor(n.outputs[k]));
    }
    // Folded values exist before the graph runs, like weights; opaque ops cannot run here, so
    // their outputs are treated as given data too (and counted).
    const bool no_kernel = no_gpu_kernel(n.kind);
    const bool given = n.kind == ir::OpKind::kInput || n.kind == ir::OpKind::kWeight || no_kernel || constant[i];
    if (no_kernel) ++skipped;
    if (n.kind == ir::OpKind::kAttention && !constant[i])
      return Error::unsupported(ir::node_label(g, id) + ": Attention has no kernel to replay in a GPU program");
    if (given) {
      p.sources.insert(p.sources.end(), outs.begin(), outs.end());
      continue;
    }
    auto d = to_desc(OpSignature::of(g, id, constant), ir::node_label(g, id));
    if (!d) return d.error();
    gpu::Program::Step step{std::move(*d), {}, std::move(outs)};
    for (const auto& in : n.inputs) step.in.push_back(value_of.at(in));
    p.steps.push_back(std::move(step));
  }
  auto prog = (*rt)->prepare_program(p, mo.warmup);
  if (!prog) return prog.error();
  return std::unique_ptr<GpuGraphSession>(std::make_unique<CudnnGraphSession>(std::move(*rt), std::move(*prog), skipped));
}

Expected<GraphMeasurement> measure_graph_gpu(const ir::Graph& g, const MeasureOptions& mo, const GpuOptions& opts) {
  auto session = prepare_graph_gpu(g, mo, opts);
  if (!session) return session.error();
  // Each timed run is one replay; the median over mo.repeats of them.
  std::vector<double> runs;
  for (int i = 0; i < std::max(1, mo.repeats); ++i) {
    auto ms = (*session)->run_ms(1);
    if (!ms) return ms.error();
    runs.push_back(*ms);
  }
  std::sort(runs.begin(), runs.end());
  GraphMeasurement m;
  m.ms = runs[runs.size() / 2];
  m.runs = static_cast<int>(runs.size());
  m.skipped_opaque = (*session)->skipped_opaque();
  m.method = "cudnn kernels, " + (*session)->method() + " (CUDA events, median)";
  return m;
}

}  // namespace rlflow::cost
