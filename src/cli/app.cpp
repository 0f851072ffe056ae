#include "rlflow/cli/app.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <exception>
#include <iostream>
#include <sstream>
#include <vector>

#include "commands.h"
#include "rlflow/bench/ort_cost.h"
#include "rlflow/cost/factory.h"
#include "rlflow/exec/compare.h"
#include "rlflow/ir/composites.h"
#include "rlflow/util/file_io.h"

namespace rlflow::cli {

namespace {

// --opset: auto, keep or N, parsed into the library's value (pipeline::parse_opset).
void add_opset_option(CLI::App* c, int64_t& into, const std::string& help) {
  c->add_option_function<std::string>(
       "--opset",
       [&into](const std::string& v) {
         auto parsed = pipeline::parse_opset(v);
         if (!parsed) throw CLI::ValidationError("--opset", parsed.error().message);
         into = *parsed;
       },
       help)
      ->default_str("auto");
}

// The registered fusions for help text: "layer_norm, gelu, ..." or, with ops, "layer_norm ->
// LayerNormalization (17), ...".
std::string fusion_list(bool with_ops) {
  std::string out;
  for (const auto& f : ir::fusions()) {
    out += (out.empty() ? "" : ", ") + f.name;
    if (with_ops) out += fmt::format(" -> {} ({})", f.onnx_op, f.since_opset);
  }
  return out;
}

// Every number a flag takes is checked as the flags are parsed, before any work: it must be finite
// (a NaN passes no comparison, so it would switch a check or a limit off) and in the flag's range.
CLI::Validator number_at_least(double lo, bool strictly = false) {
  const std::string desc = fmt::format("{} {}", strictly ? ">" : ">=", lo);
  return CLI::Validator(
      [lo, strictly, desc](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v) || !std::isfinite(v) || v < lo || (strictly && v == lo))
          return "must be a finite number " + desc + ", not '" + text + "'";
        return {};
      },
      "NUMBER " + desc);
}
const CLI::Validator kNonNegative = number_at_least(0);
const CLI::Validator kPositive = number_at_least(0, true);
const CLI::Validator kAtLeastOne = number_at_least(1);

// The one tolerance rule (exec::check_tolerance), applied to --atol and --rtol of every command.
const CLI::Validator kTolerance(
    [](std::string& text) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
      auto st = exec::check_tolerance(v, "the tolerance");
      return st.ok() ? std::string() : st.error().message;
    },
    "TOLERANCE >= 0");

void setup_logging(int verbosity, bool quiet) {
  // Once per process: the Python package runs commands again and again in one.
  auto logger = spdlog::get("rlflow");
  if (!logger) logger = spdlog::stderr_color_mt("rlflow");
  logger->set_pattern("%^[%l]%$ %v");
  spdlog::set_default_logger(logger);
  if (quiet) spdlog::set_level(spdlog::level::err);
  else if (verbosity >= 2) spdlog::set_level(spdlog::level::debug);
  else if (verbosity == 1) spdlog::set_level(spdlog::level::info);
  else spdlog::set_level(spdlog::level::warn);
}

// Every command's options and its subcommand, as the command line fills them.
struct Commands {
  GlobalOptions g;
  int verbosity = 0;
  bool quiet = false, version = false;
  InfoOptions info;
  OptimiseOptions opt;
  TrainAgentOptions train;
  TrainWorldModelOptions wmo;
  RunOptions run;
  BenchCmdOptions bench;
  RulesOptions rules;
  CostCmdOptions cost;
  CLI::App *c_info = nullptr, *c_targets = nullptr, *c_opt = nullptr, *c_train = nullptr, *c_wm = nullptr, *c_run = nullptr,
           *c_bench = nullptr, *c_rlist = nullptr, *c_rverify = nullptr, *c_rbench = nullptr, *c_rgen = nullptr, *c_cost = nullptr,
           *c_calib = nullptr;
};

