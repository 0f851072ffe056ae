#include <algorithm>
#include <chrono>
#include <deque>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "coster.h"
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

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A search state stored as a delta from its parent (rule and match); its graph is held only while
// it is needed (the root always; expanded states while memory allows) and re-derived by replaying
// deltas from the nearest ancestor that holds one otherwise.
struct State {
  int parent = -1;
  int rule = -1;
  rules::Match match;
  double cost = 0;
  uint64_t hash = 0;
  std::shared_ptr<const Graph> graph;
};

class Engine {
 public:
  Engine(const std::vector<const rules::Rule*>& rules, cost::CostModel& model, const Limits& limits, const Progress& progress)
      : rules_(rules), coster_(model), limits_(limits), progress_(progress), t0_(Clock::now()) {}

  bool out_of_time() const { return limits_.time_limit_s > 0 && since(t0_) > limits_.time_limit_s; }

  // Every applicable rewrite of g, in rule order then location order: visit(rule, match, child)
  // sees each child graph. The child is rebuilt in place in one scratch graph (rules::apply_into),
  // so it is only valid during the call; a strategy keeps the match (a delta), or copies the graph.
  template <class Visit>
  Status expand(const Graph& g, Visit&& visit) {
    rules::MatchOptions mo;
    mo.max_matches = limits_.max_locations;
    mo.rejections = &report_.rejections;
    ++report_.expanded;
    auto t_index = Clock::now();
    const rules::GraphIndex index(g);
    report_.seconds_match += since(t_index);
    for (size_t r = 0; r < rules_.size(); ++r) {
      auto tm = Clock::now();
      auto matches = rules::find_matches(index, *rules_[r], mo);
      report_.seconds_match += since(tm);
      for (auto& m : matches) {
        auto ta = Clock::now();
        rules::Rejection why = rules::Rejection::kNone;
        auto built = rules::apply_into(index, *rules_[r], m, child_, scratch_, &why);
        report_.seconds_apply += since(ta);
        if (!built) {
          ++report_.rejected;
          ++report_.rejections[static_cast<size_t>(why)];
          continue;
        }
        ++report_.generated;
        RLFLOW_TRY_STATUS(visit(static_cast<int>(r), std::move(m), static_cast<const Graph&>(child_)));
      }
      if (out_of_time()) break;
    }
    return Status{};
  }

  Expected<double> cost(const Graph& g) {
    auto tc = Clock::now();
    auto c = coster_.cost(g);
    report_.seconds_cost += since(tc);
    return c;
  }

