#include <chrono>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <random>

#include "commands.h"
#include "rlflow/cli/app.h"
#include "rlflow/exec/compare.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/rules/verify.h"

namespace rlflow::cli {

using json = nlohmann::json;

namespace {

Expected<rules::RuleLibrary> load(const RulesOptions& o, std::string* path) {
  *path = o.file.empty() ? rules::default_library_path() : o.file;
  return rules::load_library(*path);
}

}  // namespace

int cmd_rules_list(const GlobalOptions& g, const RulesOptions& o) {
  std::string path;
  auto lib = load(o, &path);
  if (!lib) return report_error(g, lib.error());
  std::map<std::string, int> by_status, by_provenance;
  int in_default = 0;
  json rows = json::array();
  for (const auto& r : lib->rules) {
    by_status[std::string(rules::status_name(r.status))]++;
    by_provenance[r.provenance]++;
    in_default += r.in_default_set;
    rows.push_back({{"name", r.name}, {"source_ops", r.source.nodes.size()}, {"target_ops", r.target.nodes.size()},
                    {"provenance", r.provenance}, {"status", rules::status_name(r.status)}, {"default", r.in_default_set},
                    {"root", ir::op_name(r.root_kind())}, {"conditional", !r.conditions.empty()}});
  }
  if (g.json) {
    std::cout << json{{"file", path}, {"rules", o.summary ? json::array() : rows}, {"total", lib->rules.size()},
                      {"by_status", by_status}, {"by_provenance", by_provenance}, {"default_set", in_default}}
                     .dump(2)
              << std::endl;
    return kOk;
  }
  if (!o.summary) {
    std::printf("%-32s %6s %6s  %-13s %-26s %s\n", "rule", "source", "target", "provenance", "status", "default");
    for (const auto& r : lib->rules)
      std::printf("%-32s %6zu %6zu  %-13s %-26s %s\n", r.name.c_str(), r.source.nodes.size(), r.target.nodes.size(),
                  r.provenance.c_str(), std::string(rules::status_name(r.status)).c_str(), r.in_default_set ? "yes" : "no");
  }
  std::printf("%s: %zu rules (", path.c_str(), lib->rules.size());
  bool first = true;
  for (const auto& [k, v] : by_provenance) std::printf("%s%d %s", first ? "" : ", ", v, k.c_str()), first = false;
  std::printf("); ");
  first = true;
  for (const auto& [k, v] : by_status) std::printf("%s%d %s", first ? "" : ", ", v, k.c_str()), first = false;
  std::printf("; %d in the default set\n", in_default);
  return kOk;
}

int cmd_rules_verify(const GlobalOptions& g, const RulesOptions& o) {
  std::string path;
  auto lib = load(o, &path);
  if (!lib) return report_error(g, lib.error());
  const auto t0 = std::chrono::steady_clock::now();
  int passed = 0, failed = 0;
  json rows = json::array();
  for (auto& r : lib->rules) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), r.name) == o.only.end()) continue;
    auto rc = rules::verify_numerically(r);
    double worst = 0;
    for (const auto& i : rc.instances) worst = std::max(worst, i.max_abs_diff);
    if (rc.ok) {
      ++passed;
      if (r.status == rules::VerifyStatus::kUnverified || r.status == rules::VerifyStatus::kRefuted) r.status = rules::VerifyStatus::kNumeric;
    } else {
      ++failed;
      r.status = rules::VerifyStatus::kRefuted;
    }
    rows.push_back({{"rule", r.name}, {"ok", rc.ok}, {"instances", rc.instances.size()}, {"max_abs_diff", worst}, {"message", rc.message}});
    if (!g.json)
      std::printf("%-4s %-32s %zu instances, max diff %.2g%s%s\n", rc.ok ? "OK" : "FAIL", r.name.c_str(), rc.instances.size(), worst,
                  rc.ok ? "" : ": ", rc.message.c_str());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.write) {
    auto st = rules::save_library(*lib, path);
    if (!st.ok()) return report_error(g, st.error());
  }
  if (g.json) std::cout << json{{"file", path}, {"passed", passed}, {"failed", failed}, {"seconds", secs}, {"rules", rows}}.dump(2) << std::endl;
  else std::printf("%d passed, %d failed (%.1fs)\n", passed, failed, secs);
  return failed == 0 ? kOk : kVerificationFailed;
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
      for (const auto& r : lib->rules)
        for (auto& m : rules::find_matches(*graph, r)) all.emplace_back(&r, std::move(m));
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
      for (const auto& r : lib->rules)
        for (auto& m : rules::find_matches(cur, r)) acts.emplace_back(&r, std::move(m));
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
  if (g.json) std::cout << json{{"file", path}, {"models", rows}}.dump(2) << std::endl;
  return total_failures == 0 ? kOk : kVerificationFailed;
}

}  // namespace rlflow::cli
