#include "rlflow/cli/app.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <iostream>

#include "commands.h"

namespace rlflow::cli {

namespace {

void setup_logging(int verbosity, bool quiet) {
  auto logger = spdlog::stderr_color_mt("rlflow");
  logger->set_pattern("%^[%l]%$ %v");
  spdlog::set_default_logger(logger);
  if (quiet) spdlog::set_level(spdlog::level::err);
  else if (verbosity >= 2) spdlog::set_level(spdlog::level::debug);
  else if (verbosity == 1) spdlog::set_level(spdlog::level::info);
  else spdlog::set_level(spdlog::level::warn);
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"rlflow: a graph-level optimiser for ONNX models"};
  app.require_subcommand(0, 1);
  GlobalOptions g;
  int verbosity = 0;
  bool quiet = false, version = false;
  app.add_flag("-v,--verbose", verbosity, "More log output on stderr (-vv for debug)");
  app.add_flag("-q,--quiet", quiet, "Only errors on stderr");
  app.add_flag("--version", version, "Print the version and the available devices");

  InfoOptions info;
  auto* c_info = app.add_subcommand("info", "Inputs, outputs, op histogram, parameters and FLOPs of a model");
  c_info->add_option("model", info.model, "ONNX model")->required();
  c_info->add_option("--input-shape", info.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_info->add_flag("--json", g.json, "Print one JSON document");

  OptimiseOptions opt;
  auto* c_opt = app.add_subcommand("optimise", "Rewrite a model into a faster equivalent one");
  c_opt->alias("optimize");
  c_opt->add_option("model", opt.model, "ONNX model")->required();
  c_opt->add_option("-o,--output", opt.output, "Where to write the optimised model")->required();
  c_opt->add_option("--search", opt.search, "Search strategy")->check(CLI::IsMember({"none"}))->capture_default_str();
  c_opt->add_option("--input-shape", opt.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_opt->add_flag("--verify,!--no-verify", opt.verify, "Check the result against the original (default on)");
  c_opt->add_option("--seed", opt.seed, "Seed for verification inputs")->capture_default_str();
  c_opt->add_option("--atol", opt.atol, "Absolute tolerance of verification")->capture_default_str();
  c_opt->add_option("--rtol", opt.rtol, "Relative tolerance of verification")->capture_default_str();
  c_opt->add_flag("--json", g.json, "Print one JSON document");

  RunOptions run;
  auto* c_run = app.add_subcommand("run", "Run a model on input_N.pb tensors with the reference executor and compare with output_N.pb");
  c_run->add_option("model", run.model, "ONNX model")->required();
  c_run->add_option("--data-dir", run.data_dir, "Folder with input_N.pb and output_N.pb")->required();
  c_run->add_option("--atol", run.atol, "Absolute tolerance")->capture_default_str();
  c_run->add_option("--rtol", run.rtol, "Relative tolerance")->capture_default_str();
  c_run->add_flag("--json", g.json, "Print one JSON document");

  RulesOptions rules;
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
  c_rverify->add_flag("--json", g.json, "Print one JSON document");

  auto* c_rbench = c_rules->add_subcommand("bench", "Match time, applications per second and a random-chain semantic check on models");
  c_rbench->add_option("models", rules.models, "ONNX models")->required();
  c_rbench->add_option("--rules", rules.file, "Rule file (default: the shipped configs/rules/default.json)");
  c_rbench->add_option("--applications", rules.applications, "Random rewrites checked per model")->capture_default_str();
  c_rbench->add_option("--chain", rules.chain, "Applications per chain; each chain's result is run against the original")->capture_default_str();
  c_rbench->add_option("--repeats", rules.repeats, "Timing repetitions (median)")->capture_default_str();
  c_rbench->add_option("--seed", rules.seed, "Seed of the random chains")->capture_default_str();
  c_rbench->add_flag("--json", g.json, "Print one JSON document");

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
    setup_logging(verbosity, quiet);
    if (version) {
      std::cout << version_string() << std::endl;
      return kOk;
    }
    if (c_info->parsed()) return cmd_info(g, info);
    if (c_opt->parsed()) return cmd_optimise(g, opt);
    if (c_run->parsed()) return cmd_run(g, run);
    if (c_rlist->parsed()) return cmd_rules_list(g, rules);
    if (c_rverify->parsed()) return cmd_rules_verify(g, rules);
    if (c_rbench->parsed()) return cmd_rules_bench(g, rules);
    std::cerr << app.help();
    return kUsage;
  } catch (const std::bad_alloc&) {
    return report_error(g, Error::internal("out of memory"));
  } catch (const std::exception& e) {
    return report_error(g, Error::internal(std::string("unexpected failure: ") + e.what()));
  }
}

}  // namespace rlflow::cli
