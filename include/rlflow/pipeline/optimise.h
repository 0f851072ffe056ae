#pragma once
// `rlflow optimise` as a library: import -> fuse composites -> search -> candidates -> for each
// candidate (best first): write, re-import, verify, price as written, measure -> the first that
// passes every check is the output, else the input graph is written as it is.
//
// The stages never print; the result is an OptimiseReport that prints itself as text or JSON.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/bench/bench.h"
#include "rlflow/cost/factory.h"
#include "rlflow/cost/recorded.h"
#include "rlflow/exec/compare.h"
#include "rlflow/ir/composites.h"
#include "rlflow/pipeline/target.h"
#include "rlflow/ir/summary.h"
#include "rlflow/rl/agent.h"
#include "rlflow/search/optimizer.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

// The search's wall-time limit when none is given: an interactive run answers in seconds.
// --deterministic drops it (the budget alone then bounds the search, so every run gives the same graph).
inline constexpr double kInteractiveTimeLimitS = 10;

// Every default of `optimise` lives here, in this struct or the library structs it holds; the CLI
// binds its flags to these fields.
struct OptimiseOptions {
  std::string model, output;
  std::string report_html;  // --report: the HTML page of the report (pipeline/report_html.h), written with the output
  std::vector<std::string> input_shapes;
  // --fix NAME=SIZE: symbols the user deploys at one size; the written file has them static.
  std::vector<std::string> fixed_dims;
  uint64_t seed = 0;        // verification inputs, measurement order, rl sampling
  int64_t opset = kOpsetAuto;  // default-domain opset of the output: kOpsetAuto, kOpsetKeep or N (choose_output_opset)
  // The run's memory, MiB (0: default_memory_limit_mb()). A model whose run is estimated above it is
  // refused; the search keeps at most a quarter of it (and at most 256 MiB) in stored graphs, beyond
  // which they are released and replayed when needed.
  int64_t memory_mb = 0;

  // search
  std::string search = "taso";  // a search strategy (search_names(): taso, greedy, exhaustive, rl), or none
  std::string rules_file;       // empty: the shipped library's default set
  bool all_rules = false;       // every verified rule, not just the proved default set
  bool composites = true;       // fuse decomposed GELU / LayerNorm chains before searching
  ir::FusionSet disabled_fusions;  // fusions (ir::fusion_names) left out: --disable-fusion
  search::SearchOptions strategy;
  int64_t budget = search::Limits{}.budget;
  double time_limit_s = -1;     // < 0: kInteractiveTimeLimitS, or none under --deterministic; 0: none
  rl::RlSearchOptions rl;       // --search rl (its seed is `seed`)

  // cost and target
  std::string target = "ort";   // where the model will run: ort (onnxruntime CPU), h100, gpu
  // cost.kind "auto" means the target's cost model (target_cost_model). cost.deterministic has
  // cost::resolve_kind's one meaning, and also drops the interactive time limit and measurement.
  cost::CostOptions cost;

  // correctness
  bool verify = true;
  exec::CompareOptions compare;  // atol, rtol (its seed is `seed`)

  // never slower: measure the result against the input on the target before writing it
  std::string measure = "auto";  // auto: when measurable here and not deterministic; on; off
  // A sequential test: 20 rounds, then 10 more at a time while the interval straddles the bound, up
  // to 200 rounds or 60 s per candidate and binding.
  bench::BenchOptions bench{.warmup = 2, .rounds = 20, .max_seconds = 60, .max_rounds = 200, .step = 10};  // its seed is `seed`
  // The bindings the measurement gates: "prefill" (the representative sizes), "decode" (a decode
  // step for a KV-cache model, else sequence 1 for a model with a symbolic sequence; the
  // representative sizes when it has neither), "both".
  std::string deploy = "both";
  int bench_threads = 1;         // ort: onnxruntime intra-op threads (0: every core)
  std::string bench_clock = "auto";  // ort: bench::RunnerOptions::clock
  int candidates = 3;            // graphs tried, best first, before the input is kept
};

