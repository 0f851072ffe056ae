// Greedy descent: from the current graph, take the cheapest child while it is cheaper.
#include "drivers.h"
#include "engine.h"

namespace rlflow::search::detail {

using ir::Graph;

namespace {

class Greedy : public Optimizer {
 public:
  Greedy(const std::vector<const rules::Rule*>& r, cost::CostModel& m) : rules_(r), model_(m) {}
  std::string name() const override { return "greedy"; }

  Expected<Result> run(const Graph& g, const Limits& limits) override {
    Engine e(rules_, model_, limits, progress_);
    auto c0 = e.cost(g);
    if (!c0) return c0.error();
    int cur = e.add_state({-1, -1, {}, *c0, g.hash(), nullptr});
    e.hold(cur, std::make_shared<const Graph>(g));
    Graph best_graph;
    while (true) {
      if (e.report_.expanded >= limits.budget) return e.finish(cur, StopReason::kBudget);
      if (e.out_of_time()) return e.finish(cur, StopReason::kTimeLimit);
      auto graph = e.materialize(cur);
      if (!graph) return graph.error();
      int best_rule = -1;
      rules::Match best_match;
      double best_cost = e.states_[static_cast<size_t>(cur)].cost;
      auto expanded = e.expand(**graph, [&](int rule, rules::Match m, const Graph& child) -> Status {
        auto c = e.cost(child);
        if (!c) return c.error();
        if (better(*c, best_cost)) {
          best_cost = *c;
          best_rule = rule;
          best_match = std::move(m);
          best_graph = child;  // copy-assigned: reuses best_graph's storage
        }
        return Status{};
      });
      if (!expanded) return expanded.error();
      e.tick(best_cost);
      if (best_rule < 0) return e.finish(cur, StopReason::kConverged);
      int next = e.add_state({cur, best_rule, std::move(best_match), best_cost, best_graph.hash(), nullptr});
      e.release(cur);
      e.hold(next, std::make_shared<const Graph>(best_graph));
      cur = next;
    }
  }

 private:
  // Its own copy of the list (the rules themselves are the caller's): what built it, such as a
  // search::StrategyInputs, may be gone by the time it runs.
  const std::vector<const rules::Rule*> rules_;
  cost::CostModel& model_;
};

}  // namespace

std::unique_ptr<Optimizer> make_greedy(const std::vector<const rules::Rule*>& rules, cost::CostModel& model) {
  return std::make_unique<Greedy>(rules, model);
}

}  // namespace rlflow::search::detail
