#include "rlflow/pipeline/rules.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "rlflow/exec/compare.h"
#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/match.h"
#include "rlflow/rules/tools_module.h"
#include "rlflow/util/file_io.h"

namespace rlflow::pipeline {

using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string library_path(const std::string& file) { return file.empty() ? rules::default_library_path() : file; }

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

void print_counts(std::FILE* out, const char* label, const std::map<std::string, int>& m) {
  std::fprintf(out, "%s", label);
  bool first = true;
  for (const auto& [k, v] : m) std::fprintf(out, "%s%d %s", first ? " " : ", ", v, k.c_str()), first = false;
  std::fprintf(out, "\n");
}

}  // namespace

// ---- rules list ----

Expected<RulesListReport> list_rules(const RulesListOptions& o) {
  RulesListReport r;
  r.file = library_path(o.file);
  r.summary = o.summary;
  auto lib = rules::load_library(r.file);
  if (!lib) return lib.error();
  r.library = std::move(*lib);
  for (const auto& rule : r.library.rules) {
    r.by_status[std::string(rules::status_name(rule.status))]++;
    r.by_provenance[rule.provenance]++;
    r.default_set += rule.in_default_set;
    r.default_set_in_use += rule.in_default_set && rule.status == rules::VerifyStatus::kProved;
    const std::string outcome = rule.status == rules::VerifyStatus::kRefuted ? "refuted"
                                : rule.proof_outcome.empty()                 ? "never attempted"
                                                                             : rule.proof_outcome;
    r.by_proof[outcome]++;
    if (rule.in_default_set) r.default_by_proof[outcome]++;
    if (!rule.proof_outcome.empty() && rule.proof_outcome != "proved") r.unproved_reasons[proof_reason_kind(rule)]++;
  }
  return r;
}

json RulesListReport::to_json() const {
  json rows = json::array();
  if (!summary)
    for (const auto& r : library.rules)
      rows.push_back({{"name", r.name}, {"source_ops", r.source.nodes.size()}, {"target_ops", r.target.nodes.size()},
                      {"provenance", r.provenance}, {"status", rules::status_name(r.status)}, {"default", r.in_default_set},
                      {"root", ir::op_name(r.root_kind())}, {"conditional", !r.conditions.empty()},
                      {"proof", r.proof_outcome.empty() ? json(nullptr) : json{{"outcome", r.proof_outcome}, {"reason", r.proof_reason}}}});
  json gen = nullptr;
  if (!library.generator.empty()) {
    json totals = json::object();
    for (const auto& [stage, n] : library.generator.totals) totals[stage] = n;
    gen = {{"depth", library.generator.depth}, {"seconds", library.generator.seconds}, {"command", library.generator.command}, {"totals", totals}};
  }
  return {{"file", file}, {"rules", rows}, {"total", library.rules.size()}, {"by_status", by_status}, {"by_provenance", by_provenance},
          {"default_set", default_set}, {"default_set_in_use", default_set_in_use}, {"generator", gen}, {"by_proof", by_proof},
          {"default_set_by_proof", default_by_proof}, {"unproved_reasons", unproved_reasons}};
}

