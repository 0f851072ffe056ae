#include <chrono>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <thread>
#include <filesystem>
#include <iostream>
#include <random>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "commands.h"
#include "flags.h"
#include "rlflow/util/file_io.h"
#include "rlflow/cli/app.h"
#include "rlflow/exec/compare.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/rules/tools_module.h"

namespace rlflow::cli {

using json = nlohmann::json;

namespace {

Expected<rules::RuleLibrary> load(const RulesOptions& o, std::string* path) {
  *path = o.file.empty() ? rules::default_library_path() : o.file;
  return rules::load_library(*path);
}

}  // namespace

namespace {

// A proof's failure reason without its rule-specific details (names of outputs, numbers), so that
// the summary can count rules by reason.
std::string proof_reason_kind(const rules::Rule& r) {
  if (r.proof_outcome == "timeout") return "timeout";
  std::string why = r.proof_reason.empty() ? r.proof_outcome : r.proof_reason;
  // "output s2 -> t2: <reason>" -> "<reason>"
  if (why.rfind("output ", 0) == 0) {
    auto colon = why.find(": ");
    if (colon != std::string::npos) why = why.substr(colon + 2);
  }
  if (why.size() > 100) why = why.substr(0, 100) + "...";
  return r.proof_outcome + ": " + why;
}

}  // namespace

int cmd_rules_list(const GlobalOptions& g, const RulesOptions& o) {
  std::string path;
  auto lib = load(o, &path);
  if (!lib) return report_error(g, lib.error());
  std::map<std::string, int> by_status, by_provenance, by_proof, default_by_proof, reasons;
  int in_default = 0, default_in_use = 0;  // marked for the default set; of those, proved (select_rules uses them)
  json rows = json::array();
  for (const auto& r : lib->rules) {
    by_status[std::string(rules::status_name(r.status))]++;
    by_provenance[r.provenance]++;
    in_default += r.in_default_set;
    default_in_use += r.in_default_set && r.status == rules::VerifyStatus::kProved;
    const std::string outcome = r.status == rules::VerifyStatus::kRefuted ? "refuted"
                                : r.proof_outcome.empty()                 ? "never attempted"
                                                                          : r.proof_outcome;
    by_proof[outcome]++;
    if (r.in_default_set) default_by_proof[outcome]++;
    if (!r.proof_outcome.empty() && r.proof_outcome != "proved") reasons[proof_reason_kind(r)]++;
    rows.push_back({{"name", r.name}, {"source_ops", r.source.nodes.size()}, {"target_ops", r.target.nodes.size()},
                    {"provenance", r.provenance}, {"status", rules::status_name(r.status)}, {"default", r.in_default_set},
                    {"root", ir::op_name(r.root_kind())}, {"conditional", !r.conditions.empty()},
                    {"proof", r.proof_outcome.empty() ? json(nullptr) : json{{"outcome", r.proof_outcome}, {"reason", r.proof_reason}}}});
  }
  if (g.json) {
    json gen = nullptr;
    if (!lib->generator.empty()) {
      json totals = json::object();
      for (const auto& [stage, n] : lib->generator.totals) totals[stage] = n;
      gen = {{"depth", lib->generator.depth}, {"seconds", lib->generator.seconds}, {"command", lib->generator.command}, {"totals", totals}};
    }
    std::cout << json_text(json{{"file", path}, {"rules", o.summary ? json::array() : rows}, {"total", lib->rules.size()},
                      {"by_status", by_status}, {"by_provenance", by_provenance}, {"default_set", in_default}, {"default_set_in_use", default_in_use}, {"generator", gen},
                      {"by_proof", by_proof}, {"default_set_by_proof", default_by_proof}, {"unproved_reasons", reasons}})
              << std::endl;
    return kOk;
  }
  if (!o.summary) {
    std::printf("%-32s %6s %6s  %-13s %-26s %-7s %s\n", "rule", "source", "target", "provenance", "status", "default", "proof");
    for (const auto& r : lib->rules)
      std::printf("%-32s %6zu %6zu  %-13s %-26s %-7s %s%s%s\n", r.name.c_str(), r.source.nodes.size(), r.target.nodes.size(),
                  r.provenance.c_str(), std::string(rules::status_name(r.status)).c_str(), r.in_default_set ? "yes" : "no",
                  r.proof_outcome.empty() ? "-" : r.proof_outcome.c_str(), r.proof_reason.empty() ? "" : ": ", r.proof_reason.c_str());
  }
  std::printf("%s: %zu rules (", path.c_str(), lib->rules.size());
  bool first = true;
  for (const auto& [k, v] : by_provenance) std::printf("%s%d %s", first ? "" : ", ", v, k.c_str()), first = false;
  std::printf("); ");
  first = true;
  for (const auto& [k, v] : by_status) std::printf("%s%d %s", first ? "" : ", ", v, k.c_str()), first = false;
  std::printf("; %d marked for the default set, of which %d proved and in use (unproved ones stay out; --all-rules adds them)\n",
              in_default, default_in_use);
  auto print_counts = [](const char* label, const std::map<std::string, int>& m) {
    std::printf("%s", label);
    bool first = true;
    for (const auto& [k, v] : m) std::printf("%s%d %s", first ? " " : ", ", v, k.c_str()), first = false;
    std::printf("\n");
  };
  print_counts("proofs (rules verify --prove --write):", by_proof);
  print_counts("proofs of the rules marked for the default set:", default_by_proof);
  if (!reasons.empty()) {
    std::vector<std::pair<int, std::string>> top;
    for (const auto& [k, v] : reasons) top.emplace_back(v, k);
    std::sort(top.rbegin(), top.rend());
    std::printf("why the others are not proved:\n");
    for (const auto& [v, k] : top) std::printf("  %6d  %s\n", v, k.c_str());
  }
  if (!lib->generator.empty()) {
    std::printf("generator (depth %d, %.0f s%s%s):\n", lib->generator.depth, lib->generator.seconds,
                lib->generator.command.empty() ? "" : ", ", lib->generator.command.c_str());
    for (const auto& [stage, n] : lib->generator.totals) std::printf("  %-28s %10lld\n", stage.c_str(), static_cast<long long>(n));
  }
  return kOk;
}

int cmd_rules_verify(const GlobalOptions& g, const RulesOptions& o) {
  auto tools = rules::tools_module("rules verify");
  if (!tools) return report_error(g, tools.error());
  std::string path;
  auto lib = load(o, &path);
  if (!lib) return report_error(g, lib.error());
  const auto t0 = std::chrono::steady_clock::now();
  rules::ProofOptions po;
  po.timeout_s = o.prove_timeout;
  po.dump_smt2 = o.dump_smt2;
  if (o.prove && !o.dump_smt2.empty()) std::filesystem::create_directories(o.dump_smt2);
  // The rules to check: --rule names, else all; --sample N of them drawn with --seed.
  std::vector<size_t> chosen;
  for (size_t i = 0; i < lib->rules.size(); ++i)
    if (o.only.empty() || std::find(o.only.begin(), o.only.end(), lib->rules[i].name) != o.only.end()) chosen.push_back(i);
  if (o.sample > 0 && static_cast<size_t>(o.sample) < chosen.size()) {
    std::mt19937_64 rng(o.seed);
    std::shuffle(chosen.begin(), chosen.end(), rng);
    chosen.resize(static_cast<size_t>(o.sample));
    std::sort(chosen.begin(), chosen.end());
  }
  struct Checked {
    rules::RuleCheck numeric;
    std::optional<rules::ProofResult> proof;
  };
  std::vector<Checked> done(chosen.size());
  // Workers take rules in order; each rule's numeric check and proof are independent, and results
  // are reported in library order afterwards. Each proof runs in its own process, which is stopped
  // if Z3 overruns the timeout (it does not check it everywhere); this process never enters Z3.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < chosen.size();) {
      const auto& r = lib->rules[chosen[k]];
      done[k].numeric = (*tools)->verify_numerically(r);
      if (o.prove) done[k].proof = (*tools)->prove_rule_isolated(r, po);
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < std::min<int>(o.jobs, static_cast<int>(chosen.size())); ++j) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  int passed = 0, failed = 0, proved = 0, conflicts = 0;
  double prove_secs = 0;
  std::map<std::string, int> outcomes;
  json rows = json::array();
  for (size_t k = 0; k < chosen.size(); ++k) {
    auto& r = lib->rules[chosen[k]];
    const auto& rc = done[k].numeric;
    double worst = 0;
    for (const auto& i : rc.instances) worst = std::max(worst, i.max_abs_diff);
    json row{{"rule", r.name}, {"ok", rc.ok}, {"instances", rc.instances.size()}, {"max_abs_diff", worst}, {"message", rc.message}};
    std::string proof_text;
    if (const auto& pr = done[k].proof) {
      // Proved rules whose numeric check fails point at an unsound axiom (or an executor bug):
      // they stay refuted and are reported as conflicts.
      prove_secs += pr->seconds;
      r.status = rules::combined_status(rc.ok, &*pr);
      r.proof_outcome = std::string(rules::outcome_name(pr->outcome));
      r.proof_reason = pr->message;  // for a proved rule: the method, when it was not the axioms alone
      outcomes[r.proof_outcome]++;
      proved += r.status == rules::VerifyStatus::kProved;
      conflicts += !rc.ok && pr->proved();
      row["proof"] = {{"outcome", rules::outcome_name(pr->outcome)}, {"seconds", pr->seconds}, {"message", pr->message}, {"notes", pr->notes}};
      char buf[64];
      std::snprintf(buf, sizeof buf, " (%.2fs)", pr->seconds);
      proof_text = ", " + std::string(!rc.ok && pr->proved() ? "CONFLICT: proved" : rules::outcome_name(pr->outcome)) + buf +
                   (pr->message.empty() ? "" : ": " + pr->message);
    } else if (rc.ok) {
      if (r.status == rules::VerifyStatus::kUnverified || r.status == rules::VerifyStatus::kRefuted) r.status = rules::VerifyStatus::kNumeric;
    } else {
      r.status = rules::VerifyStatus::kRefuted;
    }
    // A disproved rule is false although its numeric instances passed: it fails the run.
    const bool ok = rc.ok && r.status != rules::VerifyStatus::kRefuted;
    ok ? ++passed : ++failed;
    row["status"] = rules::status_name(r.status);
    rows.push_back(std::move(row));
    if (!g.json)
      std::printf("%-4s %-32s %zu instances, max diff %.2g%s%s%s\n", ok ? "OK" : "FAIL", r.name.c_str(), rc.instances.size(), worst,
                  rc.ok ? "" : ": ", rc.message.c_str(), proof_text.c_str());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.write) {
    auto st = rules::save_library(*lib, path);
    if (!st.ok()) return report_error(g, st.error());
  }
  const int total = passed + failed;
  if (g.json) {
    json doc{{"file", path}, {"passed", passed}, {"failed", failed}, {"seconds", secs}, {"jobs", o.jobs}, {"rules", rows}};
    if (o.prove)
      doc.update({{"proved", proved}, {"numeric_only", passed - proved}, {"refuted", failed}, {"conflicts", conflicts},
                  {"prove_seconds", prove_secs}, {"outcomes", outcomes}});
    std::cout << json_text(doc) << std::endl;
  } else if (o.prove) {
    std::printf("%d rules: %d proved, %d numerically verified only, %d refuted%s (%.1fs wall with %d jobs, %.1fs proving)\n", total, proved,
                passed - proved, failed,
                conflicts ? (", " + std::to_string(conflicts) + " proved but numerically refuted").c_str() : "", secs, o.jobs, prove_secs);
    std::printf("proof outcomes:");
    for (const auto& [k, v] : outcomes) std::printf(" %s %d", k.c_str(), v);
    std::printf("\n");
  } else {
    std::printf("%d passed, %d failed (%.1fs)\n", passed, failed, secs);
  }
  return failed == 0 && conflicts == 0 ? kOk : kVerificationFailed;
}

