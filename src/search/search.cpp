// The strategies by name, replaying a result's steps, and the stop reasons' words. Each driver
// has its own file (greedy.cpp, taso.cpp); combinators.cpp composes them.
#include "drivers.h"
#include "rlflow/search/optimizer.h"

namespace rlflow::search {

using ir::Graph;

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kConverged: return "converged (no rewrite improves the cost)";
    case StopReason::kExhausted: return "exhausted (every reachable graph within the limits was seen)";
    case StopReason::kBudget: return "budget reached";
    case StopReason::kTimeLimit: return "time limit reached";
    case StopReason::kMemoryLimit: return "memory limit reached";
    case StopReason::kRolloutsDone: return "every rollout done";
  }
  return "?";
}

Expected<std::unique_ptr<Optimizer>> make_optimizer(const std::string& strategy, const std::vector<const rules::Rule*>& rules,
                                                    cost::CostModel& model, const SearchOptions& opts) {
  if (strategy == "greedy") return detail::make_greedy(rules, model);
  if (strategy == "taso") {
    if (!(opts.alpha >= 1.0)) return Error{ErrorCode::kUsage, "--alpha must be >= 1"};
    return detail::make_taso(rules, model, opts.alpha, false);
  }
  if (strategy == "exhaustive") return detail::make_taso(rules, model, 0, true);
  return Error{ErrorCode::kUsage, "unknown search strategy '" + strategy + "' (greedy, taso, exhaustive, none)"};
}

Expected<Graph> replay(const Graph& g, const std::vector<const rules::Rule*>& rules, const std::vector<rules::Match>& steps) {
  Graph cur = g;
  for (const auto& m : steps) {
    const rules::Rule* r = nullptr;
    for (const auto* c : rules)
      if (c->name == m.rule) r = c;
    if (!r) return Error::bad_input("replay: unknown rule '" + m.rule + "'");
    auto next = rules::apply(cur, *r, m);
    if (!next) return next.error();
    cur = std::move(*next);
  }
  return cur;
}

}  // namespace rlflow::search
