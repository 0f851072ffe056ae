#include <algorithm>
#include <chrono>
#include <deque>
#include <queue>
#include <unordered_map>

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

struct Candidate {
  Graph graph;
  rules::Match match;
  int rule = -1;
};

// A search state stored as a delta from its parent; the graph itself is kept only while it is
// needed (frontier, or as the best so far) and re-derived by replay otherwise.
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

  // Every applicable rewrite of g, in rule order then location order.
  std::vector<Candidate> expand(const Graph& g) {
    std::vector<Candidate> out;
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
        auto next = rules::apply(index, *rules_[r], m, &why);
        report_.seconds_apply += since(ta);
        if (!next) {
          ++report_.rejected;
          ++report_.rejections[static_cast<size_t>(why)];
          continue;
        }
        ++report_.generated;
        out.push_back({std::move(*next), std::move(m), static_cast<int>(r)});
      }
      if (out_of_time()) break;
    }
    return out;
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

  // Index of an equal state already seen, or -1. Equal hash, then structural comparison.
  Expected<int> find_seen(const Graph& g, uint64_t h) {
    auto it = seen_.find(h);
    if (it == seen_.end()) return -1;
    for (int s : it->second) {
      auto other = materialize(s);
      if (!other) return other.error();
      if (ir::structurally_equal(**other, g)) return s;
    }
    return -1;
  }

  int add_state(State st) {
    states_.push_back(std::move(st));
    const int id = static_cast<int>(states_.size()) - 1;
    seen_[states_.back().hash].push_back(id);
    report_.unique_graphs = static_cast<int64_t>(states_.size());
    return id;
  }

  void hold(int s, std::shared_ptr<const Graph> g) {
    held_bytes_ += detail::approx_graph_bytes(*g);
    states_[static_cast<size_t>(s)].graph = std::move(g);
    report_.peak_state_bytes = std::max(report_.peak_state_bytes, held_bytes_);
  }
  void release(int s) {
    auto& g = states_[static_cast<size_t>(s)].graph;
    if (s == 0 || !g) return;  // the root stays: every replay starts there
    held_bytes_ -= detail::approx_graph_bytes(*g);
    g.reset();
  }
  bool over_memory() const { return held_bytes_ > limits_.memory_bytes; }

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
  const std::vector<const rules::Rule*>& rules_;
  detail::Coster coster_;
  const Limits& limits_;
  const Progress& progress_;
  Clock::time_point t0_, last_tick_ = Clock::now();
  std::unordered_map<uint64_t, std::vector<int>> seen_;
  int64_t held_bytes_ = 0;
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
    int cur = e.add_state({-1, -1, {}, *c0, g.hash(), std::make_shared<const Graph>(g)});
    while (true) {
      if (e.report_.expanded >= limits.budget) return e.finish(cur, StopReason::kBudget);
      if (e.out_of_time()) return e.finish(cur, StopReason::kTimeLimit);
      auto cands = e.expand(*e.states_[static_cast<size_t>(cur)].graph);
      int best = -1;
      double best_cost = e.states_[static_cast<size_t>(cur)].cost;
      for (size_t i = 0; i < cands.size(); ++i) {
        auto c = e.cost(cands[i].graph);
        if (!c) return c.error();
        if (better(*c, best_cost)) {
          best_cost = *c;
          best = static_cast<int>(i);
        }
      }
      e.tick(best_cost);
      if (best < 0) return e.finish(cur, StopReason::kConverged);
      auto& cb = cands[static_cast<size_t>(best)];
      const uint64_t h = cb.graph.hash();
      int next = e.add_state({cur, cb.rule, cb.match, best_cost, h, nullptr});
      e.hold(next, std::make_shared<const Graph>(std::move(cb.graph)));
      e.release(cur);
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
      auto cands = e.expand(**graph);
      if (s != best) e.release(s);
      for (auto& cnd : cands) {
        const uint64_t h = cnd.graph.hash();
        auto dup = e.find_seen(cnd.graph, h);
        if (!dup) return dup.error();
        if (*dup >= 0) {
          ++e.report_.pruned;
          continue;
        }
        auto c = e.cost(cnd.graph);
        if (!c) return c.error();
        const bool keep = bfs_ || *c < alpha_ * e.states_[static_cast<size_t>(best)].cost;
        int id = e.add_state({s, cnd.rule, std::move(cnd.match), *c, h, nullptr});
        const bool improves = better(*c, e.states_[static_cast<size_t>(best)].cost);
        if (keep || improves) e.hold(id, std::make_shared<const Graph>(std::move(cnd.graph)));
        if (improves) {
          if (best != root && best != s) e.release(best);
          best = id;
        }
        if (keep) {
          push(id);
          ++frontier;
        } else {
          ++e.report_.pruned;
          if (id != best) e.release(id);
        }
        if (e.over_memory()) {
          // Drop stored graphs of queued states (they stay queued as deltas and are replayed
          // when popped); stop only if that is not enough.
          for (int q = 1; q < static_cast<int>(e.states_.size()) && e.over_memory(); ++q)
            if (q != best) e.release(q);
          if (e.over_memory()) return e.finish(best, StopReason::kMemoryLimit);
        }
      }
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
