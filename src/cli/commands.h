#pragma once
// Internal to the CLI: one function per subcommand, each returning an exit code.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/ir/graph.h"
#include "rlflow/ir/summary.h"
#include "rlflow/bench/bench.h"
#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/pipeline/target.h"
#include "rlflow/pipeline/summary.h"
#include "rlflow/rules/rule.h"
#include "rlflow/util/expected.h"
#include "progress.h"

namespace rlflow::cli {

struct GlobalOptions {
  bool json = false;
};

// `optimise`'s progress line (the CLI's, and the Python package's on a terminal): the search's graphs,
// best cost and time left, then the stage. Its hooks feed the line and must not outlive it.
class OptimiseProgress {
 public:
  OptimiseProgress(const pipeline::OptimiseOptions& o, bool enabled);
  ~OptimiseProgress();
  pipeline::OptimiseHooks hooks();  // empty when the line is not drawn
  void finish() { line_.finish(); }

 private:
  struct View;
  std::unique_ptr<View> view_;  // before line_: the line draws from it until it is gone
  ProgressLine line_;
};

struct InfoOptions {
  std::string model;
  std::vector<std::string> input_shapes;
};

// `rlflow optimise`: the pipeline's options, whose fields hold every default.
using pipeline::OptimiseOptions;

// What `rlflow train-agent` and `rlflow train-world-model` (src/cli/cmd_rl.cpp) both take: the
// models, the rules, the cost the agent will be judged by, and where the result goes.
struct TrainCommonOptions {
  std::vector<std::string> models;
  std::vector<std::string> input_shapes;
  std::string config;     // the command's own settings file; empty: its built-in defaults
  std::string out;
  std::string log;        // empty: OUT.jsonl
  int64_t episodes = 200;
  uint64_t seed = 0;
  bool resume = false;
  std::string rules_file;
  bool all_rules = false;
  std::string target = "ort";       // where the agent's graphs will run: the cost it trains on (as optimise --target)
  std::string cost_model = "auto";  // auto: the target's
  bool deterministic = false;
  std::string device_profile;
  int64_t opset = pipeline::kOpsetAuto;  // train on the graphs `optimise --opset` searches (composites of that opset fused)
};

// `rlflow train-agent`.
struct TrainAgentOptions {
  TrainCommonOptions common;  // config: PPO hyperparameters (configs/agent/*.yaml)
  int imitation_epochs = -1;  // >= 0 overrides training.imitation_epochs of the config
  int dagger_rounds = -1;     // >= 0 overrides training.dagger_rounds
  // data-parallel training (c10d)
  int world_size = 1;
  int rank = 0;
  std::string master = "127.0.0.1:29500";
  // model-based: train the controller in this world model's dream
  std::string world_model;
  double temperature = 1.0;
  double uncertainty_penalty = 0;
  int dream_batch = 64;
  int eval_every = 10;
};

// `rlflow train-world-model`.
struct TrainWorldModelOptions {
  TrainCommonOptions common;  // config: world-model settings (configs/world_model.yaml)
  std::string encoder_agent;  // model-free agent whose frozen encoder and xfers are used
  std::string policy;         // dream controller that collects the new episodes
  std::string data;           // rollout file; empty: OUT.data
};

// `rlflow bench` (src/cli/cmd_bench.cpp).
struct BenchCmdOptions {
  std::vector<std::string> files;
  std::string target = "ort";  // ort | cpu | cudnn
  std::string threads;         // comma list of counts or "all"; empty: ort "1,all", others "1"
  bench::BenchOptions bench;  // rounds, warmup, confidence, max_seconds, seed: the library's defaults
  std::vector<std::string> input_shapes;
};

struct RunOptions {
  std::string model, data_dir;
  double atol = 1e-5, rtol = 1e-3;
};

struct RulesOptions {
  std::string file;  // empty: the shipped library
  bool summary = false;
  std::vector<std::string> only;  // rule names
  bool write = false;             // verify: record statuses in the file
  bool prove = false;             // verify: also prove each numerically passing rule with Z3
  double prove_timeout = 10.0;    // verify --prove: seconds per rule
  std::string dump_smt2;          // verify --prove: write each rule's SMT-LIB query into this directory
  int jobs = 1;                   // verify: rules checked in parallel
  int sample = 0;                 // verify: only this many rules, drawn with `seed` (0: all)
  std::vector<std::string> models;  // bench
  int applications = 1000;          // bench: random-chain applications per model
  int repeats = 5;                  // bench: timing repetitions
  int chain = 50;                   // bench: applications per chain before its result is run
  uint64_t seed = 0;
  // generate
  int depth = 3;
  std::string out;                  // write only the generated rules here
  std::string merge_into;           // replace the generated rules of this file, keep the others
  std::vector<std::string> worlds;  // conv, matmul (default: both)
  std::vector<std::string> zoo;     // models whose matches choose the default set
  size_t max_group = 48;
  int derivation_steps = 3;
};

// `rlflow cost MODEL` and `rlflow cost calibrate` (src/cli/cmd_cost.cpp).
struct CostCmdOptions {
  std::string model;
  std::string cost_model = "auto";  // a cost::cost_model_kinds() name; calibrate: a measuring one
  bool deterministic = false;
  std::string device_profile;
  std::vector<std::string> input_shapes;
  std::string cost_table;  // recorded: the table
  bool measure_graph = false;
  bool all = false;      // list folded nodes too
  std::string cache;     // cache file; empty: the default
  bool no_cache = false;
  int warmup = -1, repeats = -1;  // per-op timing; -1: the backend's defaults
  std::string profile_out;   // calibrate: where to write the fitted profile
  std::string base_profile;  // calibrate: the profile whose peaks are kept
  int batch = 0;             // calibrate: batch of the CNN ops; 0: 1 on CPU, 8 on GPU
};

int cmd_info(const GlobalOptions& g, const InfoOptions& o);
int cmd_targets(const GlobalOptions& g);
int cmd_cost(const GlobalOptions& g, const CostCmdOptions& o);
int cmd_cost_calibrate(const GlobalOptions& g, const CostCmdOptions& o);
int cmd_rules_list(const GlobalOptions& g, const RulesOptions& o);
int cmd_rules_verify(const GlobalOptions& g, const RulesOptions& o);
int cmd_rules_bench(const GlobalOptions& g, const RulesOptions& o);
int cmd_rules_generate(const GlobalOptions& g, const RulesOptions& o);
int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o);
int cmd_run(const GlobalOptions& g, const RunOptions& o);
int cmd_bench(const GlobalOptions& g, const BenchCmdOptions& o);
// The most threads a flag accepts: 4x this machine's cores. More only measure contention, and
// 100,000 of them never finish starting.
int max_threads();
// "1,all" -> {1, 0} (0: every core); a count above max_threads() is a usage error.
Expected<std::vector<int>> parse_thread_list(const std::string& text);
int cmd_train_agent(const GlobalOptions& g, const TrainAgentOptions& o);
int cmd_train_world_model(const GlobalOptions& g, const TrainWorldModelOptions& o);
std::string version_string();

// Model loading, memory checks, rule selection and the target's cost live in the pipeline library.
using pipeline::check_memory;
using pipeline::default_memory_limit_mb;
using pipeline::kNoMemoryCheck;
using pipeline::load_model;
using pipeline::parse_input_shapes;
using pipeline::select_rules;
using pipeline::target_cost_model;

// Shared by the subcommands' reports.
double seconds_since(std::chrono::steady_clock::time_point t0);
using pipeline::print_op_table;
using pipeline::summary_json;

// A JSON document as text for stdout. Names come from the user's model and may hold any bytes:
// bytes that are not UTF-8 are written as U+FFFD instead of failing the dump.
inline std::string json_text(const nlohmann::json& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

// Turns an error into its exit code, one stderr line, and (with --json) a JSON document.
int report_error(const GlobalOptions& g, const Error& e);
int exit_code_for(ErrorCode c);

}  // namespace rlflow::cli
