#include "rlflow/cli/app.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <iostream>
#include <sstream>
#include <vector>

#include "commands.h"
#include "flags.h"
#include "rlflow/bench/ort_cost.h"
#include "rlflow/cost/factory.h"
#include "rlflow/ir/composites.h"
#include "rlflow/rl/agent.h"
#include "rlflow/util/file_io.h"

namespace rlflow::cli {

namespace {

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
  RunOptions run;
  BenchCmdOptions bench;
  RulesOptions rules;
  // Every subcommand with what runs it, in the order tried (the commands declared in their own
  // files, cmd_cost.cpp and cmd_rl.cpp, hold their options in their entries).
  Subcommands commands;
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
  p.commands.push_back({c_info, [&p] { return cmd_info(p.g, p.info); }});
  p.commands.push_back({c_targets, [&p] { return cmd_targets(p.g); }});
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
  c_opt->add_option("--search", opt.search, "Search strategy: " + pipeline::search_help())
      ->check(CLI::IsMember(pipeline::search_names()))
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
  p.commands.push_back({c_opt, [&p] { return cmd_optimise(p.g, p.opt); }});
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
  p.commands.push_back({c_run, [&p] { return cmd_run(p.g, p.run); }});
  p.commands.push_back({c_bench, [&p] { return cmd_bench(p.g, p.bench); }});
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
  p.commands.push_back({c_rlist, [&p] { return cmd_rules_list(p.g, p.rules); }});
  p.commands.push_back({c_rverify, [&p] { return cmd_rules_verify(p.g, p.rules); }});
  p.commands.push_back({c_rbench, [&p] { return cmd_rules_bench(p.g, p.rules); }});
  p.commands.push_back({c_rgen, [&p] { return cmd_rules_generate(p.g, p.rules); }});
}

void declare_all(CLI::App& app, Commands& p) {
  declare_global(app, p);
  declare_info(app, p);
  declare_optimise(app, p);
  declare_train_agent(app, p.g, p.commands);
  declare_train_world_model(app, p.g, p.commands);
  declare_run_bench(app, p);
  declare_rules(app, p);
  declare_cost(app, p.g, p.commands);
}

// The parsed subcommand's exit code.
int dispatch(const CLI::App& app, Commands& p) {
  if (p.version) {
    std::cout << version_string() << std::endl;
    return kOk;
  }
  for (const auto& c : p.commands)
    if (c.app->parsed()) return c.run();
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

// Before any flag is declared: --cost-model's and --search's checks and help list what modules
// above cost and search register there (bench's ort-measured backend, rl's agent strategy).
void register_modules() {
  bench::register_cost_backends();
  rl::register_search_strategy();
}

constexpr const char* kDescription = "rlflow: a graph-level optimiser for ONNX models";

}  // namespace

int run(int argc, char** argv) {
  register_modules();
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
  register_modules();
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
  register_modules();
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
