#pragma once
// `rlflow cost` as a library: a model's per-op cost table and total under a cost model, optionally
// checked against a whole-graph run; and `rlflow cost calibrate`: an analytic device profile fitted
// to timed ops. Neither prints; each returns a typed report that prints itself as text or JSON.
//
// (The names say "model cost" because pipeline::CostReport is the optimise report's cost section.)
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/cost/cache.h"
#include "rlflow/cost/calibrate.h"
#include "rlflow/cost/cost_model.h"
#include "rlflow/cost/factory.h"
#include "rlflow/cost/measure.h"
#include "rlflow/cost/recorded.h"
#include "rlflow/ir/graph.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

// Every default of `cost MODEL`; the CLI binds its flags to these fields.
struct ModelCostOptions {
  std::string model;
  std::vector<std::string> input_shapes;
  // kind "auto": cudnn where a GPU is usable, else cpu (this command has no target).
  cost::CostOptions cost;
  // Also run the whole graph on the device the cost model stands for (onnxruntime for the ort
  // profile and ort-measured) and compare with the sum of the op costs.
  bool measure_graph = false;
  bool list_folded = false;  // the text lists folded nodes (constant inputs, cost 0) too: --all
};

struct ModelCostHooks {
  cost::CostProgress costing;  // ops priced so far, for a progress line; not called for the analytic model (instant)
};

// One node's row of the table.
struct OpCostRow {
  ir::NodeId node = 0;
  std::string name, op;
  std::vector<ir::Shape> inputs, outputs;
  std::vector<bool> input_constant;  // per input: a weight (constant)
  double ms = 0, share = 0;          // share: of the total
  bool folded = false, opaque = false, fused = false;  // as cost::NodeCost
};

struct ModelCostReport {
  std::string model;
  std::string cost_model;   // CostModel::name(): what runs (auto may have fallen back from cudnn to cpu)
  std::string fingerprint;  // CostModel::device_fingerprint()
  double total_ms = 0;
  size_t nodes = 0;         // priced nodes, folded ones included
  int folded = 0, opaque = 0;
  std::vector<OpCostRow> rows;  // in node order
  struct OpTotal {
    int count = 0;
    double ms = 0;
  };
  std::map<std::string, OpTotal> by_op;  // ONNX op type -> its unfolded nodes
  std::optional<cost::CacheStats> cache;         // a cached (measuring) model's cache
  std::optional<cost::RecordedStats> recorded;   // recorded: table hits and misses
  std::optional<cost::GraphMeasurement> measured;  // measure_graph
  bool list_folded = false;
  struct Timings {
    double import = 0, cost = 0, measure = 0;
  } time;

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

// Errors carry their exit class (usage, bad input, internal).
Expected<ModelCostReport> model_cost(const ModelCostOptions& o, const ModelCostHooks& hooks = {});

// Every default of `cost calibrate`.
struct CalibrateOptions {
  cost::CostOptions cost;    // a measuring kind (auto, cpu, cudnn, or a registered measuring one); never deterministic
  std::string profile_out;   // where to write the fitted profile (YAML); empty: not written
  std::string base_profile;  // the profile whose peaks are kept; empty: h100 for cudnn, else cpu-2core
  int batch = 0;             // batch of the CNN ops; 0: 8 for cudnn, else 1
};

struct CalibrateHooks {
  cost::CostProgress timing;  // calibration ops timed so far
};

struct CalibrateReport {
  std::string cost_model, fingerprint;
  std::string base;  // the base profile's name as given
  int batch = 0;
  cost::CalibrationResult result;  // the fitted profile, the samples and the fit errors
  std::string written;             // the profile file, when written
  std::optional<cost::CacheStats> cache;
  std::optional<cost::RecordedStats> recorded;
  double seconds = 0;              // timing and fitting

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

Expected<CalibrateReport> calibrate_profile(const CalibrateOptions& o, const CalibrateHooks& hooks = {});

}  // namespace rlflow::pipeline