  // The graph of a state, replayed from the nearest ancestor that still holds one.
  Expected<std::shared_ptr<const Graph>> materialize(int s) {
    if (states_[static_cast<size_t>(s)].graph) return states_[static_cast<size_t>(s)].graph;
    std::vector<int> chain;
    int a = s;
    while (!states_[static_cast<size_t>(a)].graph) {
      chain.push_back(a);
      a = states_[static_cast<size_t>(a)].parent;
    }
    auto g = states_[static_cast<size_t>(a)].graph;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const auto& st = states_[static_cast<size_t>(*it)];
      auto next = rules::apply(*g, *rules_[static_cast<size_t>(st.rule)], st.match);
      if (!next) return next.error().with_context("replaying a search state");
      g = std::make_shared<const Graph>(std::move(*next));
    }
    return g;
  }

  // Whether a graph with this structural hash was seen. The 64-bit hash is trusted: with 10^6
  // states a collision has odds below 10^-7, and one would only prune a child, never change what
  // any graph computes (the best graph is rebuilt by replay and verified).
  bool seen(uint64_t h) const { return seen_.count(h) != 0; }

  int add_state(State st) {
    delta_bytes_ += static_cast<int64_t>(sizeof(State) + st.match.nodes.size() * sizeof(ir::NodeId) + st.match.rule.capacity());
    seen_.insert(st.hash);
    states_.push_back(std::move(st));
    report_.unique_graphs = static_cast<int64_t>(states_.size());
    note_memory();
    return static_cast<int>(states_.size()) - 1;
  }

  // Holds a state's graph; beyond the memory cap the oldest held graphs (never the root's) are
  // released again and replayed when needed.
  void hold(int s, std::shared_ptr<const Graph> g) {
    if (states_[static_cast<size_t>(s)].graph) return;
    held_bytes_ += detail::approx_graph_bytes(*g);
    states_[static_cast<size_t>(s)].graph = std::move(g);
    held_order_.push_back(s);
    note_memory();
    fit_memory();
  }
  // Releases the oldest held graphs until the graphs and deltas fit the cap; false when they
  // cannot (only the root and the deltas are left).
  bool fit_memory() {
    while (over_memory() && !held_order_.empty()) {
      const int old = held_order_.front();
      held_order_.pop_front();
      release(old);
    }
    return !over_memory();
  }
  void release(int s) {
    auto& g = states_[static_cast<size_t>(s)].graph;
    if (s == 0 || !g) return;  // the root stays: every replay starts there
    held_bytes_ -= detail::approx_graph_bytes(*g);
    g.reset();
  }
  bool over_memory() const { return held_bytes_ + delta_bytes_ > limits_.memory_bytes; }

  // The result for the best state. A best graph that cannot be rebuilt by replay is an error, never
  // the input graph reported next to the best state's steps.
  Expected<Result> finish(int best, StopReason stop) {
    Result r;
    auto g = materialize(best);
    if (!g) return g.error().with_context("rebuilding the best graph");
    r.best = **g;
    r.initial_cost = states_[0].cost;
    r.best_cost = states_[static_cast<size_t>(best)].cost;
    for (int s = best; s > 0; s = states_[static_cast<size_t>(s)].parent) r.steps.push_back(states_[static_cast<size_t>(s)].match);
    std::reverse(r.steps.begin(), r.steps.end());
    r.stop = stop;
    report_.seconds_total = since(t0_);
    r.report = report_;
    return r;
  }

  void tick(double best_cost) {
    if (progress_ && since(last_tick_) > 0.2) {
      last_tick_ = Clock::now();
      report_.seconds_total = since(t0_);
      progress_(report_, best_cost);
    }
  }

  std::vector<State> states_;
  Report report_;

 private:
  void note_memory() { report_.peak_state_bytes = std::max(report_.peak_state_bytes, held_bytes_ + delta_bytes_); }

  const std::vector<const rules::Rule*>& rules_;
  detail::Coster coster_;
  const Limits& limits_;
  const Progress& progress_;
  Clock::time_point t0_, last_tick_ = Clock::now();
  std::unordered_set<uint64_t> seen_;
  std::deque<int> held_order_;
  int64_t held_bytes_ = 0, delta_bytes_ = 0;
  Graph child_;
  rules::ApplyScratch scratch_;
};

bool better(double a, double b) { return a < b - 1e-12 * std::max(1.0, std::abs(b)); }

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
  const std::vector<const rules::Rule*>& rules_;
  cost::CostModel& model_;
};

// TASO's cost-based backtracking search: a priority queue by cost; a child is kept while its cost
// is below alpha times the best cost so far; duplicates are dropped.
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
  const std::vector<const rules::Rule*>& rules_;
  cost::CostModel& model_;
  double alpha_;
  bool bfs_;
};

}  // namespace

Expected<std::unique_ptr<Optimizer>> make_optimizer(const std::string& strategy, const std::vector<const rules::Rule*>& rules,
                                                    cost::CostModel& model, const SearchOptions& opts) {
  if (strategy == "greedy") return std::unique_ptr<Optimizer>(new Greedy(rules, model));
  if (strategy == "taso") {
    if (!(opts.alpha >= 1.0)) return Error{ErrorCode::kUsage, "--alpha must be >= 1"};
    return std::unique_ptr<Optimizer>(new Taso(rules, model, opts.alpha, false));
  }
  if (strategy == "exhaustive") return std::unique_ptr<Optimizer>(new Taso(rules, model, 0, true));
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
