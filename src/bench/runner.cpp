#include "rlflow/bench/runner.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "rlflow/bench/helper.h"
#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/cost/device.h"
#include "rlflow/cost/measure.h"
#include "rlflow/util/file_io.h"
#include "subprocess.h"

namespace rlflow::bench {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string python_interpreter() {
  if (const char* env = std::getenv("RLFLOW_PYTHON"); env && *env) return env;
  fs::path venv;
  if (const char* env = std::getenv("RLFLOW_VENV"); env && *env) venv = env;
  else if (const char* home = std::getenv("HOME"); home && *home) venv = fs::path(home) / ".local" / "share" / "rlflow" / "venv";
  std::error_code ec;
  if (!venv.empty() && fs::exists(venv / "bin" / "python", ec)) return (venv / "bin" / "python").string();
  return "python3";
}

// A shipped runtime helper, found like the rules and the agent (next to the binary, then the source
// tree), so a run from any working directory finds the same file.
std::string ort_helper_script() { return find_shipped("configs/runtime/ort_runner.py", "RLFLOW_ORT_RUNNER"); }

namespace {

int cores() { return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

std::string threads_text(int threads) {
  return threads == 1 ? "1 thread" : threads <= 0 ? "all " + std::to_string(cores()) + " cores" : std::to_string(threads) + " threads";
}

class OrtRunner : public Runner {
 public:
  static Expected<std::unique_ptr<Runner>> create(const RunnerOptions& o) {
    const std::string script = ort_helper_script();
    auto proc = Helper::start(script);
    if (!proc) return proc.error();
    std::unique_ptr<OrtRunner> r(new OrtRunner(o, std::move(*proc)));
    auto hello = r->proc_->call(json{{"cmd", "hello"}});
    if (!hello)
      return Error::unsupported("onnxruntime is not usable through " + python_interpreter() + " " + script + ": " +
                                hello.error().message + " (run scripts/setup/setup, or set RLFLOW_PYTHON)");
    r->version_ = (*hello).value("onnxruntime", std::string("?"));
    return std::unique_ptr<Runner>(std::move(r));
  }

  Expected<size_t> load(const BenchModel& m) override {
    auto reply = proc_->call({{"cmd", "load"}, {"path", m.path}, {"threads", opts_.threads}, {"seed", opts_.seed}, {"inputs", input_shapes_json(m.graph)},
                              {"clock", opts_.clock}});
    if (!reply) return reply.error().with_context("onnxruntime cannot load " + m.path);
    return (*reply)["id"].get<size_t>();
  }

  Expected<double> run(size_t model) override {
    auto reply = proc_->call({{"cmd", "run"}, {"id", model}, {"n", 1}});
    if (!reply) return reply.error();
    return (*reply)["ms"][0].get<double>();
  }

  std::string description() const override {
    // One intra-op thread computes on the helper's calling thread, timed in its CPU time (load on
    // the machine does not count); more threads are timed in wall-clock time.
    return "onnxruntime " + version_ + " CPU (graph optimisation level ORT_ENABLE_ALL, " + threads_text(opts_.threads) +
           (opts_.threads == 1 && opts_.clock != "wall" ? ", thread CPU time)" : ", wall clock)");
  }

 private:
  OrtRunner(RunnerOptions o, std::unique_ptr<Helper> p) : opts_(std::move(o)), proc_(std::move(p)) {}

  RunnerOptions opts_;
  std::unique_ptr<Helper> proc_;
  std::string version_;
};

// Runs imported graphs in-process; `measure` times one sample of a graph.
class GraphRunner : public Runner {
 public:
  using Measure = std::function<Expected<cost::GraphMeasurement>(const ir::Graph&)>;
  GraphRunner(std::string what, Measure measure) : what_(std::move(what)), measure_(std::move(measure)) {}

  Expected<size_t> load(const BenchModel& m) override {
    // One untimed run settles allocations and kernel choices, and refuses graphs the runner cannot run.
    if (auto r = measure_(m.graph); !r) return r.error().with_context(m.path);
    else method_ = r->method;
    graphs_.push_back(m.graph);
    return graphs_.size() - 1;
  }
  Expected<double> run(size_t model) override {
    auto r = measure_(graphs_.at(model));
    if (!r) return r.error();
    return r->ms;
  }
  std::string description() const override { return what_ + (method_.empty() ? "" : ": " + method_); }

 private:
  std::string what_, method_;
  Measure measure_;
  std::vector<ir::Graph> graphs_;
};

// rlflow's GPU runner as a deployed runtime runs a model: each file is prepared once (buffers,
// algorithms, warm-up, one captured CUDA graph) when it is loaded, and a sample replays that graph.
class CudnnGraphRunner : public Runner {
 public:
  Expected<size_t> load(const BenchModel& m) override {
    cost::MeasureOptions mo;
    mo.warmup = 3;
    auto s = cost::prepare_graph_gpu(m.graph, mo);
    if (!s) return s.error().with_context(m.path);
    method_ = (*s)->method();
    sessions_.push_back(std::move(*s));
    return sessions_.size() - 1;
  }
  // One sample: kReplays back-to-back replays between two events, divided (a replay of a small
  // graph is tens of microseconds, close to the events' own resolution).
  Expected<double> run(size_t model) override { return sessions_.at(model)->run_ms(kReplays); }
  std::string description() const override { return "rlflow cuDNN runner" + (method_.empty() ? "" : ": " + method_); }

 private:
  static constexpr int kReplays = 10;
  std::string method_;
  std::vector<std::unique_ptr<cost::GpuGraphSession>> sessions_;
};

}  // namespace

Expected<std::unique_ptr<Runner>> make_runner(const RunnerOptions& o) {
  if (o.target == "ort") return OrtRunner::create(o);
  if (o.target == "cpu") {
    cost::MeasureOptions mo;
    mo.warmup = 0;
    mo.repeats = 1;
    mo.seed = o.seed;
    mo.threads = o.threads <= 0 ? cores() : o.threads;
    return std::unique_ptr<Runner>(std::make_unique<GraphRunner>(
        "rlflow reference executor", [mo](const ir::Graph& g) { return cost::measure_graph_cpu(g, mo); }));
  }
  if (o.target == "cudnn") {
    if (!cost::cudnn_backend_compiled())
      return Error::unsupported("the GPU runner (--target gpu) is unavailable: " + cost::cudnn_backend_absent());
    if (cost::probe_devices().device_count == 0) return Error::unsupported("no usable GPU: the GPU runner (--target gpu) is unavailable");
    return std::unique_ptr<Runner>(std::make_unique<CudnnGraphRunner>());
  }
  return Error{ErrorCode::kUsage, "unknown bench target '" + o.target + "' (expected ort, cpu or cudnn)"};
}

}  // namespace rlflow::bench
