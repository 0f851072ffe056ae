#pragma once
// Whole-graph measurement, to check how well the sum of per-op costs predicts a real run.
#include <cstdint>
#include <memory>
#include <string>

#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/ir/graph.h"

namespace rlflow::cost {

struct MeasureOptions {
  int warmup = 1;    // untimed whole-graph runs
  int repeats = 5;   // timed runs; the median is reported
  uint64_t seed = 0; // graph inputs are seeded random tensors
  int threads = 1;   // torch threads (CPU)
};

struct GraphMeasurement {
  double ms = 0;       // median of the timed runs
  int runs = 0;
  std::string method;  // what ran, in words
  int skipped_opaque = 0;  // opaque nodes the GPU sequence could not run (their fixed cost is not in ms)
};

// Runs the graph with the reference executor (the kernels the cpu backend times).
Expected<GraphMeasurement> measure_graph_cpu(const ir::Graph& g, const MeasureOptions& opts = {});
// A graph made ready on the GPU once, as a deployed runtime runs it: buffers, workspaces and
// algorithms settled (fused conv+bias+ReLU calls timed per algorithm), `warmup` runs done, and the
// sequence of the cudnn backend's kernels captured as one CUDA graph. run_ms replays it.
class GpuGraphSession {
 public:
  virtual ~GpuGraphSession() = default;
  // Milliseconds of one run: `inner` back-to-back replays between two CUDA events, divided.
  virtual Expected<double> run_ms(int inner) = 0;
  virtual std::string method() const = 0;  // CUDA graph replay, or why capture failed
  virtual int skipped_opaque() const = 0;  // opaque nodes it cannot run (their outputs are given data)
};
Expected<std::unique_ptr<GpuGraphSession>> prepare_graph_gpu(const ir::Graph& g, const MeasureOptions& opts = {},
                                                             const GpuOptions& gpu = {});

// Runs every non-folded node with the cudnn backend's kernels on one stream, replayed from a
// captured CUDA graph (see GpuGraphSession): the median of opts.repeats replays.
Expected<GraphMeasurement> measure_graph_gpu(const ir::Graph& g, const MeasureOptions& opts = {}, const GpuOptions& gpu = {});

}  // namespace rlflow::cost