// Global flags (-v, -vv, -q, --version) work after the subcommand too: an option a subcommand does
// not know falls through to the app (subcommands inherit this setting).
void declare_global(CLI::App& app, Commands& p) {
  app.require_subcommand(0, 1);
  app.fallthrough();

  app.add_flag("-v,--verbose", p.verbosity, "More log output on stderr (-vv for debug)");
  app.add_flag("-q,--quiet", p.quiet, "Only errors on stderr");
  app.add_flag("--version", p.version, "Print the version and the available devices");
}

void declare_info(CLI::App& app, Commands& p) {
  auto& g = p.g;
  auto& info = p.info;
  auto* c_info = app.add_subcommand("info", "Inputs, outputs, op histogram, parameters and FLOPs of a model");
  c_info->add_option("model", info.model, "ONNX model")->required();
  c_info->add_option("--input-shape", info.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_info->add_flag("--json", g.json, "Print one JSON document");

  auto* c_targets = app.add_subcommand("targets", "The targets --target takes: runtime, device, cost model, opsets, fused ops, runtime fusions, measurable here");
  c_targets->add_flag("--json", g.json, "Print one JSON document");
  p.c_info = c_info;
  p.c_targets = c_targets;
}

void declare_optimise(CLI::App& app, Commands& p) {
  auto& g = p.g;
  auto& opt = p.opt;
  auto* c_opt = app.add_subcommand("optimise", "Rewrite a model into a faster equivalent one");
  c_opt->alias("optimize");
  c_opt->add_option("model", opt.model, "ONNX model")->required();
  c_opt->add_option("-o,--output", opt.output, "Where to write the optimised model")->required();
  c_opt->add_option("--report", opt.report_html,
                    "Also write an HTML page (self-contained) of what changed: op histograms, each fusion and rewrite with its cost, "
                    "cost by op type, measured latencies, verification");
  c_opt->add_option("--search", opt.search, "Search strategy: taso (TASO's cost-based backtracking), greedy, exhaustive, rl (a trained agent, --agent), or none (round trip)")
      ->check(CLI::IsMember({"none", "greedy", "taso", "exhaustive", "rl"}))
      ->capture_default_str();
  c_opt->add_option("--alpha", opt.strategy.alpha, "taso: keep graphs whose cost is below alpha x the best")->check(kPositive)->capture_default_str();
  c_opt->add_option("--budget", opt.budget, "Graphs expanded at most (greedy: steps)")->check(kAtLeastOne)->capture_default_str();
  c_opt->add_option("--time-limit", opt.time_limit_s,
                    "Search wall-time limit in seconds, 0: none (default: 10, none with --deterministic)")
      ->check(kNonNegative);
  c_opt->add_option("--memory-limit", opt.memory_mb,
                    "Memory the run may use, MiB (default: 3/4 of this machine's); a model whose run needs more is refused "
                    "(exit 3), and the search stores graphs in at most a quarter of it")
      ->check(kPositive);
  c_opt->add_option("--rules", opt.rules_file, "Rule file (default: the shipped configs/rules/default.json)");
  c_opt->add_flag("--all-rules", opt.all_rules, "Use every verified rule, numerically verified ones included, not just the proved default set");
  c_opt->add_flag("--composites,!--no-composites", opt.composites,
                  "Fuse decomposed chains (GELU, LayerNorm, RMSNorm, ...) into single ops before searching (default on; not with --search none)");
  c_opt->add_option("--disable-fusion", opt.disabled_fusions,
                    "Leave these fusions' chains as they are (repeat, or a comma list): " + fusion_list(false))
      ->delimiter(',');
  add_opset_option(c_opt, opt.opset,
                   "The output's default-domain opset. auto (default): the newest the target's runtime runs (`rlflow targets`), at least "
                   "the input's, where a chain fuses there and not at the input's (" + fusion_list(true) + "); a model "
                   "with nothing to fuse, or written as it is, keeps its own. "
                   "keep: the input's. N: that opset (refused when an op rlflow keeps verbatim changes between the two)");
  c_opt->add_option("--target", opt.target, "Where the model will run: ort (onnxruntime on this CPU), h100, or gpu (this machine's GPU); `rlflow targets` describes each")
      ->check(CLI::IsMember(pipeline::target_names()))->capture_default_str();
  c_opt->add_option("--cost-model", opt.cost.kind, cost::cost_model_help("the --target's: ort -> ort, h100 -> recorded, gpu -> cudnn"))
      ->check(CLI::IsMember(cost::cost_model_kinds()))
      ->capture_default_str();
  c_opt->add_flag("--deterministic", opt.cost.deterministic,
                  "Exactly reproducible: a measured cost model (cpu, cudnn) gives way to the analytic one (recorded and ort are "
                  "deterministic already), no time limit, no measuring");
  c_opt->add_option("--device-profile", opt.cost.device_profile, "Analytic device profile (configs/devices/NAME.yaml)");
  c_opt->add_option("--cost-table", opt.cost.cost_table, "recorded: table of measured op timings (default configs/devices/h100-cost-table.json)");
  c_opt->add_option("--measure", opt.measure,
                    "Measure the result against the input on the target before writing it: auto (when the target runs here; not with "
                    "--deterministic), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  c_opt->add_option("--bench-rounds", opt.bench.rounds, "Measurement: interleaved rounds per candidate")->check(kAtLeastOne)->capture_default_str();
  c_opt->add_option("--bench-threads", opt.bench_threads, "Measurement on ort: onnxruntime intra-op threads (0: every core)")
      ->check(CLI::Range(0, max_threads()))->capture_default_str();
  c_opt->add_option("--bench-max-seconds", opt.bench.max_seconds, "Measurement: stop a candidate's rounds after this long (at least 10 rounds)")
      ->check(kPositive)->capture_default_str();
  c_opt->add_option("--candidates", opt.candidates, "Graphs measured, best predicted first, before the input is kept")->check(kAtLeastOne)->capture_default_str();
  c_opt->add_option("--input-shape", opt.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_opt->add_option("--fix", opt.fixed_dims,
                    "Specialise a symbolic dim for good, e.g. batch=1 (repeatable): it is static in the output, the other "
                    "symbols stay dynamic and are verified at other sizes");
  c_opt->add_flag("--verify,!--no-verify", opt.verify, "Check the result against the original (default on)");
  c_opt->add_option("--seed", opt.seed, "Seed for verification inputs")->check(kNonNegative)->capture_default_str();
  c_opt->add_option("--atol", opt.compare.atol, "Absolute tolerance of verification")->check(kTolerance)->capture_default_str();
  c_opt->add_option("--rtol", opt.compare.rtol, "Relative tolerance of verification")->check(kTolerance)->capture_default_str();
  c_opt->add_option("--agent", opt.rl.agent_path,
                    "rl: the agent checkpoint (rlflow train-agent --out; default: the shipped configs/agents/zoo-h100.pt, "
                    "trained on three zoo CNNs under the recorded H100 cost)");
  c_opt->add_option("--rollouts", opt.rl.rollouts, "rl: sampled rollouts after the greedy one; the best graph wins")->check(kNonNegative)->capture_default_str();
  c_opt->add_option("--beam", opt.rl.beam, "rl: then a policy-guided beam search of this width (0: none)")->check(kNonNegative)->capture_default_str();
  c_opt->add_option("--beam-branch", opt.rl.beam_branch, "rl: rewrites the policy proposes per beam state")->check(kAtLeastOne)->capture_default_str();
  c_opt->add_flag("--polish", opt.rl.polish, "rl: then greedy descent from the agent's best graph to a local optimum");
  c_opt->add_flag("--never-below-greedy", opt.rl.never_below_greedy,
                  "rl: then greedy search from the input too (in what is left of the limits), and return its graph when the agent's is not cheaper (reported)");
  c_opt->add_flag("--json", g.json, "Print one JSON document");
  p.c_opt = c_opt;
}

// The flags both trainers share, with one meaning: the rules and the cost the agent is judged by.
void add_train_common_flags(CLI::App* c, TrainCommonOptions& t, const std::string& uses) {
  c->add_option("--rules", t.rules_file, "Rule file (default: the shipped configs/rules/default.json)");
  c->add_flag("--all-rules", t.all_rules, "Every verified rule as an xfer (numerically verified ones included), not just the proved default set");
  c->add_option("--target", t.target, "Where the optimised models will run; " + uses + " the cost optimise --target uses: ort, h100 or gpu")
      ->check(CLI::IsMember(pipeline::target_names()))->capture_default_str();
  c->add_option("--cost-model", t.cost_model, cost::cost_model_help("the --target's: ort -> ort, h100 -> recorded, gpu -> cudnn"))
      ->check(CLI::IsMember(cost::cost_model_kinds()))->capture_default_str();
  c->add_flag("--deterministic", t.deterministic,
              "Exactly reproducible: a measured cost model (cpu, cudnn, auto, ort-measured) gives way to the analytic one (recorded "
              "and ort are deterministic already)");
  c->add_option("--device-profile", t.device_profile, "Analytic device profile (configs/devices/NAME.yaml)");
  c->add_option("--input-shape", t.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  add_opset_option(c, t.opset,
                   "Train on the graphs `optimise --opset` searches (auto, keep or N; default auto: the target's opset): each model as "
                   "written at that opset, with the composite chains it fuses (LayerNorm 17, Gelu 20, RMSNorm, rotary 23) fused");
}

void declare_train_agent(CLI::App& app, Commands& p) {
  auto& g = p.g;
  auto& train = p.train;
  auto* c_train = app.add_subcommand("train-agent", "Train the GNN + PPO agent on models (one agent for all of them)");
  c_train->add_option("--model", train.common.models, "ONNX model to train on (repeatable)")->required();
  c_train->add_option("--config", train.common.config,
                      "Agent hyperparameters (YAML; default: configs/agent/ppo-imitation.yaml, behaviour cloning on greedy's "
                      "trajectories and one DAgger round before PPO; with --world-model, the values in configs/agent/ppo.yaml)");
  c_train->add_option("--out", train.common.out, "Agent checkpoint to write (and to --resume from)")->required();
  c_train->add_option("--log", train.common.log, "JSONL training log, one line per update (default: OUT.jsonl)");
  c_train->add_option("--episodes", train.common.episodes, "Episodes in all, counting those before a --resume")->check(kAtLeastOne)->capture_default_str();
  c_train->add_option("--seed", train.common.seed, "Seed of the network, sampling and minibatches")->check(kNonNegative)->capture_default_str();
  c_train->add_option("--imitation-epochs", train.imitation_epochs,
                      "Behaviour-cloning epochs on greedy search's trajectories before PPO (overrides training.imitation_epochs; 0: none)");
  c_train->add_option("--dagger-rounds", train.dagger_rounds,
                      "DAgger rounds after cloning: the policy's own states labelled by greedy (overrides training.dagger_rounds)");
  c_train->add_option("--world-size", train.world_size,
                      "Data-parallel training over this many processes (libtorch c10d, gloo); start one per rank, or use "
                      "scripts/train_ranks")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  c_train->add_option("--rank", train.rank, "This process's rank, 0..world-size-1; rank 0 writes --out and --log")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  c_train->add_option("--master", train.master, "ADDR:PORT where rank 0 serves the rendezvous store")->capture_default_str();
  c_train->add_flag("--resume", train.common.resume, "Continue from the checkpoint at --out");
  add_train_common_flags(c_train, train.common, "the agent trains on");
  c_train->add_option("--world-model", train.world_model, "Train the controller inside this world model's dream (train-world-model --out)");
  c_train->add_option("--temperature", train.temperature, "Dream temperature: mixture logits / T, Gaussian noise x sqrt(T)")->capture_default_str();
  c_train->add_option("--uncertainty-penalty", train.uncertainty_penalty,
                      "With an ensemble --world-model: dream reward = members' mean - this x their std (MOPO); 0: none")
      ->capture_default_str();
  c_train->add_option("--dream-batch", train.dream_batch, "Dream episodes stepped together (and per PPO update) with --world-model")
      ->capture_default_str();
  c_train->add_option("--eval-every", train.eval_every,
                      "With --world-model: PPO updates between greedy rollouts in the real environment (0: only at the end)")
      ->capture_default_str();
  c_train->add_flag("--json", g.json, "Print one JSON document");

  p.c_train = c_train;
}

void declare_train_world_model(CLI::App& app, Commands& p) {
  auto& g = p.g;
  auto& wmo = p.wmo;
  auto* c_wm = app.add_subcommand("train-world-model", "Collect real rollouts and fit the MDN-RNN world model");
  c_wm->add_option("--model", wmo.common.models, "ONNX model to collect rollouts on (repeatable)")->required();
  c_wm->add_option("--out", wmo.common.out, "World model checkpoint to write (and to --resume from)")->required();
  c_wm->add_option("--episodes", wmo.common.episodes, "Real episodes in the data set (reused from --data, topped up)")->check(kAtLeastOne)->capture_default_str();
  c_wm->add_option("--config", wmo.common.config, "World-model settings (YAML; default: the values in configs/world_model.yaml)");
  c_wm->add_option("--data", wmo.data, "Rollout file, reused by later runs (default: OUT.data)");
  c_wm->add_option("--agent", wmo.encoder_agent, "Take the (frozen) graph encoder and the xfers from this model-free agent");
  c_wm->add_option("--policy", wmo.policy,
                   "Collect the new episodes with this dream controller (train-agent --world-model --out) instead of the random agent");
  c_wm->add_option("--log", wmo.common.log, "JSONL log, one line per epoch (default: OUT.jsonl)");
  c_wm->add_option("--seed", wmo.common.seed, "Seed of the data agent, the split and the network")->check(kNonNegative)->capture_default_str();
  c_wm->add_flag("--resume", wmo.common.resume, "Continue training the world model at --out");
  add_train_common_flags(c_wm, wmo.common, "the rollouts use");
  c_wm->add_flag("--json", g.json, "Print one JSON document");
  p.c_wm = c_wm;
}

void declare_run_bench(CLI::App& app, Commands& p) {
  auto& g = p.g;
  auto& run = p.run;
  auto& bench = p.bench;
  auto* c_run = app.add_subcommand("run", "Run a model on input_N.pb tensors with the reference executor and compare with output_N.pb");
  c_run->add_option("model", run.model, "ONNX model")->required();
  c_run->add_option("--data-dir", run.data_dir, "Folder with input_N.pb and output_N.pb")->required();
  c_run->add_option("--atol", run.atol, "Absolute tolerance")->check(kTolerance)->capture_default_str();
  c_run->add_option("--rtol", run.rtol, "Relative tolerance")->check(kTolerance)->capture_default_str();
  c_run->add_flag("--json", g.json, "Print one JSON document");

  auto* c_bench = app.add_subcommand("bench", "Measure ONNX files end to end on a target: median latency and speedup over the first file, with confidence intervals");
  c_bench->add_option("files", bench.files, "ONNX models; the first is the baseline")->required();
  c_bench->add_option("--target", bench.target,
                      "The words optimise --target uses: ort (onnxruntime CPU), gpu or h100 (rlflow's GPU runner: each file prepared "
                      "once, buffers and algorithms settled, then replayed as one captured CUDA graph; cudnn is the same); and cpu "
                      "(rlflow's reference executor)")
      ->check(CLI::IsMember({"ort", "gpu", "h100", "cudnn", "cpu"}))->capture_default_str();
  c_bench->add_option("--threads", bench.threads, "Comma-separated thread counts, 'all' = every core (default: ort 1,all; cpu 1)");
  c_bench->add_option("--rounds", bench.bench.rounds, "Timed runs of each file, one per round, in a new random order each round")->check(kAtLeastOne)->capture_default_str();
  c_bench->add_option("--warmup", bench.bench.warmup, "Untimed runs of each file first")->check(kNonNegative)->capture_default_str();
  c_bench->add_option("--max-seconds", bench.bench.max_seconds, "Stop after the round that passes this time (at least 10 rounds; 0: no limit)")->check(kNonNegative)->capture_default_str();
  c_bench->add_option("--confidence", bench.bench.confidence, "Confidence level of the intervals")->check(CLI::Range(0.5, 0.999))->capture_default_str();
  c_bench->add_option("--seed", bench.bench.seed, "Seed of the inputs and of the run order")->check(kNonNegative)->capture_default_str();
  c_bench->add_option("--input-shape", bench.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_bench->add_flag("--json", g.json, "Print one JSON document");
  p.c_run = c_run;
  p.c_bench = c_bench;
}

void declare_rules(CLI::App& app, Commands& p) {
  auto& g = p.g;
  auto& rules = p.rules;
  auto* c_rules = app.add_subcommand("rules", "The substitution library: list and verify rules");
  c_rules->require_subcommand(1);
  auto* c_rlist = c_rules->add_subcommand("list", "Each rule's name, size, provenance and verification status, and totals");
  c_rlist->add_option("--rules", rules.file, "Rule file (default: the shipped configs/rules/default.json)");
  c_rlist->add_flag("--summary", rules.summary, "Only the totals");
  c_rlist->add_flag("--json", g.json, "Print one JSON document");
  auto* c_rverify = c_rules->add_subcommand("verify", "Check every rule numerically on its instances (reference executor, float64)");
  c_rverify->add_option("--rules", rules.file, "Rule file (default: the shipped configs/rules/default.json)");
  c_rverify->add_option("--rule", rules.only, "Only these rules (repeatable)");
  c_rverify->add_flag("--write", rules.write, "Record each rule's status in the rule file");
  c_rverify->add_flag("--prove", rules.prove, "Then prove each passing rule with Z3 (status: proved, or numerically verified only)");
  c_rverify->add_option("--timeout", rules.prove_timeout, "Seconds per rule for --prove")->check(kPositive)->capture_default_str();
  c_rverify->add_option("--dump-smt2", rules.dump_smt2, "With --prove: write each rule's SMT-LIB query into this directory");
  c_rverify->add_option("--jobs", rules.jobs, "Rules checked in parallel (one Z3 context each)")->capture_default_str()->check(CLI::Range(1, 256));
  c_rverify->add_option("--sample", rules.sample, "Only N rules drawn at random (with --seed) from those selected; 0: all")
      ->check(kNonNegative)->capture_default_str();
  c_rverify->add_option("--seed", rules.seed, "Seed for --sample")->check(kNonNegative)->capture_default_str();
  c_rverify->add_flag("--json", g.json, "Print one JSON document");

  auto* c_rbench = c_rules->add_subcommand("bench", "Match time, applications per second and a random-chain semantic check on models");
  c_rbench->add_option("models", rules.models, "ONNX models")->required();
  c_rbench->add_option("--rules", rules.file, "Rule file (default: the shipped configs/rules/default.json)");
  c_rbench->add_option("--applications", rules.applications, "Random rewrites checked per model")->check(kAtLeastOne)->capture_default_str();
  c_rbench->add_option("--chain", rules.chain, "Applications per chain; each chain's result is run against the original")->check(kAtLeastOne)->capture_default_str();
  c_rbench->add_option("--repeats", rules.repeats, "Timing repetitions (median)")->check(kAtLeastOne)->capture_default_str();
  c_rbench->add_option("--seed", rules.seed, "Seed of the random chains")->check(kNonNegative)->capture_default_str();
  c_rbench->add_flag("--json", g.json, "Print one JSON document");

  auto* c_rgen = c_rules->add_subcommand("generate", "Enumerate small graphs, pair equal ones into rules, verify and prune them");
  c_rgen->add_option("--depth", rules.depth, "Ops per enumerated graph, at most")->capture_default_str();
  c_rgen->add_option("--world", rules.worlds, "Variable worlds: conv, matmul (repeatable; default both)");
  c_rgen->add_option("--out", rules.out, "Write the generated rules (only) to this rule file");
  c_rgen->add_option("--merge-into", rules.merge_into, "Replace the generated rules of this rule file, keeping the others");
  c_rgen->add_option("--rules", rules.file, "Library whose rules generated duplicates are checked against (default: the shipped one)");
  c_rgen->add_option("--zoo", rules.zoo, "ONNX models: rules matching one of them form the default set (repeatable)");
  c_rgen->add_option("--max-group", rules.max_group, "Pair each graph with at most this many smaller equal ones")->check(kAtLeastOne)->capture_default_str();
  c_rgen->add_option("--derivation-steps", rules.derivation_steps, "Drop rules that this many applications of smaller rules derive")->check(kNonNegative)->capture_default_str();
  c_rgen->add_flag("--json", g.json, "Print one JSON document");
  p.c_rlist = c_rlist;
  p.c_rverify = c_rverify;
  p.c_rbench = c_rbench;
  p.c_rgen = c_rgen;
}

void declare_cost(CLI::App& app, Commands& p) {
  auto& g = p.g;
  auto& cost = p.cost;
  auto* c_cost = app.add_subcommand("cost", "Per-op cost table and total of a model; `cost calibrate` fits a device profile");
  c_cost->require_subcommand(0, 1);
  c_cost->add_option("model", cost.model, "ONNX model");
  c_cost->add_option("--cost-model", cost.cost_model, cost::cost_model_help())
      ->check(CLI::IsMember(cost::cost_model_kinds()))->capture_default_str();
  c_cost->add_flag("--deterministic", cost.deterministic,
                   "Exactly reproducible: a measured cost model (cpu, cudnn, auto, ort-measured) gives way to the analytic one (recorded and ort "
                   "are deterministic already)");
  c_cost->add_option("--device-profile", cost.device_profile, "Analytic device profile: h100, h200, cpu-2core or a YAML path");
  c_cost->add_option("--cost-table", cost.cost_table, "recorded: table of measured op timings (default configs/devices/h100-cost-table.json)");
  c_cost->add_flag("--measure-graph", cost.measure_graph, "Also run the whole graph on the device the cost model stands for (onnxruntime for ort and ort-measured) and compare with the sum of op costs");
  c_cost->add_option("--input-shape", cost.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_cost->add_flag("--all", cost.all, "List folded nodes (constant inputs, cost 0) too");
  c_cost->add_option("--cache", cost.cache, "Cost cache file (default ~/.cache/rlflow/cost-cache.json or $RLFLOW_COST_CACHE)");
  c_cost->add_flag("--no-cache", cost.no_cache, "Measure every op; neither read nor write the cache");
  c_cost->add_option("--warmup", cost.warmup, "Untimed runs per op (default: cpu 3, cudnn 8, ort-measured 3)")->check(kNonNegative);
  c_cost->add_option("--repeats", cost.repeats, "Timed runs per op, median (default: cpu 10, cudnn 32, ort-measured 15)")->check(kAtLeastOne);
  c_cost->add_flag("--json", g.json, "Print one JSON document");
  auto* c_calib = c_cost->add_subcommand("calibrate", "Time representative ops and fit an analytic device profile to them");
  // Every kind parses, so that a non-measuring one (ort above all) gets calibrate's own message.
  c_calib->add_option("--cost-model", cost.cost_model,
                      "The measuring backend: auto, cpu, cudnn, or ort-measured (each op as a one-node model in onnxruntime); "
                      "ort, the analytic onnxruntime profile, is what ort-measured's timings fit and cannot itself calibrate")
      ->check(CLI::IsMember(cost::cost_model_kinds()))->capture_default_str();
  c_calib->add_option("--profile", cost.profile_out, "Write the fitted profile to this YAML file");
  c_calib->add_option("--base", cost.base_profile, "Profile whose peaks are kept (default: cpu-2core for cpu, h100 for cudnn)");
  c_calib->add_option("--batch", cost.batch, "Batch size of the CNN calibration ops (default: 1 for cpu, 8 for cudnn)")->check(kAtLeastOne);
  c_calib->add_option("--cache", cost.cache, "Cost cache file");
  c_calib->add_flag("--no-cache", cost.no_cache, "Measure every op; neither read nor write the cache");
  c_calib->add_option("--warmup", cost.warmup, "Untimed runs per op")->check(kNonNegative);
  c_calib->add_option("--repeats", cost.repeats, "Timed runs per op, median")->check(kAtLeastOne);
  c_calib->add_flag("--json", g.json, "Print one JSON document");
  p.c_cost = c_cost;
  p.c_calib = c_calib;
}

void declare_all(CLI::App& app, Commands& p) {
  declare_global(app, p);
  declare_info(app, p);
  declare_optimise(app, p);
  declare_train_agent(app, p);
  declare_train_world_model(app, p);
  declare_run_bench(app, p);
  declare_rules(app, p);
  declare_cost(app, p);
}

// The parsed subcommand's exit code.
int dispatch(const CLI::App& app, Commands& p) {
  auto& g = p.g;
  if (p.version) {
    std::cout << version_string() << std::endl;
    return kOk;
  }
  if (p.c_info->parsed()) return cmd_info(g, p.info);
  if (p.c_targets->parsed()) return cmd_targets(g);
  if (p.c_opt->parsed()) return cmd_optimise(g, p.opt);
  if (p.c_run->parsed()) return cmd_run(g, p.run);
  if (p.c_bench->parsed()) return cmd_bench(g, p.bench);
  if (p.c_train->parsed()) return cmd_train_agent(g, p.train);
  if (p.c_wm->parsed()) return cmd_train_world_model(g, p.wmo);
  if (p.c_rlist->parsed()) return cmd_rules_list(g, p.rules);
  if (p.c_rverify->parsed()) return cmd_rules_verify(g, p.rules);
  if (p.c_rbench->parsed()) return cmd_rules_bench(g, p.rules);
  if (p.c_rgen->parsed()) return cmd_rules_generate(g, p.rules);
  if (p.c_calib->parsed()) return cmd_cost_calibrate(g, p.cost);
  if (p.c_cost->parsed()) return cmd_cost(g, p.cost);
  std::cerr << app.help();
  return kUsage;
}

// argv for CLI11 from a list of arguments (the program name first).
std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

constexpr const char* kDescription = "rlflow: a graph-level optimiser for ONNX models";

}  // namespace

int run(int argc, char** argv) {
  // Before any flag is declared: --cost-model's checks and help list the registered backends.
  bench::register_cost_backends();
  CLI::App app{kDescription};
  Commands p;
  declare_all(app, p);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "rlflow: error: " << e.what() << "\n";
    return kUsage;
  }
  try {
    setup_logging(p.verbosity, p.quiet);
    install_temp_file_cleanup();
    return dispatch(app, p);
  } catch (const std::bad_alloc&) {
    return report_error(p.g, Error::internal("out of memory"));
  } catch (const std::exception& e) {
    return report_error(p.g, Error::internal(std::string("unexpected failure: ") + e.what()));
  }
}

JsonRun run_json(const std::vector<std::string>& args) {
  bench::register_cost_backends();
  CLI::App app{kDescription};
  Commands p;
  declare_all(app, p);
  std::vector<std::string> all{"rlflow"};
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--json");
  auto argv = argv_of(all);
  try {
    app.parse(static_cast<int>(all.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return {kUsage, {}, e.what()};
  }
  // The command prints its JSON document on stdout: caught here, restored on every way out.
  std::ostringstream captured;
  struct Restore {
    std::streambuf* old;
    ~Restore() { std::cout.rdbuf(old); }
  } restore{std::cout.rdbuf(captured.rdbuf())};
  int code = kInternal;
  try {
    setup_logging(p.verbosity, p.quiet);
    code = dispatch(app, p);
  } catch (const std::bad_alloc&) {
    code = report_error(p.g, Error::internal("out of memory"));
  } catch (const std::exception& e) {
    code = report_error(p.g, Error::internal(std::string("unexpected failure: ") + e.what()));
  }
  return {code, captured.str(), {}};
}

Expected<pipeline::OptimiseOptions> parse_optimise_args(const std::vector<std::string>& args) {
  bench::register_cost_backends();
  CLI::App app{kDescription};
  Commands p;
  declare_global(app, p);
  declare_optimise(app, p);
  std::vector<std::string> all{"rlflow", "optimise"};
  all.insert(all.end(), args.begin(), args.end());
  auto argv = argv_of(all);
  try {
    app.parse(static_cast<int>(all.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return Error{ErrorCode::kUsage, e.what()};
  }
  setup_logging(p.verbosity, p.quiet);
  return p.opt;
}

}  // namespace rlflow::cli