void RulesListReport::print(std::FILE* out) const {
  if (!summary) {
    std::fprintf(out, "%-32s %6s %6s  %-13s %-26s %-7s %s\n", "rule", "source", "target", "provenance", "status", "default", "proof");
    for (const auto& r : library.rules)
      std::fprintf(out, "%-32s %6zu %6zu  %-13s %-26s %-7s %s%s%s\n", r.name.c_str(), r.source.nodes.size(), r.target.nodes.size(),
                   r.provenance.c_str(), std::string(rules::status_name(r.status)).c_str(), r.in_default_set ? "yes" : "no",
                   r.proof_outcome.empty() ? "-" : r.proof_outcome.c_str(), r.proof_reason.empty() ? "" : ": ", r.proof_reason.c_str());
  }
  std::fprintf(out, "%s: %zu rules (", file.c_str(), library.rules.size());
  bool first = true;
  for (const auto& [k, v] : by_provenance) std::fprintf(out, "%s%d %s", first ? "" : ", ", v, k.c_str()), first = false;
  std::fprintf(out, "); ");
  first = true;
  for (const auto& [k, v] : by_status) std::fprintf(out, "%s%d %s", first ? "" : ", ", v, k.c_str()), first = false;
  std::fprintf(out, "; %d marked for the default set, of which %d proved and in use (unproved ones stay out; --all-rules adds them)\n",
               default_set, default_set_in_use);
  print_counts(out, "proofs (rules verify --prove --write):", by_proof);
  print_counts(out, "proofs of the rules marked for the default set:", default_by_proof);
  if (!unproved_reasons.empty()) {
    std::vector<std::pair<int, std::string>> top;
    for (const auto& [k, v] : unproved_reasons) top.emplace_back(v, k);
    std::sort(top.rbegin(), top.rend());
    std::fprintf(out, "why the others are not proved:\n");
    for (const auto& [v, k] : top) std::fprintf(out, "  %6d  %s\n", v, k.c_str());
  }
  if (!library.generator.empty()) {
    std::fprintf(out, "generator (depth %d, %.0f s%s%s):\n", library.generator.depth, library.generator.seconds,
                 library.generator.command.empty() ? "" : ", ", library.generator.command.c_str());
    for (const auto& [stage, n] : library.generator.totals) std::fprintf(out, "  %-28s %10lld\n", stage.c_str(), static_cast<long long>(n));
  }
}

// ---- rules verify ----

Expected<RulesVerifyReport> verify_rules(const RulesVerifyOptions& o) {
  auto module = rules::tools_module("rules verify");
  if (!module) return module.error();
  const rules::ToolsModule* tools = *module;
  RulesVerifyReport report;
  report.file = library_path(o.file);
  report.prove = o.prove;
  report.jobs = o.jobs;
  auto loaded = rules::load_library(report.file);
  if (!loaded) return loaded.error();
  rules::RuleLibrary& lib = *loaded;
  const auto t0 = Clock::now();
  rules::ProofOptions po;
  po.timeout_s = o.prove_timeout;
  po.dump_smt2 = o.dump_smt2;
  if (o.prove && !o.dump_smt2.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.dump_smt2, ec);
    if (ec) return Error::bad_input("--dump-smt2 " + o.dump_smt2 + ": " + ec.message());
  }
  // The rules to check: the named ones, else all; `sample` of them drawn with `seed`.
  std::vector<size_t> chosen;
  for (size_t i = 0; i < lib.rules.size(); ++i)
    if (o.only.empty() || std::find(o.only.begin(), o.only.end(), lib.rules[i].name) != o.only.end()) chosen.push_back(i);
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
      const auto& r = lib.rules[chosen[k]];
      done[k].numeric = tools->verify_numerically(r);
      if (o.prove) done[k].proof = tools->prove_rule_isolated(r, po);
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < std::min<int>(o.jobs, static_cast<int>(chosen.size())); ++j) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();

  for (size_t k = 0; k < chosen.size(); ++k) {
    auto& r = lib.rules[chosen[k]];
    const auto& rc = done[k].numeric;
    RuleVerdict v;
    v.rule = r.name;
    v.numeric_ok = rc.ok;
    v.instances = rc.instances.size();
    for (const auto& i : rc.instances) v.max_abs_diff = std::max(v.max_abs_diff, i.max_abs_diff);
    v.message = rc.message;
    v.proof = done[k].proof;
    if (const auto& pr = v.proof) {
      // A proved rule whose numeric check fails points at an unsound axiom (or an executor bug): it
      // stays refuted and is reported as a conflict.
      report.prove_seconds += pr->seconds;
      r.status = rules::combined_status(rc.ok, &*pr);
      r.proof_outcome = std::string(rules::outcome_name(pr->outcome));
      r.proof_reason = pr->message;  // for a proved rule: the method, when it was not the axioms alone
      report.outcomes[r.proof_outcome]++;
      report.proved += r.status == rules::VerifyStatus::kProved;
    } else if (rc.ok) {
      if (r.status == rules::VerifyStatus::kUnverified || r.status == rules::VerifyStatus::kRefuted) r.status = rules::VerifyStatus::kNumeric;
    } else {
      r.status = rules::VerifyStatus::kRefuted;
    }
    v.status = r.status;
    report.conflicts += v.conflict();
    v.ok() ? ++report.passed : ++report.failed;
    report.rules.push_back(std::move(v));
  }
  report.seconds = seconds_since(t0);
  if (o.write) {
    RLFLOW_TRY_STATUS(rules::save_library(lib, report.file));
    report.written = true;
  }
  return report;
}