// --search's values: every search strategy in the registry (search/registry.h; `rl`, whose code is
// the RL module's (pipeline/rl_module.h), is registered by these calls and by optimise), then none (no search: the input is
// verified and written back). search_help() is the same list with what each one does.
std::vector<std::string> search_names();
std::string search_help();

// What became of one candidate graph. The first kWritten one is the output.
enum class Verdict {
  kWritten,             // verified, priced faster as written, and not measured slower: it is the output
  kVerificationFailed,  // its outputs differ from the input's beyond tolerance
  kUnverifiable,        // the reference executor cannot run it, and it is not structurally the input
  kSizeSpecific,        // a dynamic model's rewrite that fails at the second sizes: it baked in a size
  kNoWrittenGain,       // the file as written and re-imported is predicted no faster than the input
  kMeasuredSlower,      // measured on the target, the speedup's lower bound is below bench::kMinSpeedupLowerBound
  kNotFastest,          // passed every check, but another candidate that passed measured faster
};
std::string_view verdict_name(Verdict v);

struct Measurement {
  std::string runner;
  double before_ms = 0, after_ms = 0, speedup = 1, ci_lo = 1, ci_hi = 1, ci_coverage = 0;
  int rounds = 0;
  bool accepted = false;
  bool decided = true;  // false: the rounds or time ran out with the interval straddling the bound
  std::vector<double> before_samples_ms, after_samples_ms;  // each round's latency, in round order
};

struct CandidateReport {
  std::string label;
  size_t steps = 0;                  // rewrites applied from the input
  double predicted_ms = 0;           // the search's figure
  std::optional<double> written_ms;  // the written file's, re-imported
  std::optional<Measurement> measured;
  // The short binding: a KV-cache decoder is measured again at a decode step (sequence 1, a past
  // length), a model with a symbolic sequence at its smallest sizes (sequence 1): the file must be
  // no slower there either (OptimiseOptions::deploy). `measured` is empty under --deploy decode.
  std::optional<Measurement> measured_decode;
  std::string decode_binding;
  // Measured against the candidate that had passed before it (every candidate that passes is
  // measured; the fastest is written): its label, the binding, and this one's speedup over it.
  std::optional<Measurement> measured_vs_chosen;
  std::string vs_chosen, vs_chosen_binding;
  Verdict verdict = Verdict::kWritten;
  std::string why;                   // the verdict in words, when it is not kWritten
};

struct VerificationReport {
  bool enabled = true;
  std::string method;  // "reference executor" | "structural"; empty when disabled
  bool ok = false;
  std::string note;    // structural: why the executor could not run it
  double max_abs_diff = 0, atol = 0, rtol = 0;
  bool widened = false;  // tolerances widened for half-precision outputs
  uint64_t seed = 0;
  // The ort target, when measured: the sizes (the representative and the bindings) at which the
  // file was also checked against the input as onnxruntime runs both; -1: not checked there.
  int onnxruntime_checked = -1;
  // A dynamic model is checked again at other bindings of its symbols (ir::verification_bindings).
  struct Binding {
    std::string label;
    std::map<std::string, int64_t> sizes;
    bool checked = false;  // false: the input itself does not import there, `note` says why
    double max_abs_diff = 0;
    std::string note;
  };
  std::vector<Binding> bindings;
};

// Predicted costs: before is the input as imported, after is the written file re-imported.
struct CostReport {
  std::string model;            // the resolved cost model
  double before_ms = 0, after_ms = 0;
  double search_after_ms = 0;   // the search's own figure for the chosen graph
  std::string known_error;
  std::string profile;          // analytic: the device profile
  std::optional<cost::RecordedStats> table;  // recorded: table hits and misses
  // Predicted ms by ONNX op type of the input as imported and of the file written (same cost model).
  std::map<std::string, double> by_op_before, by_op_after;
  double speedup() const { return after_ms > 0 ? before_ms / after_ms : 1.0; }
};

