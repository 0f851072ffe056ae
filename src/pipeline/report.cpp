// OptimiseReport as JSON (`optimise --json`) and as text.
#include <string>

#include "rlflow/pipeline/optimise.h"
#include "rlflow/pipeline/summary.h"
#include "rlflow/search/report.h"

namespace rlflow::pipeline {

using json = nlohmann::json;

namespace {

std::string dims_str(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [name, size] : dims) s += (s.empty() ? "" : " ") + name + "=" + std::to_string(size);
  return s;
}

json composites_json(const ir::CompositeStats& c) {
  json j = json::object();
  for (const auto& key : ir::fusion_count_keys()) j[key] = c.count(key);
  j["removed_nodes"] = c.removed_nodes;
  return j;
}

// Per fusion: chains seen, fused, and each reason a chain was refused with how many and (up to five)
// of their root nodes.
json fusion_attempts_json(const std::map<std::string, OptimiseReport::FusionAttempts>& attempts) {
  json j = json::object();
  for (const auto& [name, a] : attempts) {
    json refused = json::array();
    for (const auto& [why, roots] : a.refused)
      refused.push_back({{"why", why}, {"count", roots.size()},
                         {"nodes", std::vector<std::string>(roots.begin(), roots.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(roots.size(), 5)))}});
    j[name] = {{"seen", a.seen()}, {"fused", a.fused}, {"refused", std::move(refused)}};
  }
  return j;
}

json measurement_json(const Measurement& m) {
  return {{"before_ms", m.before_ms}, {"after_ms", m.after_ms}, {"speedup", m.speedup}, {"speedup_ci", {m.ci_lo, m.ci_hi}},
          {"ci_coverage", m.ci_coverage}, {"rounds", m.rounds}, {"accepted", m.accepted}, {"decided", m.decided},
          {"before_samples_ms", m.before_samples_ms}, {"after_samples_ms", m.after_samples_ms}};
}

json change_json(const ChangeRecord& c, json j) {
  json replaced = json::array();
  for (const auto& n : c.replaced) replaced.push_back({{"name", n.name}, {"op", n.op}});
  j["replaced"] = std::move(replaced);
  if (!c.node.empty()) j["node"] = c.node;
  if (!c.op.empty()) j["op"] = c.op;
  if (c.cost_before_ms) j["cost_before_ms"] = *c.cost_before_ms;
  if (c.cost_after_ms) j["cost_after_ms"] = *c.cost_after_ms;
  return j;
}

json verification_json(const VerificationReport& v) {
  json j{{"enabled", v.enabled}};
  if (v.method.empty()) return j;
  j["method"] = v.method;
  j["ok"] = v.ok;
  if (v.method == "structural") {
    j["note"] = v.note;
    return j;
  }
  j["max_abs_diff"] = v.max_abs_diff;
  j["atol"] = v.atol;
  j["rtol"] = v.rtol;
  if (v.widened) j["tolerance_note"] = "widened for half-precision outputs";
  j["seed"] = v.seed;
  if (v.onnxruntime_checked >= 0) j["onnxruntime_checked"] = v.onnxruntime_checked;
  if (!v.bindings.empty()) {
    j["bindings"] = json::array();
    for (const auto& b : v.bindings) {
      json e{{"label", b.label}, {"sizes", b.sizes}, {"checked", b.checked}};
      if (b.checked) e["max_abs_diff"] = b.max_abs_diff;
      if (!b.note.empty()) e["note"] = b.note;
      j["bindings"].push_back(std::move(e));
    }
  }
  return j;
}

json cost_json(const CostReport& c) {
  json j{{"model", c.model}, {"before_ms", c.before_ms}, {"after_ms", c.after_ms}, {"speedup", c.speedup()}, {"predicted", true},
         {"known_error", c.known_error}, {"search_after_ms", c.search_after_ms}, {"describes", "the file written, re-imported"}};
  if (!c.profile.empty()) j["profile"] = c.profile;
  if (!c.by_op_before.empty() || !c.by_op_after.empty()) j["by_op"] = {{"before", c.by_op_before}, {"after", c.by_op_after}};
  if (c.table)
    j["table"] = {{"path", c.table->table}, {"device", c.table->device}, {"entries", c.table->entries}, {"hits", c.table->hits},
                  {"misses", c.table->misses}};
  return j;
}

