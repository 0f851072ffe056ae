// The strategies by name (the registry: built-in drivers and registered strategies), replaying a
// result's steps, and the stop reasons' words. Each driver has its own file (greedy.cpp,
// taso.cpp); combinators.cpp composes them.
#include <deque>
#include <mutex>

#include "drivers.h"
#include "rlflow/search/optimizer.h"
#include "rlflow/search/registry.h"

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

namespace {

// A built-in driver over the selected rules: it searches with exactly those.
BuiltStrategy built(std::unique_ptr<Optimizer> o, const StrategyInputs& in) { return {std::move(o), in.rules.size(), {}}; }

std::vector<Strategy> builtin_strategies() {
  std::vector<Strategy> b;
  b.push_back({"greedy", "the cheapest rewrite, step by step, to a local optimum", true, false, {},
               [](const StrategyInputs& in) -> Expected<BuiltStrategy> { return built(detail::make_greedy(in.rules, *in.model), in); }});
  b.push_back({"taso", "TASO's cost-based backtracking, --alpha", true, false, {}, [](const StrategyInputs& in) -> Expected<BuiltStrategy> {
                 if (!(in.options.alpha >= 1.0)) return Error{ErrorCode::kUsage, "--alpha must be >= 1"};
                 return built(detail::make_taso(in.rules, *in.model, in.options.alpha, false), in);
               }});
  b.push_back({"exhaustive", "every reachable graph, breadth first, within the limits", true, false, {},
               [](const StrategyInputs& in) -> Expected<BuiltStrategy> { return built(detail::make_taso(in.rules, *in.model, 0, true), in); }});
  return b;
}

// The built-in strategies first, then the registered ones in the order they came. A deque keeps the
// address find_strategy hands out valid while later strategies register.
struct Registry {
  std::mutex mu;
  std::deque<Strategy> strategies;
  size_t builtins = 0;
  Registry() {
    for (auto& s : builtin_strategies()) strategies.push_back(std::move(s));
    builtins = strategies.size();
  }
};
Registry& registry() {
  static Registry r;
  return r;
}

std::string names_text() {
  const auto names = strategy_names();
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace

Status register_strategy(Strategy s) {
  if (s.name.empty() || !s.make) return Error::internal("register_strategy: a strategy needs a name and a maker");
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (size_t i = 0; i < r.strategies.size(); ++i)
    if (r.strategies[i].name == s.name) {
      if (i < r.builtins) return Error::internal("register_strategy: '" + s.name + "' is a built-in strategy");
      r.strategies[i] = std::move(s);
      return {};
    }
  r.strategies.push_back(std::move(s));
  return {};
}

const Strategy* find_strategy(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& s : r.strategies)
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<std::string> strategy_names() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const auto& s : r.strategies) out.push_back(s.name);
  return out;
}

std::string strategy_help() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string out;
  for (const auto& s : r.strategies) out += (out.empty() ? "" : ", ") + s.name + (s.help.empty() ? "" : " (" + s.help + ")");
  return out;
}

Expected<BuiltStrategy> make_strategy(const std::string& name, const StrategyInputs& in) {
  const Strategy* s = find_strategy(name);
  if (!s) return Error{ErrorCode::kUsage, "unknown search strategy '" + name + "' (" + names_text() + ")"};
  if (!in.model) return Error::internal("search strategy '" + name + "': no cost model given");
  return s->make(in);
}

Expected<std::unique_ptr<Optimizer>> make_optimizer(const std::string& strategy, const std::vector<const rules::Rule*>& rules,
                                                    cost::CostModel& model, const SearchOptions& opts) {
  StrategyInputs in;
  in.rules = rules;
  in.model = &model;
  in.options = opts;
  auto b = make_strategy(strategy, in);
  if (!b) return b.error();
  return std::move(b->optimizer);
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
