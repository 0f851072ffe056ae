#include "rlflow/search/report.h"

namespace rlflow::search {

using json = nlohmann::json;

json rejections_json(const rules::RejectionCounts& counts) {
  json j = json::object();
  for (size_t i = 1; i < counts.size(); ++i)
    if (counts[i] > 0) j[std::string(rules::rejection_name(static_cast<rules::Rejection>(i)))] = counts[i];
  return j;
}

json phase_json(const Phase& p) {
  // A phase that did not run has no costs; null says so rather than a 0 ms that reads as a result.
  auto ms = [&](double v) { return p.ran ? json(v) : json(nullptr); };
  return {{"name", p.name},
          {"from", p.from < 0 ? json("input") : json(p.from)},
          {"ran", p.ran},
          {"returned", p.returned},
          {"initial_ms", ms(p.initial_cost)},
          {"best_ms", ms(p.best_cost)},
          {"steps", p.steps},
          {"seconds", p.seconds},
          {"stop_reason", stop_reason_name(p.stop)}};
}

json report_json(const Result& result) {
  const auto& r = result.report;
  json phases = json::array();
  for (const auto& p : r.phases) phases.push_back(phase_json(p));
  return {{"stop_reason", stop_reason_name(result.stop)},
          {"expanded", r.expanded},
          {"generated", r.generated},
          {"unique_graphs", r.unique_graphs},
          {"pruned", r.pruned},
          {"rejected", r.rejected},
          {"rejections", rejections_json(r.rejections)},
          {"peak_states", r.peak_states},
          {"agent_actions", r.agent_actions},
          {"budget_used", r.budget_used},
          {"phases", phases},
          {"peak_state_mb", static_cast<double>(r.peak_state_bytes) / (1 << 20)},
          {"seconds", {{"match", r.seconds_match}, {"apply", r.seconds_apply}, {"cost", r.seconds_cost}, {"total", r.seconds_total}}}};
}

}  // namespace rlflow::search