int cmd_rules_bench(const GlobalOptions& g, const RulesOptions& o) {
  using clock = std::chrono::steady_clock;
  auto secs = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
  std::string path;
  auto lib = load(o, &path);
  if (!lib) return report_error(g, lib.error());
  exec::Executor ex;
  json rows = json::array();
  int total_failures = 0;
  if (!g.json)
    std::printf("%-20s %6s %8s %12s %10s %12s %9s\n", "model", "nodes", "matches", "match-all ms", "apply/s", "checked", "failures");
  for (const auto& model : o.models) {
    onnxio::ImportOptions io;
    io.evaluator = &ex;
    auto graph = onnxio::import_model_file(model, io);
    if (!graph) return report_error(g, graph.error());
    // Time to find every match of every rule (median of repeats).
    std::vector<double> times;
    std::vector<std::pair<const rules::Rule*, rules::Match>> all;
    for (int k = 0; k < std::max(1, o.repeats); ++k) {
      all.clear();
      auto t0 = clock::now();
      const rules::GraphIndex index(*graph);
      for (const auto& r : lib->rules)
        for (auto& m : rules::find_matches(index, r)) all.emplace_back(&r, std::move(m));
      times.push_back(secs(t0) * 1e3);
    }
    std::sort(times.begin(), times.end());
    const double match_ms = times[times.size() / 2];
    // Applications per second over every match of the original graph.
    double apply_rate = 0;
    if (!all.empty()) {
      auto t0 = clock::now();
      size_t done = 0;
      while (done < std::max<size_t>(all.size(), 50)) {
        const auto& [r, m] = all[done % all.size()];
        auto res = rules::apply(*graph, *r, m);
        (void)res;
        ++done;
      }
      apply_rate = static_cast<double>(done) / secs(t0);
    }
    // Random chains of rewrites; the end of every chain is run against the original's outputs
    // (computed once), so the check costs one model run per `chain` applications.
    std::mt19937_64 rng(o.seed);
    const auto inputs = exec::random_inputs(*graph, o.seed);
    auto reference = ex.run(*graph, inputs);
    if (!reference) return report_error(g, reference.error());
    int checked = 0, failures = 0, dead_ends = 0, runs = 0;
    std::string first_failure;
    auto check = [&](const ir::Graph& cand, const std::string& what) {
      ++runs;
      auto out = ex.run(cand, inputs);
      std::string why = !out ? out.error().message : std::string();
      for (size_t k = 0; out && k < out->size() && why.empty(); ++k) {
        auto d = exec::diff_tensors(*(*out)[k], *(*reference)[k], 1e-4, 1e-3);
        if (!d.ok) why = "output " + std::to_string(k) + " differs by " + std::to_string(d.max_abs_diff);
      }
      if (why.empty()) return true;
      ++failures;
      if (first_failure.empty()) first_failure = what + ": " + why;
      return false;
    };
    ir::Graph cur = *graph;
    std::string last;
    int in_chain = 0;
    while (checked < o.applications && dead_ends < 3) {
      std::vector<std::pair<const rules::Rule*, rules::Match>> acts;
      const rules::GraphIndex index(cur);
      for (const auto& r : lib->rules)
        for (auto& m : rules::find_matches(index, r)) acts.emplace_back(&r, std::move(m));
      if (acts.empty() || in_chain >= o.chain) {
        if (in_chain > 0) check(cur, "chain ending with " + last);
        dead_ends += acts.empty();
        cur = *graph;
        in_chain = 0;
        continue;
      }
      dead_ends = 0;
      const auto& [r, m] = acts[rng() % acts.size()];
      auto next = rules::apply(cur, *r, m);
      ++checked;
      if (!next) {
        ++failures;
        if (first_failure.empty()) first_failure = r->name + " at " + m.str() + ": an offered match was rejected: " + next.error().message;
        continue;
      }
      last = r->name + " at " + m.str();
      cur = std::move(*next);
      ++in_chain;
    }
    if (in_chain > 0) check(cur, "chain ending with " + last);
    total_failures += failures;
    rows.push_back({{"model", model}, {"nodes", graph->size()}, {"matches", all.size()}, {"match_all_ms", match_ms},
                    {"applications_per_s", apply_rate}, {"applications", checked}, {"executor_runs", runs}, {"failures", failures}, {"first_failure", first_failure}});
    if (!g.json) {
      std::printf("%-20s %6zu %8zu %12.2f %10.0f %12d %9d\n", std::filesystem::path(model).stem().string().c_str(), graph->size(),
                  all.size(), match_ms, apply_rate, checked, failures);
      if (!first_failure.empty()) std::printf("  first failure: %s\n", first_failure.c_str());
    }
  }
  if (g.json) std::cout << json_text(json{{"file", path}, {"models", rows}}) << std::endl;
  return total_failures == 0 ? kOk : kVerificationFailed;
}