json RulesVerifyReport::to_json() const {
  json rows = json::array();
  for (const auto& v : rules) {
    json row{{"rule", v.rule}, {"ok", v.numeric_ok}, {"instances", v.instances}, {"max_abs_diff", v.max_abs_diff}, {"message", v.message}};
    if (v.proof)
      row["proof"] = {{"outcome", rules::outcome_name(v.proof->outcome)}, {"seconds", v.proof->seconds}, {"message", v.proof->message}, {"notes", v.proof->notes}};
    row["status"] = rules::status_name(v.status);
    rows.push_back(std::move(row));
  }
  json doc{{"file", file}, {"passed", passed}, {"failed", failed}, {"seconds", seconds}, {"jobs", jobs}, {"rules", rows}};
  if (prove)
    doc.update({{"proved", proved}, {"numeric_only", passed - proved}, {"refuted", failed}, {"conflicts", conflicts},
                {"prove_seconds", prove_seconds}, {"outcomes", outcomes}});
  return doc;
}

void RulesVerifyReport::print(std::FILE* out) const {
  for (const auto& v : rules) {
    std::string proof_text;
    if (const auto& pr = v.proof) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " (%.2fs)", pr->seconds);
      proof_text = ", " + std::string(v.conflict() ? "CONFLICT: proved" : rules::outcome_name(pr->outcome)) + buf +
                   (pr->message.empty() ? "" : ": " + pr->message);
    }
    std::fprintf(out, "%-4s %-32s %zu instances, max diff %.2g%s%s%s\n", v.ok() ? "OK" : "FAIL", v.rule.c_str(), v.instances, v.max_abs_diff,
                 v.numeric_ok ? "" : ": ", v.message.c_str(), proof_text.c_str());
  }
  if (prove) {
    const std::string conflict_text = conflicts ? ", " + std::to_string(conflicts) + " proved but numerically refuted" : "";
    std::fprintf(out, "%d rules: %d proved, %d numerically verified only, %d refuted%s (%.1fs wall with %d jobs, %.1fs proving)\n", passed + failed,
                 proved, passed - proved, failed, conflict_text.c_str(), seconds, jobs, prove_seconds);
    std::fprintf(out, "proof outcomes:");
    for (const auto& [k, v] : outcomes) std::fprintf(out, " %s %d", k.c_str(), v);
    std::fprintf(out, "\n");
  } else {
    std::fprintf(out, "%d passed, %d failed (%.1fs)\n", passed, failed, seconds);
  }
}

// ---- rules bench ----

