#pragma once
// Internal to search: the state store every search driver (greedy.cpp, taso.cpp) runs on. It is
// not a public header because its members are the drivers' working state, not a contract: a driver
// outside src/search composes Optimizers (combinators.h) instead.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <unordered_set>
#include <vector>

#include "rlflow/cost/memo.h"
#include "rlflow/search/optimizer.h"

namespace rlflow::search::detail {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Strictly cheaper, beyond rounding: equal costs keep the earlier graph.
inline bool better(double a, double b) { return a < b - 1e-12 * std::max(1.0, std::abs(b)); }

// A search state stored as a delta from its parent (rule and match); its graph is held only while
// it is needed (the root always; expanded states while memory allows) and re-derived by replaying
// deltas from the nearest ancestor that holds one otherwise.
struct State {
  int parent = -1;
  int rule = -1;
  rules::Match match;
  double cost = 0;
  uint64_t hash = 0;
  std::shared_ptr<const ir::Graph> graph;
};

class Engine {
 public:
  Engine(const std::vector<const rules::Rule*>& rules, cost::CostModel& model, const Limits& limits, const Progress& progress);

  bool out_of_time() const;

  // Every applicable rewrite of g, in rule order then location order: visit(rule, match, child)
  // sees each child graph. The child is rebuilt in place in one scratch graph (rules::apply_into),
  // so it is only valid during the call; a strategy keeps the match (a delta), or copies the graph.
  template <class Visit>
  Status expand(const ir::Graph& g, Visit&& visit) {
    rules::MatchOptions mo;
    mo.max_matches = limits_.max_locations;
    mo.rejections = &report_.rejections;
    ++report_.expanded;
    ++report_.budget_used;
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
        RLFLOW_TRY_STATUS(visit(static_cast<int>(r), std::move(m), static_cast<const ir::Graph&>(child_)));
      }
      if (out_of_time()) break;
    }
    return Status{};
  }

  Expected<double> cost(const ir::Graph& g);

  // The graph of a state, replayed from the nearest ancestor that still holds one.
  Expected<std::shared_ptr<const ir::Graph>> materialize(int s);

  // Whether a graph with this structural hash was seen. The 64-bit hash is trusted: with 10^6
  // states a collision has odds below 10^-7, and one would only prune a child, never change what
  // any graph computes (the best graph is rebuilt by replay and verified).
  bool seen(uint64_t h) const { return seen_.count(h) != 0; }

  int add_state(State st);

  // Holds a state's graph; beyond the memory cap the oldest held graphs (never the root's) are
  // released again and replayed when needed.
  void hold(int s, std::shared_ptr<const ir::Graph> g);
  // Releases the oldest held graphs until the graphs and deltas fit the cap; false when they
  // cannot (only the root and the deltas are left).
  bool fit_memory();
  void release(int s);
  bool over_memory() const { return held_bytes_ + delta_bytes_ > limits_.memory_bytes; }

  // The result for the best state. A best graph that cannot be rebuilt by replay is an error, never
  // the input graph reported next to the best state's steps.
  Expected<Result> finish(int best, StopReason stop);

  // Reports progress, at most five times a second.
  void tick(double best_cost);

  std::vector<State> states_;
  Report report_;

 private:
  void note_memory() { report_.peak_state_bytes = std::max(report_.peak_state_bytes, held_bytes_ + delta_bytes_); }

  const std::vector<const rules::Rule*>& rules_;
  cost::MemoCost coster_;
  const Limits& limits_;
  const Progress& progress_;
  Clock::time_point t0_, last_tick_ = Clock::now();
  std::unordered_set<uint64_t> seen_;
  std::deque<int> held_order_;
  int64_t held_bytes_ = 0, delta_bytes_ = 0;
  ir::Graph child_;
  rules::ApplyScratch scratch_;
};

}  // namespace rlflow::search::detail
