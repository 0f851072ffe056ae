#pragma once
// One place that turns user options (--cost-model, --deterministic, --device-profile, the cache
// path) into a CostModel, for every command.
#include <functional>
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
  // Registered backends (register_backend) are named here too, e.g. ort-measured.
  std::string kind = "auto";  // auto | cudnn | cpu | analytic | recorded | ort | a registered name
  bool deterministic = false;  // forces analytic unless `kind` is already deterministic (recorded, ort)
  // analytic only: a profile name (configs/devices/<name>.yaml) or a path; empty picks h100 when
  // a GPU is usable and cpu-2core otherwise.
  std::string device_profile;
  std::string cost_table;  // recorded: the table (empty: configs/devices/h100-cost-table.json)
  std::string cache_path;  // empty: default_cache_path() (~/.cache/rlflow/cost-cache.json or $RLFLOW_COST_CACHE)
  bool use_cache = true;   // measuring backends only; analytic is never cached (it is cheaper than a lookup)
  // Per-op timing runs of whichever backend measures, when set; -1 keeps that backend's own default.
  int warmup = -1, repeats = -1;
  CpuOptions cpu;
  GpuOptions gpu;
};

// A cost backend that lives in a module above cost (bench's onnxruntime-measured one): cost cannot
// include it, so it hands its maker to the factory once at start-up and is then named like a
// built-in kind. Registration is an explicit call, not a static initialiser: the linker drops an
// object file of a static library that nothing references, and its initialiser with it.
struct Backend {
  std::string name;         // the --cost-model spelling
  std::string description;  // one phrase, for --help and the unknown-kind error
  bool measures = true;     // times ops on this machine: replaced by analytic under --deterministic, usable by calibrate
  std::function<Expected<std::unique_ptr<CostModel>>(const CostOptions&)> make;
};
// Adds a backend, or replaces the one of the same name; a built-in name is refused.
Status register_backend(Backend b);
// The registered backend of that name, or nullptr.
const Backend* find_backend(const std::string& name);

// The kinds --cost-model accepts, for the CLI's checks and help: the built-in ones, then the
// registered ones in the order they registered.
std::vector<std::string> cost_model_kinds();
// Every kind with what it means, for --help: "auto (...), cudnn (...), ... or ort-measured (...)";
// `auto_means` replaces auto's meaning where a command resolves auto its own way.
std::string cost_model_help(const std::string& auto_means = "");
// The profile the ort kind uses (configs/devices/ort-cpu.yaml).
inline constexpr const char* kOrtProfile = "ort-cpu";

// What `kind`/`deterministic` resolve to here: "cudnn", "cpu", "analytic", "recorded", "ort" or a
// registered name; an error names a bad kind and lists the known ones.
Expected<std::string> resolve_kind(const CostOptions& o);
// The analytic profile used when none is named.
std::string default_profile_name();

Expected<std::unique_ptr<CostModel>> make_cost_model(const CostOptions& o);

}  // namespace rlflow::cost
