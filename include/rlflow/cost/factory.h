#pragma once
// One place that turns user options (--cost-model, --deterministic, --device-profile, the cache
// path) into a CostModel.
#include <memory>
#include <string>
#include <vector>

#include "rlflow/cost/cost_model.h"
#include "rlflow/cost/cpu_backend.h"
#include "rlflow/cost/cudnn_backend.h"

namespace rlflow::cost {

struct CostOptions {
  // auto: cudnn when a GPU is usable, else cpu; both behind the persistent cache.
  // recorded: replayed H100 timings (cost_table) with the calibrated profile for misses;
  // ort: the analytic model with the onnxruntime CPU profile, which prices onnxruntime's own fusions at zero.
  std::string kind = "auto";  // auto | cudnn | cpu | analytic | recorded | ort
  bool deterministic = false;  // forces analytic unless `kind` is already deterministic (recorded, ort)
  // analytic only: a profile name (configs/devices/<name>.yaml) or a path; empty picks h100 when
  // a GPU is usable and cpu-2core otherwise.
  std::string device_profile;
  std::string cost_table;  // recorded: the table (empty: configs/devices/h100-cost-table.json)
  std::string cache_path;  // empty: default_cache_path() (~/.cache/rlflow/cost-cache.json or $RLFLOW_COST_CACHE)
  bool use_cache = true;   // measuring backends only; analytic is never cached (it is cheaper than a lookup)
  CpuOptions cpu;
  GpuOptions gpu;
};

// The kinds --cost-model accepts, for the CLI's checks and help.
inline const std::vector<std::string>& cost_model_kinds() {
  static const std::vector<std::string> k{"auto", "cudnn", "cpu", "analytic", "recorded", "ort"};
  return k;
}
// The profile the ort kind uses (configs/devices/ort-cpu.yaml).
inline constexpr const char* kOrtProfile = "ort-cpu";

// What `kind`/`deterministic` resolve to here: "cudnn", "cpu", "analytic", "recorded" or "ort";
// an error names a bad kind.
Expected<std::string> resolve_kind(const CostOptions& o);
// The analytic profile used when none is named.
std::string default_profile_name();

Expected<std::unique_ptr<CostModel>> make_cost_model(const CostOptions& o);

}  // namespace rlflow::cost
