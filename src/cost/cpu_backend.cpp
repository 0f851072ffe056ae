// The cpu backend: each op timed alone by exec's op timer (rlflow/exec/op_timer.h), which owns the
// ATen side, so that the cost module parses no libtorch header.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "rlflow/cost/cpu_backend.h"
#include "rlflow/exec/op_timer.h"

#ifndef RLFLOW_TORCH_VERSION
#define RLFLOW_TORCH_VERSION "unknown"
#endif

namespace rlflow::cost {

namespace {

class CpuCostModel : public CostModel {
 public:
  explicit CpuCostModel(const CpuOptions& o) : opts_(o) {
    opts_.threads = std::max(1, opts_.threads);  // the op timer clamps warmup and repeats
    fingerprint_ = "cpu/" + cpu_description() + "/threads" + std::to_string(opts_.threads) + "/torch" + RLFLOW_TORCH_VERSION +
                   "/blas:" + blas_library() + (opts_.threads == 1 ? "/cputime" : "/walltime");
  }

  Expected<double> op_cost(const OpSignature& sig) override {
    if (sig.kind == ir::OpKind::kOpaque) return kOpaqueCostMs;
    if (sig.kind == ir::OpKind::kInput || sig.kind == ir::OpKind::kWeight) return 0.0;
    ir::Node node;
    node.kind = sig.kind;
    node.params = sig.params;
    node.outputs = sig.outputs;
    node.inputs.resize(sig.inputs.size());
    exec::OpTimingOptions t;
    t.threads = opts_.threads;
    t.warmup = opts_.warmup;
    t.repeats = opts_.repeats;
    t.max_seconds = opts_.max_seconds_per_op;
    t.seed = opts_.seed;
    auto ms = exec::median_op_time_ms(node, sig.inputs, t);
    if (!ms) return Error{ms.error().code, "cpu backend: " + sig.str() + ": " + ms.error().message};
    return *ms;
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