// The measured candidates; null when none was measured.
json measured_json(const OptimiseReport& r) {
  json tried = json::array();
  const Measurement* shown = nullptr;  // the written candidate's, else the first measured
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    json e{{"candidate", c.label}, {"steps", c.steps}, {"predicted_ms", c.predicted_ms}, {"verdict", verdict_name(c.verdict)}};
    if (c.written_ms) e["written_ms"] = *c.written_ms;
    if (c.measured_decode) {
      e["measured_decode"] = measurement_json(*c.measured_decode);
      e["measured_decode"]["binding"] = c.decode_binding;
    }
    if (c.measured) e["measured"] = measurement_json(*c.measured);
    if (c.measured_vs_chosen) {
      e["measured_vs_chosen"] = measurement_json(*c.measured_vs_chosen);
      e["measured_vs_chosen"]["against"] = c.vs_chosen;
      e["measured_vs_chosen"]["binding"] = c.vs_chosen_binding;
    }
    // The headline figure: the representative sizes', or the short binding's under --deploy decode.
    if (const auto* mc = c.measured ? &*c.measured : c.measured_decode ? &*c.measured_decode : nullptr; mc && (!shown || r.chosen == i)) shown = mc;
    if (c.verdict == Verdict::kVerificationFailed) e["verification_failed"] = c.why;
    else if (c.verdict != Verdict::kWritten) e["why"] = c.why;
    tried.push_back(e);
  }
  if (!shown) return nullptr;
  json m{{"target", r.target}, {"runner", r.measure_runner}, {"min_lower_bound", bench::kMinSpeedupLowerBound}, {"deploy", r.deploy},
         {"candidates", tried}, {"decision", r.chosen ? "rewritten graph written" : "input graph written"}};
  m.update(measurement_json(*shown));
  return m;
}

}  // namespace

json OptimiseReport::to_json() const {
  std::map<std::string, int> applied;
  json steps_json = json::array();
  for (size_t k = 0; k < steps.size(); ++k) {
    const auto& s = steps[k];
    applied[s.rule]++;
    json step{{"rule", s.rule}, {"nodes", s.nodes}};
    if (k < rewrites.size()) step = change_json(rewrites[k], std::move(step));
    steps_json.push_back(std::move(step));
  }
  json fusions_json = json::array();
  for (const auto& f : fusions) fusions_json.push_back(change_json(f, {{"fusion", f.what}}));
  json search_json = nullptr;
  if (search_result) {
    search_json = {{"strategy", search}, {"rules", search_rules}};
    if (!agent_note.empty()) search_json["agent_warning"] = agent_note;
    search_json.update(search::report_json(*search_result));
  }
  json j{{"ok", true},
         {"model", model},
         {"output", output},
         {"search", search},
         {"target", target},
         {"before", summary_json(before)},
         {"after", summary_json(after)},
         {"verification", verification_json(verification)},
         {"cost", cost ? cost_json(*cost) : json(nullptr)},
         {"search_report", search_json},
         {"rules_applied", applied},
         {"composites", composites_json(composites)},
         {"fusions", fusions_json},
         {"fusion_attempts", fusion_attempts_json(fusion_attempts)},
         {"steps", steps_json},
         {"time_s", {{"import", time.import}, {"search", time.search}, {"export", time.write}, {"verify", time.verify},
                     {"measure", time.measure}, {"total", time.total}}},
         {"opset", {{"input", input_opset}, {"output", output_opset}, {"why", opset_reason}}}};
  if (target_info)
    j["target_info"] = {{"name", target_info->name}, {"runtime", target_info->runtime}, {"device", target_info->device},
                        {"cost_model", target_info->cost_model}};
  if (input_ir_version) j["ir_version"] = {{"input", input_ir_version}, {"output", output_ir_version}};
  if (!dynamic_dims.empty()) j["dynamic_dims"] = dynamic_dims;
  if (!fixed_dims.empty()) j["fixed_dims"] = fixed_dims;
  if (!min_dims.empty()) j["min_dims"] = min_dims;
  if (auto m = measured_json(*this); !m.is_null()) j["measured"] = m;
  else if (rewritten) j["predicted"] = {{"reason", not_measured}, {"cost_model", cost->model}, {"known_error", cost->known_error}};
  if (!kept_input.empty()) j["kept_input"] = kept_input;
  return j;
}

