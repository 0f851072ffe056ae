#pragma once
// Runners measure whole models end to end on a target: onnxruntime on the CPU (the runtime users
// of rlflow deploy with), rlflow's reference executor, or rlflow's cuDNN runner on the GPU. A cost
// model predicts; a runner measures. No torch, CUDA or onnxruntime header here.
#include <memory>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"
#include "rlflow/util/expected.h"

namespace rlflow::bench {

// One model to measure: its ONNX file (onnxruntime runs the file) and its imported graph (the
// reference executor and the GPU runner run the graph). Both describe the same model.
struct BenchModel {
  std::string path;
  ir::Graph graph;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // Prepares a model (session, buffers, algorithm choices) so that timed runs do no set-up work;
  // returns its index for run().
  virtual Expected<size_t> load(const BenchModel& m) = 0;
  // Milliseconds of one end-to-end run of a loaded model on seeded inputs.
  virtual Expected<double> run(size_t model) = 0;
  // What runs, in words (runtime, version, threads, clock).
  virtual std::string description() const = 0;
};

// Targets: "ort" (onnxruntime CPU), "cpu" (reference executor), "cudnn" (GPU).
struct RunnerOptions {
  std::string target = "ort";
  int threads = 1;    // ort, cpu: intra-op threads; 0 = every core
  // ort: "auto" times a 1-thread session in its thread's CPU time and others in wall-clock time;
  // "wall": wall-clock time always (what the gate used before 2026-12-02; for comparisons).
  std::string clock = "auto";
  uint64_t seed = 0;  // model inputs
};

Expected<std::unique_ptr<Runner>> make_runner(const RunnerOptions& o);

// The onnxruntime helper and the Python that runs it. The helper ships with rlflow as
// configs/runtime/ort_runner.py: $RLFLOW_ORT_RUNNER, else next to the binary (<bin>/../configs/...,
// <bin>/../share/rlflow/configs/...), else the source tree the binary was built from. The Python:
// $RLFLOW_PYTHON, else the project venv ($RLFLOW_VENV or ~/.local/share/rlflow/venv), else python3.
std::string python_interpreter();
std::string ort_helper_script();

}  // namespace rlflow::bench