namespace {

Expected<RulesBenchRow> bench_model(const std::string& model, const rules::RuleLibrary& lib, const RulesBenchOptions& o, exec::Executor& ex) {
  onnxio::ImportOptions io;
  io.evaluator = &ex;
  auto imported = onnxio::import_model_file(model, io);
  if (!imported) return imported.error();
  const ir::Graph& graph = *imported;
  RulesBenchRow row;
  row.model = model;
  row.nodes = graph.size();
  // Time to find every match of every rule (median of repeats).
  std::vector<double> times;
  std::vector<std::pair<const rules::Rule*, rules::Match>> all;
  for (int k = 0; k < std::max(1, o.repeats); ++k) {
    all.clear();
    const auto t0 = Clock::now();
    const rules::GraphIndex index(graph);
    for (const auto& r : lib.rules)
      for (auto& m : rules::find_matches(index, r)) all.emplace_back(&r, std::move(m));
    times.push_back(seconds_since(t0) * 1e3);
  }
  std::sort(times.begin(), times.end());
  row.match_all_ms = times[times.size() / 2];
  row.matches = all.size();
  // Applications per second over every match of the original graph.
  if (!all.empty()) {
    const auto t0 = Clock::now();
    size_t done = 0;
    while (done < std::max<size_t>(all.size(), 50)) {
      const auto& [r, m] = all[done % all.size()];
      auto res = rules::apply(graph, *r, m);
      (void)res;
      ++done;
    }
    row.applications_per_s = static_cast<double>(done) / seconds_since(t0);
  }
  // Random chains of rewrites; the end of every chain is run against the original's outputs
  // (computed once), so the check costs one model run per `chain` applications.
  std::mt19937_64 rng(o.seed);
  const auto inputs = exec::random_inputs(graph, o.seed);
  auto ran = ex.run(graph, inputs);
  if (!ran) return ran.error();
  const auto& reference = *ran;
  auto check = [&](const ir::Graph& cand, const std::string& what) {
    ++row.executor_runs;
    auto out = ex.run(cand, inputs);
    std::string why = !out ? out.error().message : std::string();
    for (size_t k = 0; out && k < out->size() && why.empty(); ++k) {
      auto d = exec::diff_tensors(*(*out)[k], *reference[k], 1e-4, 1e-3);
      if (!d.ok) why = "output " + std::to_string(k) + " differs by " + std::to_string(d.max_abs_diff);
    }
    if (why.empty()) return;
    ++row.failures;
    if (row.first_failure.empty()) row.first_failure = what + ": " + why;
  };
  ir::Graph cur = graph;
  std::string last;
  int in_chain = 0, dead_ends = 0;
  while (row.applications < o.applications && dead_ends < 3) {
    std::vector<std::pair<const rules::Rule*, rules::Match>> acts;
    const rules::GraphIndex index(cur);
    for (const auto& r : lib.rules)
      for (auto& m : rules::find_matches(index, r)) acts.emplace_back(&r, std::move(m));
    if (acts.empty() || in_chain >= o.chain) {
      if (in_chain > 0) check(cur, "chain ending with " + last);
      dead_ends += acts.empty();
      cur = graph;
      in_chain = 0;
      continue;
    }
    dead_ends = 0;
    const auto& [r, m] = acts[rng() % acts.size()];
    auto next = rules::apply(cur, *r, m);
    ++row.applications;
    if (!next) {
      ++row.failures;
      if (row.first_failure.empty()) row.first_failure = r->name + " at " + m.str() + ": an offered match was rejected: " + next.error().message;
      continue;
    }
    last = r->name + " at " + m.str();
    cur = std::move(*next);
    ++in_chain;
  }
  if (in_chain > 0) check(cur, "chain ending with " + last);
  return row;
}

}  // namespace

Expected<RulesBenchReport> bench_rules(const RulesBenchOptions& o) {
  RulesBenchReport report;
  report.file = library_path(o.file);
  auto lib = rules::load_library(report.file);
  if (!lib) return lib.error();
  exec::Executor ex;
  for (const auto& model : o.models) {
    auto row = bench_model(model, *lib, o, ex);
    if (!row) return row.error();
    report.models.push_back(std::move(*row));
  }
  return report;
}

int RulesBenchReport::failures() const {
  int n = 0;
  for (const auto& m : models) n += m.failures;
  return n;
}

json RulesBenchReport::to_json() const {
  json rows = json::array();
  for (const auto& m : models)
    rows.push_back({{"model", m.model}, {"nodes", m.nodes}, {"matches", m.matches}, {"match_all_ms", m.match_all_ms},
                    {"applications_per_s", m.applications_per_s}, {"applications", m.applications}, {"executor_runs", m.executor_runs},
                    {"failures", m.failures}, {"first_failure", m.first_failure}});
  return {{"file", file}, {"models", rows}};
}

void RulesBenchReport::print(std::FILE* out) const {
  std::fprintf(out, "%-20s %6s %8s %12s %10s %12s %9s\n", "model", "nodes", "matches", "match-all ms", "apply/s", "checked", "failures");
  for (const auto& m : models) {
    std::fprintf(out, "%-20s %6zu %8zu %12.2f %10.0f %12d %9d\n", std::filesystem::path(m.model).stem().string().c_str(), m.nodes, m.matches,
                 m.match_all_ms, m.applications_per_s, m.applications, m.failures);
    if (!m.first_failure.empty()) std::fprintf(out, "  first failure: %s\n", m.first_failure.c_str());
  }
}

// ---- rules generate ----

