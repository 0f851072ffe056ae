// `rlflow optimise`: the pipeline (include/rlflow/pipeline/optimise.h) with a progress line on a
// terminal, its report on stdout, and its error as an exit code.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>

#include "commands.h"
#include "progress.h"
#include "rlflow/cli/app.h"
#include "rlflow/search/registry.h"

namespace rlflow::cli {

namespace {

using Clock = std::chrono::steady_clock;

// What the line knows of the search: its last report, and what it was told of the limits.
struct SearchView {
  bool rl = false;            // the budget counts agent actions (search::Strategy::budget_counts_actions)
  bool none = false;         // --search none: no search reports come
  int64_t budget = 0;        // Limits::budget (<= 0: none)
  double time_limit_s = 0;   // Limits::time_limit_s as the pipeline sets it (0: none)
  bool seen = false;         // a report has come
  search::Report report;
  double best = 0;
  Clock::time_point at;      // when the last report came
  std::string stage;         // after the search: what the pipeline is doing (OptimiseHooks::stage)
  Clock::time_point stage_at;
};

std::string search_line(const SearchView& v, double elapsed) {  // elapsed: since the command began
  char buf[320];
  if (!v.seen) {
    std::snprintf(buf, sizeof buf, "[optimise] %s | %s", v.none ? "importing, checking and writing" : "importing, fusing and preparing the search",
                  format_duration(elapsed).c_str());
    return buf;
  }
  if (!v.stage.empty()) {
    const double in_stage = std::chrono::duration<double>(Clock::now() - v.stage_at).count();
    std::snprintf(buf, sizeof buf, "[optimise] %s | %s", v.stage.c_str(), format_duration(in_stage).c_str());
    return buf;
  }
  const auto& r = v.report;
  const double since_report = std::chrono::duration<double>(Clock::now() - v.at).count();
  const double searched = r.seconds_total + since_report;  // the search's own clock, moved on
  const int64_t used = std::max(r.budget_used, v.rl ? r.agent_actions : r.expanded);
  // Past a limit the search stops (at its next check); the pipeline then checks the candidates
  // (write, re-import, verify, measure), which reports nothing until it is done.
  const bool budget_spent = v.budget > 0 && used >= v.budget;
  const bool time_spent = v.time_limit_s > 0 && searched > v.time_limit_s + 0.5;
  if (budget_spent || time_spent) {
    const double checking = budget_spent ? since_report : searched - v.time_limit_s;
    std::snprintf(buf, sizeof buf, "[optimise] search done (%s; %lld graphs, best %.4g ms) | checking candidates %s",
                  budget_spent ? "budget" : "time limit", static_cast<long long>(r.expanded), v.best, format_duration(checking).c_str());
    return buf;
  }
  // Time left: the time limit bounds it; the budget, at the rate so far, estimates it.
  double left = std::numeric_limits<double>::infinity();
  bool bounded = false;
  if (v.time_limit_s > 0) {
    left = v.time_limit_s - searched;
    bounded = true;
  }
  if (v.budget > 0 && used > 0 && r.seconds_total > 0) {
    const double by_budget = static_cast<double>(v.budget - used) * r.seconds_total / static_cast<double>(used) - since_report;
    if (by_budget < left) {
      left = by_budget;
      bounded = false;
    }
  }
  std::string budget;
  if (v.budget > 0) budget.append("/").append(std::to_string(v.budget));
  std::string tail;
  if (std::isfinite(left)) {
    tail = bounded ? ", at most " : ", ~";
    tail += format_duration(std::max(0.0, left));
    tail += " left";
  }
  std::snprintf(buf, sizeof buf, "[search] %lld%s %s, %lld unique, best %.4g ms | %s%s", static_cast<long long>(used), budget.c_str(),
                v.rl ? "agent actions" : "graphs expanded", static_cast<long long>(r.unique_graphs), v.best,
                format_duration(searched).c_str(), tail.c_str());
  return buf;
}

}  // namespace

struct OptimiseProgress::View : SearchView {};

OptimiseProgress::OptimiseProgress(const OptimiseOptions& o, bool enabled)
    : view_(std::make_unique<View>()), line_(enabled, [v = view_.get()](double elapsed) { return search_line(*v, elapsed); }) {
  // A strategy whose budget counts agent actions (rl) says so on the line.
  const search::Strategy* strategy = search::find_strategy(o.search);
  view_->rl = strategy && strategy->budget_counts_actions;
  view_->none = o.search == "none";
  view_->budget = o.budget;
  // As pipeline::optimise sets search::Limits::time_limit_s.
  view_->time_limit_s = o.time_limit_s >= 0 ? o.time_limit_s : (o.cost.deterministic ? 0 : pipeline::kInteractiveTimeLimitS);
}

OptimiseProgress::~OptimiseProgress() = default;

pipeline::OptimiseHooks OptimiseProgress::hooks() {
  pipeline::OptimiseHooks hooks;
  if (!line_.enabled()) return hooks;
  View* view = view_.get();
  ProgressLine* line = &line_;
  hooks.progress = [view, line](const search::Report& r, double best) {
    line->update([&] {
      view->seen = true;
      view->stage.clear();  // a search again (--opset auto's second try at the input's opset)
      view->report = r;
      view->best = best;
      view->at = Clock::now();
    });
  };
  hooks.stage = [view, line](const std::string& stage) {
    line->update([&] {
      view->stage = stage;
      view->stage_at = Clock::now();
    });
  };
  return hooks;
}

int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o) {
  OptimiseProgress progress(o, progress_wanted(g.json));
  auto report = pipeline::optimise(o, progress.hooks());
  progress.finish();
  if (!report) return report_error(g, report.error());
  if (g.json) std::cout << json_text(report->to_json()) << std::endl;
  else report->print(stdout);
  return kOk;
}

}  // namespace rlflow::cli
