#pragma once
// Whole-graph measurement, to check how well the sum of per-op costs predicts a real run.
#include <cstdint>
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
// Runs every non-folded node with the cudnn backend's kernels in sequence on one stream.
Expected<GraphMeasurement> measure_graph_gpu(const ir::Graph& g, const MeasureOptions& opts = {}, const GpuOptions& gpu = {});

}  // namespace rlflow::cost