// One change the written graph has from the input: a fused chain or a rewrite, the nodes it replaced
// and what its cost model predicts. A fusion's costs are its chain's and its fused node's; a
// rewrite's are the whole graph's before and after it.
struct ChangeRecord {
  struct NodeRef {
    std::string name, op;
  };
  std::string what;                 // the fusion (ir::fusion_names) or the rule
  std::vector<NodeRef> replaced;
  std::string node, op;             // a fusion: the fused node and its ONNX op
  std::optional<double> cost_before_ms, cost_after_ms;  // predicted
};

struct Timings {
  double import = 0, search = 0, write = 0, verify = 0, measure = 0, total = 0;
};

struct OptimiseReport {
  std::string model, output, search, target;
  ir::GraphSummary before, after;
  std::map<std::string, int64_t> dynamic_dims;  // optimised at these sizes; the output keeps the dims
  std::map<std::string, int64_t> fixed_dims;    // --fix: static in the output
  std::map<std::string, int64_t> min_dims;      // symbols the model needs longer than the default size
  int64_t input_opset = 0, output_opset = 0;
  std::string opset_reason;  // why the output is at output_opset
  int64_t input_ir_version = 0, output_ir_version = 0;  // set where they differ (a newer IR read as the newest known)
  int64_t searched_opset = 0;  // the opset the search and the candidates were at
  ir::CompositeStats composites;  // fused in the written graph
  // What each registered fusion met on the input graph before the search, whichever graph was
  // written: the chains it fused, and each chain it refused, by the recogniser's reason (the roots'
  // node names, in the order tried). Empty with --search none or --no-composites.
  struct FusionAttempts {
    int fused = 0;
    std::map<std::string, std::vector<std::string>> refused;  // why -> root nodes
    int seen() const {
      int n = fused;
      for (const auto& [why, roots] : refused) n += static_cast<int>(roots.size());
      return n;
    }
  };
  std::map<std::string, FusionAttempts> fusion_attempts;
  std::vector<ChangeRecord> fusions;   // each chain fused in the written graph
  std::vector<ChangeRecord> rewrites;  // each of `steps`, in order
  const TargetRecord* target_info = nullptr;
  VerificationReport verification;
  // The search ran (not --search none).
  std::optional<search::Result> search_result;
  size_t search_rules = 0;
  std::string agent_note;  // --search rl: the agent was trained under another target, or does not record it
  std::optional<CostReport> cost;
  std::vector<rules::Match> steps;  // the written graph's rewrites, replayable on the input
  // Candidates tried in order; `chosen` indexes the written one.
  std::vector<CandidateReport> candidates;
  std::optional<size_t> chosen;
  bool rewritten = false;      // a rewritten graph was proposed (predicted faster than the input)
  bool measured = false;       // candidates were measured on the target
  std::string measure_runner;  // what measured them
  std::string deploy;          // OptimiseOptions::deploy: the bindings the measurement gated
  std::string not_measured;    // why the result is only predicted
  std::string kept_input;      // why the input graph was written
  Timings time;

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

struct OptimiseHooks {
  search::Progress progress;  // the search's progress (a terminal's status line)
  // The stage the run is in after the search, in words ("checking candidate 1 of 3: best found").
  std::function<void(const std::string&)> stage;
  // The runtime candidates are measured on; empty: bench::make_runner for the target. When set
  // (tests: a scripted runner), the target need not be measurable on this machine.
  std::function<Expected<std::unique_ptr<bench::Runner>>(const bench::RunnerOptions&)> make_runner;
};

// Runs the pipeline. Errors carry their exit class (usage, bad input, verification failed, internal);
// on any error no output file exists (one already written for a candidate is removed).
Expected<OptimiseReport> optimise(const OptimiseOptions& o, const OptimiseHooks& hooks = {});

}  // namespace rlflow::pipeline
