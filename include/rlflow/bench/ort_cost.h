#pragma once
// A measuring cost model on onnxruntime: each op is exported as a one-node ONNX model and timed
// in onnxruntime (CPU, ORT_ENABLE_ALL) through the bench runner. `rlflow cost calibrate
// --cost-model ort` fits the onnxruntime CPU profile (configs/devices/ort-cpu.yaml) with it.
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

// The one-op graph that op costs are measured on: non-constant operands are graph inputs, constant
// operands seeded weights (index operands zeros).
Expected<ir::Graph> single_op_graph(const cost::OpSignature& sig);

}  // namespace rlflow::bench
