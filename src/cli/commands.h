#pragma once
// Internal to the CLI: one function per subcommand, each returning an exit code.
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/ir/graph.h"
#include "rlflow/ir/summary.h"
#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/rule.h"
#include "rlflow/util/expected.h"

namespace rlflow::cli {

struct GlobalOptions {
  bool json = false;
};

struct InfoOptions {
  std::string model;
  std::vector<std::string> input_shapes;
};

// The search's wall-time limit when --time-limit is not given: an interactive run answers in seconds.
// --deterministic drops it (the budget alone then bounds the search, so every run gives the same graph).
inline constexpr double kInteractiveTimeLimitS = 10;

struct OptimiseOptions {
  std::string model, output;
  std::string search = "taso";
  std::vector<std::string> input_shapes;
  bool verify = true;
  uint64_t seed = 0;
  double atol = 1e-4, rtol = 1e-3;
  // search
  double alpha = 1.05;
  int64_t budget = 1000;
  double time_limit_s = -1;  // < 0: kInteractiveTimeLimitS, or none under --deterministic; 0: none
  // The run's memory, MiB (0: default_memory_limit_mb()). A model whose run is estimated above it is
  // refused; the search keeps at most a quarter of it (and at most 256 MiB) in stored graphs, beyond
  // which they are released and replayed when needed.
  int64_t memory_mb = 0;
  std::string rules_file;   // empty: the shipped library's default set
  bool all_rules = false;   // every shipped rule, not just the default set
  bool composites = true;   // fuse decomposed GELU / LayerNorm chains before searching
  int64_t opset = 0;        // default-domain opset of the output (0: the input's)
  // cost and target
  std::string target = "ort";       // where the model will run: ort (onnxruntime CPU), h100, gpu
  std::string cost_model = "auto";  // auto: the target's (ort -> ort, h100 -> recorded, gpu -> cudnn)
  bool deterministic = false;
  std::string device_profile;
  std::string cost_table;           // recorded: the cost table
  // never slower: measure the result against the input on the target before writing it
  std::string measure = "auto";     // auto: when measurable here and not --deterministic; on; off
  int bench_rounds = 20;
  int bench_threads = 1;
  double bench_max_seconds = 60;
  int candidates = 3;               // graphs tried, best first, before the input is kept
  // rl
  std::string agent;
  int rollouts = 4;
  int beam = 0;  // rl: policy-guided beam search width after the rollouts (0: off)
  int beam_branch = 8;
  bool polish = false;  // rl: greedy descent from the agent's best graph
  bool never_below_greedy = false;  // rl: greedy from the input too; the cheaper graph is returned
};

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
  int rounds = 30, warmup = 3;
  double confidence = 0.95;
  double max_seconds = 0;
  uint64_t seed = 0;
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

// The cost model a deployment target is judged by: ort -> ort (the analytic onnxruntime CPU profile),
// h100 -> recorded (replayed H100 timings), gpu -> cudnn (this machine's GPU). One mapping for
// optimise and the trainers, so an agent trains on the cost it is judged on.
std::string target_cost_model(const std::string& target);

// The memory a command may plan to use when --memory-limit is not given, MiB: 3/4 of what this
// process can have (physical RAM, or its cgroup's limit when that is lower).
int64_t default_memory_limit_mb();
// Refuses (exit 3, naming the largest tensor) a graph whose run would need more than `limit_mb`
// (0: the default) by ir::estimate_run_memory, before anything is allocated.
Status check_memory(const ir::Graph& g, int64_t limit_mb);

// Imports an ONNX model with --input-shape specs, folding with `ex`, and checks that running it fits
// in `memory_limit_mb` (0: the default; kNoMemoryCheck for commands that never run the graph).
inline constexpr int64_t kNoMemoryCheck = -1;
Expected<ir::Graph> load_model(const std::string& path, const std::vector<std::string>& shapes, const exec::Executor& ex,
                               onnxio::ImportStats* stats = nullptr, int64_t memory_limit_mb = 0);
// The rules a search may use: the default set's proved rules, or (all_rules) every rule that is
// proved or numerically verified. Refuted and unverified rules never.
std::vector<const rules::Rule*> select_rules(const rules::RuleLibrary& lib, bool all_rules);

// "name:1,3,224,224" -> {name, shape}; several allowed.
Expected<std::map<std::string, ir::Shape>> parse_input_shapes(const std::vector<std::string>& specs);

// Shared by the subcommands' reports.
double seconds_since(std::chrono::steady_clock::time_point t0);
nlohmann::json summary_json(const ir::GraphSummary& s);
void print_op_table(const ir::GraphSummary& before, const ir::GraphSummary* after);

// Turns an error into its exit code, one stderr line, and (with --json) a JSON document.
int report_error(const GlobalOptions& g, const Error& e);
int exit_code_for(ErrorCode c);

}  // namespace rlflow::cli