Expected<RulesGenerateReport> generate_rules(const RulesGenerateOptions& o, const RulesGenerateHooks& hooks) {
  namespace gen = rules::gen;
  auto module = rules::tools_module("rules generate");
  if (!module) return module.error();
  const rules::ToolsModule* tools = *module;
  gen::GeneratorOptions go;
  go.depth = o.depth;
  go.max_group = o.max_group;
  go.derivation_steps = o.derivation_steps;
  for (const auto& name : o.worlds) {
    auto w = tools->world(name);
    if (!w) return Error::bad_input("unknown world '" + name + "' (conv, matmul)");
    go.worlds.push_back(std::move(*w));
  }
  if (o.depth < 1 || o.depth > 4) return Error::bad_input("--depth must be 1..4");
  // The library whose hand-written rules generated duplicates are checked against.
  const std::string lib_path = !o.merge_into.empty() ? o.merge_into : library_path(o.file);
  {
    std::vector<std::string> inputs;
    for (const auto& m : o.zoo)
      for (auto& f : onnxio::model_files(m)) inputs.push_back(std::move(f));
    // --merge-into is rewritten in place by design; --out must not be any file read.
    if (!o.merge_into.empty()) RLFLOW_TRY_STATUS(check_output_path(o.merge_into, inputs, "--merge-into"));
    inputs.push_back(lib_path);
    if (!o.out.empty()) RLFLOW_TRY_STATUS(check_output_path(o.out, inputs, "--out"));
  }
  rules::RuleLibrary lib;
  if (!o.merge_into.empty() || std::filesystem::exists(lib_path)) {
    auto loaded = rules::load_library(lib_path);
    if (!loaded) return loaded.error();
    lib = std::move(*loaded);
  }
  for (const auto& r : lib.rules)
    if (r.provenance != "generated") go.existing.push_back(&r);
  go.progress = hooks.progress;
  auto res = tools->generate(go);
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
      if (!graph) return graph.error();
      graphs.push_back(std::move(*graph));
    }
    const size_t in_default = tools->mark_default_set(&res.rules, graphs);
    res.info.totals.push_back({"in the default set", static_cast<int64_t>(in_default)});
  }

  RulesGenerateReport report;
  report.depth = o.depth;
  if (!o.out.empty()) {
    rules::RuleLibrary only;
    tools->merge_generated(&only, res.rules, res.info);
    RLFLOW_TRY_STATUS(rules::save_library(only, o.out));
    report.out = o.out;
  }
  if (!o.merge_into.empty()) {
    tools->merge_generated(&lib, res.rules, res.info);
    RLFLOW_TRY_STATUS(rules::save_library(lib, o.merge_into));
    report.merged_into = o.merge_into;
    report.merged_total = lib.rules.size();
  }
  for (const auto& r : res.rules) report.rules.push_back(r.name);
  report.seconds = res.info.seconds;
  report.totals = std::move(res.info.totals);
  report.dropped = std::move(res.dropped);
  report.phase_seconds = std::move(res.seconds);
  return report;
}

json RulesGenerateReport::to_json() const {
  json t = json::object(), d = json::object(), phases = json::object();
  for (const auto& [k, v] : totals) t[k] = v;
  for (const auto& [k, v] : dropped) d[k] = v;
  for (const auto& [k, v] : phase_seconds) phases[k] = v;
  return {{"depth", depth}, {"seconds", seconds}, {"phase_seconds", phases}, {"totals", t}, {"dropped", d}, {"rules", rules},
          {"out", out}, {"merged_into", merged_into}};
}

void RulesGenerateReport::print(std::FILE* f) const {
  std::fprintf(f, "%-30s %10s\n", "stage", "count");
  for (const auto& [k, v] : totals) std::fprintf(f, "%-30s %10lld\n", k.c_str(), static_cast<long long>(v));
  std::fprintf(f, "wall time %.1f s (depth %d)\n", seconds, depth);
  if (details) {
    for (const auto& [k, v] : dropped) std::fprintf(f, "  dropped %6lld: %s\n", static_cast<long long>(v), k.c_str());
    for (const auto& [k, v] : phase_seconds) std::fprintf(f, "  %-34s %7.1f s\n", k.c_str(), v);
  }
  if (!out.empty()) std::fprintf(f, "wrote %zu rules to %s\n", rules.size(), out.c_str());
  if (!merged_into.empty()) std::fprintf(f, "merged %zu generated rules into %s (%zu rules in all)\n", rules.size(), merged_into.c_str(), merged_total);
}

}  // namespace rlflow::pipeline