void OptimiseReport::print(std::FILE* out) const {
  std::fprintf(out, "rlflow optimise %s -> %s  (search: %s, target: %s)\n", model.c_str(), output.c_str(), search.c_str(), target.c_str());
  if (!dynamic_dims.empty()) {
    std::string also;
    for (const auto& b : verification.bindings)
      also += (also.empty() ? ", verified also at " : "; ") + b.label + " (" + dims_str(b.sizes) + (b.checked ? "" : ": not checked, " + b.note) + ")";
    std::fprintf(out, "dynamic dims kept in the output; optimised at %s%s\n", dims_str(dynamic_dims).c_str(), also.c_str());
  }
  if (!fixed_dims.empty()) std::fprintf(out, "fixed (static in the output): %s\n", dims_str(fixed_dims).c_str());
  print_op_table(out, before, &after);
  if (search_result && cost) {
    const auto& r = search_result->report;
    std::fprintf(out, "predicted by the %s cost model: %.4f ms -> %.4f ms, %.3fx (a prediction, not a measurement)\n", cost->model.c_str(),
                 cost->before_ms, cost->after_ms, cost->speedup());
    std::fprintf(out, "search %s: %lld graphs expanded, %lld unique, %.2fs, stopped: %s\n", search.c_str(), static_cast<long long>(r.expanded),
                 static_cast<long long>(r.unique_graphs), time.search, std::string(search::stop_reason_name(search_result->stop)).c_str());
    const auto refused = search::rejections_json(r.rejections);
    if (!refused.empty()) {
      std::fprintf(out, "matches refused:");
      for (const auto& [why, n] : refused.items()) std::fprintf(out, " %s %lld", why.c_str(), static_cast<long long>(n.get<int64_t>()));
      std::fprintf(out, "\n");
    }
    if (chosen && composites.total() > 0)
      std::fprintf(out, "composites fused: %s (%d nodes removed)\n", composites.summary().c_str(), composites.removed_nodes);
    for (const auto& [name, a] : fusion_attempts)
      for (const auto& [why, roots] : a.refused)
        std::fprintf(out, "fusion %s: %d of %d chains not fused: %s\n", name.c_str(), static_cast<int>(roots.size()), a.seen(), why.c_str());
    std::map<std::string, int> applied;
    for (const auto& s : steps) applied[s.rule]++;
    if (applied.empty()) std::fprintf(out, "rules applied: none\n");
    else {
      std::fprintf(out, "rules applied:");
      for (const auto& [rule, n] : applied) std::fprintf(out, " %s x%d", rule.c_str(), n);
      std::fprintf(out, "\n");
    }
  }
  const CandidateReport* shown_c = chosen ? &candidates[*chosen] : candidates.empty() ? nullptr : &candidates.front();
  const Measurement* m = shown_c && shown_c->measured ? &*shown_c->measured : nullptr;
  const Measurement* d = shown_c && shown_c->measured_decode ? &*shown_c->measured_decode : nullptr;
  if (m || d) {
    if (m)
      std::fprintf(out, "measured on %s (%s, %d rounds, interleaved): %.3f ms -> %.3f ms, speedup %.3fx [95%% CI %.3f, %.3f]\n",
                   target.c_str(), m->runner.c_str(), m->rounds, m->before_ms, m->after_ms, m->speedup, m->ci_lo, m->ci_hi);
    if (d)
      std::fprintf(out, "measured at the %s (%d rounds): %.3f ms -> %.3f ms, speedup %.3fx [95%% CI %.3f, %.3f]\n",
                   shown_c->decode_binding.c_str(), d->rounds, d->before_ms, d->after_ms, d->speedup, d->ci_lo, d->ci_hi);
  } else if (rewritten) {
    std::fprintf(out, "not measured (%s): the speedup above is predicted; known error: %s\n", not_measured.c_str(), cost->known_error.c_str());
  }
  if (!kept_input.empty()) std::fprintf(out, "kept the input graph: %s\n", kept_input.c_str());
  std::fprintf(out, "opset: %lld -> %lld (%s)\n", static_cast<long long>(input_opset), static_cast<long long>(output_opset), opset_reason.c_str());
  if (input_ir_version)
    std::fprintf(out, "IR version: %lld -> %lld (the newest rlflow's ONNX library knows; the input uses nothing newer)\n",
                 static_cast<long long>(input_ir_version), static_cast<long long>(output_ir_version));
  if (verification.enabled) {
    if (verification.method == "structural")
      std::fprintf(out, "verified: structurally identical to the original (%s)\n", verification.note.c_str());
    else
      std::fprintf(out, "verified: max abs diff %.3g against the original (atol %g, rtol %g, seed %llu)%s\n", verification.max_abs_diff,
                   verification.atol, verification.rtol, static_cast<unsigned long long>(verification.seed),
                   verification.onnxruntime_checked > 0
                       ? ("; and in onnxruntime at " + std::to_string(verification.onnxruntime_checked) + " sizes").c_str()
                       : "");
  } else {
    std::fprintf(out, "not verified (--no-verify)\n");
  }
  std::fprintf(out, "time: %.2fs (import %.2fs, search %.2fs, export %.2fs, verify %.2fs, measure %.2fs)\n", time.total, time.import,
               time.search, time.write, time.verify, time.measure);
}

}  // namespace rlflow::pipeline
