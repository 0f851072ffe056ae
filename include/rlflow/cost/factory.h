#pragma once
// One place that turns user options (--cost-model, --deterministic, --device-profile, the cache
// path) into a CostModel.
#include <memory>
#include <string>

#include "rlflow/cost/cost_model.h"
#include "rlflow/cost/cpu_backend.h"
#include "rlflow/cost/cudnn_backend.h"

namespace rlflow::cost {

struct CostOptions {
  // auto: cudnn when a GPU is usable, else cpu; both behind the persistent cache.
  std::string kind = "auto";  // auto | cudnn | cpu | analytic
  bool deterministic = false;  // forces analytic, whatever `kind` says
  // analytic only: a profile name (configs/devices/<name>.yaml) or a path; empty picks h100 when
  // a GPU is usable and cpu-2core otherwise.
  std::string device_profile;
  std::string cache_path;  // empty: default_cache_path() (~/.cache/rlflow/cost-cache.json or $RLFLOW_COST_CACHE)
  bool use_cache = true;   // measuring backends only; analytic is never cached (it is cheaper than a lookup)
  CpuOptions cpu;
  GpuOptions gpu;
};

// What `kind`/`deterministic` resolve to here: "cudnn", "cpu" or "analytic"; an error names a bad kind.
Expected<std::string> resolve_kind(const CostOptions& o);
// The analytic profile used when none is named.
std::string default_profile_name();

Expected<std::unique_ptr<CostModel>> make_cost_model(const CostOptions& o);

}  // namespace rlflow::cost
