// TASO's cost-based backtracking search, and the exhaustive search that is its breadth-first,
// unpruned form.
#include <deque>
#include <queue>

#include "drivers.h"
#include "engine.h"

namespace rlflow::search::detail {

using ir::Graph;

namespace {

// A priority queue by cost; a child is kept while its cost is below alpha times the best cost so
// far; duplicates are dropped.
class Taso : public Optimizer {
 public:
  Taso(const std::vector<const rules::Rule*>& r, cost::CostModel& m, double alpha, bool breadth_first)
      : rules_(r), model_(m), alpha_(alpha), bfs_(breadth_first) {}
  std::string name() const override { return bfs_ ? "exhaustive" : "taso"; }

  Expected<Result> run(const Graph& g, const Limits& limits) override {
    Engine e(rules_, model_, limits, progress_);
    auto c0 = e.cost(g);
    if (!c0) return c0.error();
    int root = e.add_state({-1, -1, {}, *c0, g.hash(), nullptr});
    e.hold(root, std::make_shared<const Graph>(g));
    int best = root;
    // Min-heap by (cost, state id) for taso; FIFO for exhaustive.
    auto cmp = [&](int a, int b) {
      const double ca = e.states_[static_cast<size_t>(a)].cost, cb = e.states_[static_cast<size_t>(b)].cost;
      return ca != cb ? ca > cb : a > b;
    };
    std::priority_queue<int, std::vector<int>, decltype(cmp)> heap(cmp);
    std::deque<int> fifo;
    auto push = [&](int s) { bfs_ ? fifo.push_back(s) : heap.push(s); };
    auto empty = [&] { return bfs_ ? fifo.empty() : heap.empty(); };
    auto pop = [&] {
      int s;
      if (bfs_) {
        s = fifo.front();
        fifo.pop_front();
      } else {
        s = heap.top();
        heap.pop();
      }
      return s;
    };
    push(root);
    int64_t frontier = 1;
    while (!empty()) {
      if (e.report_.expanded >= limits.budget) return e.finish(best, StopReason::kBudget);
      if (e.out_of_time()) return e.finish(best, StopReason::kTimeLimit);
      // As in TASO, alpha is applied when a child is queued, not again when it is popped.
      const int s = pop();
      --frontier;
      auto graph = e.materialize(s);
      if (!graph) return graph.error();
      e.hold(s, *graph);  // its children replay from it
      // Children are kept as deltas: their graph is rebuilt only if they are popped in turn.
      auto expanded = e.expand(**graph, [&](int rule, rules::Match m, const Graph& child) -> Status {
        const uint64_t h = child.hash();
        if (e.seen(h)) {
          ++e.report_.pruned;
          return Status{};
        }
        auto c = e.cost(child);
        if (!c) return c.error();
        const bool keep = bfs_ || *c < alpha_ * e.states_[static_cast<size_t>(best)].cost;
        const bool improves = better(*c, e.states_[static_cast<size_t>(best)].cost);
        int id = e.add_state({s, rule, std::move(m), *c, h, nullptr});
        if (improves) best = id;
        if (keep) {
          push(id);
          ++frontier;
        } else {
          ++e.report_.pruned;
        }
        return Status{};
      });
      if (!expanded) return expanded.error();
      if (!e.fit_memory()) return e.finish(best, StopReason::kMemoryLimit);
      e.report_.peak_states = std::max(e.report_.peak_states, frontier);
      e.tick(e.states_[static_cast<size_t>(best)].cost);
    }
    return e.finish(best, bfs_ ? StopReason::kExhausted : StopReason::kConverged);
  }

 private:
  // Its own copy of the list (the rules themselves are the caller's): what built it, such as a
  // search::StrategyInputs, may be gone by the time it runs.
  const std::vector<const rules::Rule*> rules_;
  cost::CostModel& model_;
  double alpha_;
  bool bfs_;
};

}  // namespace

std::unique_ptr<Optimizer> make_taso(const std::vector<const rules::Rule*>& rules, cost::CostModel& model, double alpha,
                                     bool breadth_first) {
  return std::make_unique<Taso>(rules, model, alpha, breadth_first);
}

}  // namespace rlflow::search::detail
