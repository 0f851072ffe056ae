// `rlflow rules list | verify | bench | generate`: their flags, bound to the library's options
// (include/rlflow/pipeline/rules.h), generate's progress on a terminal, the report on stdout, and
// the outcome as an exit code.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <spdlog/spdlog.h>

#include "commands.h"
#include "flags.h"
#include "rlflow/cli/app.h"
#include "rlflow/pipeline/rules.h"

namespace rlflow::cli {

namespace {

// Each subcommand's options; a flag that several take (--rules, --seed) binds to each one's field.
struct RulesCommand {
  pipeline::RulesListOptions list;
  pipeline::RulesVerifyOptions verify;
  pipeline::RulesBenchOptions bench;
  pipeline::RulesGenerateOptions generate;
};

int run_generate(const GlobalOptions& g, const pipeline::RulesGenerateOptions& o) {
  // "\r<stage> done / total" on a terminal, a new line for each stage.
  const bool tty = !g.json && isatty(fileno(stderr));
  std::string last_stage;
  pipeline::RulesGenerateHooks hooks;
  if (tty)
    hooks.progress = [&](const std::string& stage, size_t done, size_t total) {
      if (stage != last_stage && !last_stage.empty()) std::fprintf(stderr, "\n");
      last_stage = stage;
      if (total) std::fprintf(stderr, "\r%-28s %zu / %zu", stage.c_str(), done, total);
      else std::fprintf(stderr, "\r%-28s %zu", stage.c_str(), done);
      std::fflush(stderr);
    };
  auto r = pipeline::generate_rules(o, hooks);
  if (tty && !last_stage.empty()) std::fprintf(stderr, "\n");
  if (r) r->details = spdlog::get_level() <= spdlog::level::info;
  return print_report(g, r);
}

}  // namespace

void declare_rules(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<RulesCommand>();
  auto& l = o->list;
  auto& v = o->verify;
  auto& b = o->bench;
  auto& gen = o->generate;
  auto* c_rules = app.add_subcommand("rules", "The substitution library: list and verify rules");
  c_rules->require_subcommand(1);
  auto* c_rlist = c_rules->add_subcommand("list", "Each rule's name, size, provenance and verification status, and totals");
  c_rlist->add_option("--rules", l.file, "Rule file (default: the shipped configs/rules/default.json)");
  c_rlist->add_flag("--summary", l.summary, "Only the totals");
  c_rlist->add_flag("--json", g.json, "Print one JSON document");
  auto* c_rverify = c_rules->add_subcommand("verify", "Check every rule numerically on its instances (reference executor, float64)");
  c_rverify->add_option("--rules", v.file, "Rule file (default: the shipped configs/rules/default.json)");
  c_rverify->add_option("--rule", v.only, "Only these rules (repeatable)");
  c_rverify->add_flag("--write", v.write, "Record each rule's status in the rule file");
  c_rverify->add_flag("--prove", v.prove, "Then prove each passing rule with Z3 (status: proved, or numerically verified only)");
  c_rverify->add_option("--timeout", v.prove_timeout, "Seconds per rule for --prove")->check(kPositive)->capture_default_str();
  c_rverify->add_option("--dump-smt2", v.dump_smt2, "With --prove: write each rule's SMT-LIB query into this directory");
  c_rverify->add_option("--jobs", v.jobs, "Rules checked in parallel (one Z3 context each)")->capture_default_str()->check(CLI::Range(1, 256));
  c_rverify->add_option("--sample", v.sample, "Only N rules drawn at random (with --seed) from those selected; 0: all")
      ->check(kNonNegative)->capture_default_str();
  c_rverify->add_option("--seed", v.seed, "Seed for --sample")->check(kNonNegative)->capture_default_str();
  c_rverify->add_flag("--json", g.json, "Print one JSON document");

  auto* c_rbench = c_rules->add_subcommand("bench", "Match time, applications per second and a random-chain semantic check on models");
  c_rbench->add_option("models", b.models, "ONNX models")->required();
  c_rbench->add_option("--rules", b.file, "Rule file (default: the shipped configs/rules/default.json)");
  c_rbench->add_option("--applications", b.applications, "Random rewrites checked per model")->check(kAtLeastOne)->capture_default_str();
  c_rbench->add_option("--chain", b.chain, "Applications per chain; each chain's result is run against the original")->check(kAtLeastOne)->capture_default_str();
  c_rbench->add_option("--repeats", b.repeats, "Timing repetitions (median)")->check(kAtLeastOne)->capture_default_str();
  c_rbench->add_option("--seed", b.seed, "Seed of the random chains")->check(kNonNegative)->capture_default_str();
  c_rbench->add_flag("--json", g.json, "Print one JSON document");

  auto* c_rgen = c_rules->add_subcommand("generate", "Enumerate small graphs, pair equal ones into rules, verify and prune them");
  c_rgen->add_option("--depth", gen.depth, "Ops per enumerated graph, at most")->capture_default_str();
  c_rgen->add_option("--world", gen.worlds, "Variable worlds: conv, matmul (repeatable; default both)");
  c_rgen->add_option("--out", gen.out, "Write the generated rules (only) to this rule file");
  c_rgen->add_option("--merge-into", gen.merge_into, "Replace the generated rules of this rule file, keeping the others");
  c_rgen->add_option("--rules", gen.file, "Library whose rules generated duplicates are checked against (default: the shipped one)");
  c_rgen->add_option("--zoo", gen.zoo, "ONNX models: rules matching one of them form the default set (repeatable)");
  c_rgen->add_option("--max-group", gen.max_group, "Pair each graph with at most this many smaller equal ones")->check(kAtLeastOne)->capture_default_str();
  c_rgen->add_option("--derivation-steps", gen.derivation_steps, "Drop rules that this many applications of smaller rules derive")->check(kNonNegative)->capture_default_str();
  c_rgen->add_flag("--json", g.json, "Print one JSON document");
  out.push_back({c_rlist, [&g, o] {
                   auto r = pipeline::list_rules(o->list);
                   return print_report(g, r);
                 }});
  out.push_back({c_rverify, [&g, o] {
                   auto r = pipeline::verify_rules(o->verify);
                   return print_report(g, r, r && !r->ok());
                 }});
  out.push_back({c_rbench, [&g, o] {
                   auto r = pipeline::bench_rules(o->bench);
                   return print_report(g, r, r && r->failures() > 0);
                 }});
  out.push_back({c_rgen, [&g, o] { return run_generate(g, o->generate); }});
}

}  // namespace rlflow::cli
