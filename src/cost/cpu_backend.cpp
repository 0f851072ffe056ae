// The cpu backend. Each op is timed as one call of the reference executor's kernel
// (exec::detail::run_op) on ATen tensors, not through Executor::run on a one-node graph: run()
// would also copy the output back into an ir::Tensor, a memcpy that the whole-graph executor
// never does for intermediate values and that would double the cost of every memory-bound op.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <time.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <fstream>
#include <thread>

#include "exec/aten_ops.h"
#include "rlflow/cost/cpu_backend.h"

#ifndef RLFLOW_TORCH_VERSION
#define RLFLOW_TORCH_VERSION "unknown"
#endif

namespace rlflow::cost {

namespace {

// With one torch thread the op runs entirely on the calling thread, so its CPU time is the op's
// cost and other processes sharing the cores do not inflate it (wall time would). Several threads
// spread the work over a pool, so then only wall time means anything.
double clock_ms(bool thread_cpu_time) {
  if (thread_cpu_time) {
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

at::Tensor make_operand(const ir::TensorType& t, at::Generator& gen) {
  // ATen's CPU kernels lack most half-precision ops (convolution among them), and CPU runtimes
  // compute half graphs in float32 too: half operands are timed as float32.
  const auto opts = at::TensorOptions().dtype(ir::is_half(t.dtype) ? at::kFloat : exec::detail::to_scalar_type(t.dtype));
  // Floats in [0.5, 1.5): no sqrt/pow/div NaNs or denormals to distort the timing. Integers and
  // booleans are zeros, which are valid indices for Gather.
  if (ir::is_float(t.dtype)) return at::rand(t.shape, gen, opts).add_(0.5);
  return at::zeros(t.shape, opts);
}

class CpuCostModel : public CostModel {
 public:
  explicit CpuCostModel(const CpuOptions& o) : opts_(o) {
    opts_.threads = std::max(1, opts_.threads);
    opts_.warmup = std::max(0, opts_.warmup);
    opts_.repeats = std::max(1, opts_.repeats);
    fingerprint_ = "cpu/" + cpu_description() + "/threads" + std::to_string(opts_.threads) + "/torch" + RLFLOW_TORCH_VERSION +
                   "/blas:" + blas_library() + (opts_.threads == 1 ? "/cputime" : "/walltime");
  }

  Expected<double> op_cost(const OpSignature& sig) override {
    if (sig.kind == ir::OpKind::kOpaque) return kOpaqueCostMs;
    if (sig.kind == ir::OpKind::kInput || sig.kind == ir::OpKind::kWeight) return 0.0;
    if (at::get_num_threads() != opts_.threads) at::set_num_threads(opts_.threads);
    ir::Node node;
    node.kind = sig.kind;
    node.params = sig.params;
    node.outputs = sig.outputs;
    node.inputs.resize(sig.inputs.size());
    try {
      auto gen = at::detail::createCPUGenerator(opts_.seed);
      std::vector<at::Tensor> in;
      in.reserve(sig.inputs.size());
      for (const auto& t : sig.inputs) in.push_back(make_operand(t, gen));
      const bool cpu_time = opts_.threads == 1;
      auto once = [&]() -> Expected<double> {
        const double t0 = clock_ms(cpu_time);
        auto r = exec::detail::run_op(node, in, false);
        const double t1 = clock_ms(cpu_time);
        if (!r) return r.error();
        return t1 - t0;
      };
      for (int i = 0; i < opts_.warmup; ++i) {
        auto r = once();
        if (!r) return r.error();
      }
      std::vector<double> times;
      double spent = 0;
      for (int i = 0; i < opts_.repeats; ++i) {
        auto r = once();
        if (!r) return r.error();
        times.push_back(*r);
        spent += *r;
        if (spent > opts_.max_seconds_per_op * 1e3 && times.size() >= 3) break;
      }
      std::sort(times.begin(), times.end());
      const size_t n = times.size();
      return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      return Error::internal("cpu backend: " + sig.str() + ": " + msg.substr(0, msg.find('\n')));
    }
  }

  std::string device_fingerprint() const override { return fingerprint_; }
  std::string name() const override { return "cpu"; }

 private:
  CpuOptions opts_;
  std::string fingerprint_;
};

}  // namespace

// Which BLAS the process resolves libblas.so.3 to (Debian switches it with update-alternatives):
// reference BLAS and OpenBLAS differ ten-fold on MatMul, so their timings must not mix.
std::string blas_library() {
  std::error_code ec;
  auto p = std::filesystem::canonical("/usr/lib/x86_64-linux-gnu/libblas.so.3", ec);
  return ec ? std::string("unknown") : p.parent_path().filename().string();
}

std::string cpu_description() {
  std::string model = "unknown cpu";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      if (auto colon = line.find(':'); colon != std::string::npos) {
        model = line.substr(colon + 1);
        model.erase(0, model.find_first_not_of(" \t"));
      }
      break;
    }
  }
  return model + " x" + std::to_string(std::max(1u, std::thread::hardware_concurrency()));
}

std::unique_ptr<CostModel> make_cpu_cost_model(const CpuOptions& opts) { return std::make_unique<CpuCostModel>(opts); }

}  // namespace rlflow::cost
