#pragma once
// A measuring cost model on onnxruntime: each op is exported as a one-node ONNX model and timed
// in onnxruntime (CPU, ORT_ENABLE_ALL) through the bench runner. It is the cost factory's
// `ort-measured` kind; `rlflow cost calibrate --cost-model ort-measured` fits the onnxruntime CPU
// profile (configs/devices/ort-cpu.yaml, the analytic `ort` kind) with it.
#include <memory>

#include "rlflow/bench/runner.h"
#include "rlflow/cost/cost_model.h"

namespace rlflow::bench {

struct OrtCostOptions {
  int threads = 1;
  int warmup = 3;
  int repeats = 15;
};

Expected<std::unique_ptr<cost::CostModel>> make_ort_cost_model(const OrtCostOptions& o = {});

// The --cost-model name of this backend.
inline constexpr const char* kOrtMeasuredKind = "ort-measured";
// Hands bench's cost backends (ort-measured) to cost::make_cost_model. Called once at CLI start-up
// (cost cannot reach bench by itself); calling it again changes nothing.
void register_cost_backends();

// The one-op graph that op costs are measured on: non-constant operands are graph inputs, constant
// operands seeded weights (index operands zeros).
Expected<ir::Graph> single_op_graph(const cost::OpSignature& sig);

}  // namespace rlflow::bench