int cmd_rules_generate(const GlobalOptions& g, const RulesOptions& o) {
  namespace gen = rules::gen;
  auto tools = rules::tools_module("rules generate");
  if (!tools) return report_error(g, tools.error());
  gen::GeneratorOptions go;
  go.depth = o.depth;
  go.max_group = o.max_group;
  go.derivation_steps = o.derivation_steps;
  for (const auto& name : o.worlds) {
    auto w = (*tools)->world(name);
    if (!w) return report_error(g, Error::bad_input("unknown world '" + name + "' (conv, matmul)"));
    go.worlds.push_back(std::move(*w));
  }
  if (o.depth < 1 || o.depth > 4) return report_error(g, Error::bad_input("--depth must be 1..4"));
  // The library whose hand-written rules generated duplicates are checked against.
  std::string lib_path = !o.merge_into.empty() ? o.merge_into : !o.file.empty() ? o.file : rules::default_library_path();
  {
    std::vector<std::string> inputs;
    for (const auto& m : o.zoo)
      for (auto& f : onnxio::model_files(m)) inputs.push_back(std::move(f));
    // --merge-into is rewritten in place by design; --out must not be any file read.
    if (!o.merge_into.empty())
      if (auto st = check_output_path(o.merge_into, inputs, "--merge-into"); !st.ok()) return report_error(g, st.error());
    inputs.push_back(lib_path);
    if (!o.out.empty())
      if (auto st = check_output_path(o.out, inputs, "--out"); !st.ok()) return report_error(g, st.error());
  }
  rules::RuleLibrary lib;
  if (!o.merge_into.empty() || std::filesystem::exists(lib_path)) {
    auto loaded = rules::load_library(lib_path);
    if (!loaded) return report_error(g, loaded.error());
    lib = std::move(*loaded);
  }
  for (const auto& r : lib.rules)
    if (r.provenance != "generated") go.existing.push_back(&r);
  const bool tty = !g.json && isatty(fileno(stderr));
  std::string last_stage;
  go.progress = [&](const std::string& stage, size_t done, size_t total) {
    if (!tty) return;
    if (stage != last_stage && !last_stage.empty()) std::fprintf(stderr, "\n");
    last_stage = stage;
    if (total) std::fprintf(stderr, "\r%-28s %zu / %zu", stage.c_str(), done, total);
    else std::fprintf(stderr, "\r%-28s %zu", stage.c_str(), done);
    std::fflush(stderr);
  };
  auto res = (*tools)->generate(go);
  if (tty && !last_stage.empty()) std::fprintf(stderr, "\n");
  std::string cmd = "rlflow rules generate --depth " + std::to_string(o.depth) + " --derivation-steps " +
                    std::to_string(o.derivation_steps) + " --max-group " + std::to_string(o.max_group);
  for (const auto& w : o.worlds) cmd += " --world " + w;
  for (const auto& m : o.zoo) cmd += " --zoo " + m;
  res.info.command = cmd;

  // The default set: rules that simplify on their own, and rules matching the given models.
  {
    exec::Executor ex;
    std::vector<ir::Graph> graphs;
    for (const auto& m : o.zoo) {
      onnxio::ImportOptions io;
      io.evaluator = &ex;
      auto graph = onnxio::import_model_file(m, io);
      if (!graph) return report_error(g, graph.error());
      graphs.push_back(std::move(*graph));
    }
    const size_t in_default = (*tools)->mark_default_set(&res.rules, graphs);
    res.info.totals.push_back({"in the default set", static_cast<int64_t>(in_default)});
  }

  if (!o.out.empty()) {
    rules::RuleLibrary only;
    (*tools)->merge_generated(&only, res.rules, res.info);
    auto st = rules::save_library(only, o.out);
    if (!st.ok()) return report_error(g, st.error());
  }
  if (!o.merge_into.empty()) {
    (*tools)->merge_generated(&lib, res.rules, res.info);
    auto st = rules::save_library(lib, o.merge_into);
    if (!st.ok()) return report_error(g, st.error());
  }
  if (g.json) {
    json totals = json::object(), dropped = json::object(), names = json::array();
    for (const auto& [k, v] : res.info.totals) totals[k] = v;
    for (const auto& [k, v] : res.dropped) dropped[k] = v;
    for (const auto& r : res.rules) names.push_back(r.name);
    json phases = json::object();
    for (const auto& [k, v] : res.seconds) phases[k] = v;
    std::cout << json_text(json{{"depth", o.depth}, {"seconds", res.info.seconds}, {"phase_seconds", phases}, {"totals", totals}, {"dropped", dropped}, {"rules", names},
                      {"out", o.out}, {"merged_into", o.merge_into}})
              << std::endl;
    return kOk;
  }
  std::printf("%-30s %10s\n", "stage", "count");
  for (const auto& [k, v] : res.info.totals) std::printf("%-30s %10lld\n", k.c_str(), static_cast<long long>(v));
  std::printf("wall time %.1f s (depth %d)\n", res.info.seconds, o.depth);
  if (spdlog::get_level() <= spdlog::level::info)
  {
    for (const auto& [k, v] : res.dropped) std::printf("  dropped %6lld: %s\n", static_cast<long long>(v), k.c_str());
    for (const auto& [k, v] : res.seconds) std::printf("  %-34s %7.1f s\n", k.c_str(), v);
  }
  if (!o.out.empty()) std::printf("wrote %zu rules to %s\n", res.rules.size(), o.out.c_str());
  if (!o.merge_into.empty()) std::printf("merged %zu generated rules into %s (%zu rules in all)\n", res.rules.size(), o.merge_into.c_str(), lib.rules.size());
  return kOk;
}

void declare_rules(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<RulesOptions>();
  auto& rules = *o;
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
  out.push_back({c_rlist, [&g, o] { return cmd_rules_list(g, *o); }});
  out.push_back({c_rverify, [&g, o] { return cmd_rules_verify(g, *o); }});
  out.push_back({c_rbench, [&g, o] { return cmd_rules_bench(g, *o); }});
  out.push_back({c_rgen, [&g, o] { return cmd_rules_generate(g, *o); }});
}

}  // namespace rlflow::cli
