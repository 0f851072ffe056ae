#pragma once
// Internal to the CLI: one function per subcommand, each returning an exit code.
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/ir/graph.h"
#include "rlflow/util/clock.h"
#include "rlflow/ir/summary.h"
#include "rlflow/bench/bench.h"
#include "rlflow/cli/app.h"
#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/pipeline/cost.h"
#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/pipeline/target.h"
#include "rlflow/pipeline/summary.h"
#include "rlflow/pipeline/train.h"
#include "rlflow/rules/rule.h"
#include "rlflow/util/expected.h"
#include "progress.h"

namespace CLI {
class App;
}

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

// `rlflow run` (src/cli/cmd_bench.cpp; bench's options are pipeline::BenchFilesOptions).
struct RunOptions {
  std::string model, data_dir;
  double atol = 1e-5, rtol = 1e-3;
};

// A subcommand as declared: `app` is parsed when the command line names it, and `run` then runs it
// on the flags as parsed, returning its exit code. The first parsed one in a list runs, so a nested
// subcommand (cost calibrate) comes before its parent.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using Subcommands = std::vector<Subcommand>;

// Commands that declare their own flags, bound straight to their library options (the options live
// as long as the returned entries): each adds its subcommands to `app` and its entries to `out`.
// --json sets g.json, which the entries read when they run.
void declare_info(CLI::App& app, GlobalOptions& g, Subcommands& out);               // commands.cpp (info, targets)
// Also returns the options the command line fills (parse_optimise_args reads them).
std::shared_ptr<OptimiseOptions> declare_optimise(CLI::App& app, GlobalOptions& g, Subcommands& out);  // cmd_optimise.cpp
void declare_run_bench(CLI::App& app, GlobalOptions& g, Subcommands& out);          // cmd_bench.cpp (run, bench)
void declare_compare(CLI::App& app, GlobalOptions& g, Subcommands& out);            // cmd_compare.cpp
void declare_rules(CLI::App& app, GlobalOptions& g, Subcommands& out);              // cmd_rules.cpp
void declare_cost(CLI::App& app, GlobalOptions& g, Subcommands& out);               // cmd_cost.cpp
void declare_train_agent(CLI::App& app, GlobalOptions& g, Subcommands& out);        // cmd_rl.cpp
void declare_train_world_model(CLI::App& app, GlobalOptions& g, Subcommands& out);  // cmd_rl.cpp

int cmd_info(const GlobalOptions& g, const InfoOptions& o);
int cmd_targets(const GlobalOptions& g);
int cmd_cost(const GlobalOptions& g, const pipeline::ModelCostOptions& o);
int cmd_cost_calibrate(const GlobalOptions& g, const pipeline::CalibrateOptions& o);
int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o);
int cmd_run(const GlobalOptions& g, const RunOptions& o);
int cmd_train_agent(const GlobalOptions& g, const pipeline::TrainAgentOptions& o);
int cmd_train_world_model(const GlobalOptions& g, const pipeline::TrainWorldModelOptions& o);
std::string version_string();

// Model loading, memory checks, rule selection and the target's cost live in the pipeline library.
using pipeline::check_memory;
using pipeline::default_memory_limit_mb;
using pipeline::kNoMemoryCheck;
using pipeline::load_model;
using pipeline::parse_input_shapes;
using pipeline::select_rules;
using pipeline::target_cost_model;

// Shared by the subcommands' reports (seconds_since: rlflow/util/clock.h).
using pipeline::print_op_table;
using pipeline::summary_json;

// A JSON document as text for stdout. Names come from the user's model and may hold any bytes:
// bytes that are not UTF-8 are written as U+FFFD instead of failing the dump.
inline std::string json_text(const nlohmann::json& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

// Turns an error into its exit code, one stderr line, and (with --json) a JSON document.
int report_error(const GlobalOptions& g, const Error& e);
int exit_code_for(ErrorCode c);

// A pipeline's report on stdout, as JSON (--json) or its text; an error as report_error does.
// `failed`: the report's outcome is a verification failure (exit 4).
// Text for a terminal: what `print` writes, with every control character but newline and tab
// written as \xNN. Names in a model are arbitrary bytes; an escape sequence in one must not clear
// the screen, set the title or forge a line of the report.
void print_safe(std::FILE* out, const std::function<void(std::FILE*)>& print);

template <class Report>
int print_report(const GlobalOptions& g, const Expected<Report>& r, bool failed = false) {
  if (!r) return report_error(g, r.error());
  if (g.json) std::cout << json_text(r->to_json()) << std::endl;
  else print_safe(stdout, [&](std::FILE* f) { r->print(f); });
  return failed ? kVerificationFailed : kOk;
}

}  // namespace rlflow::cli
