#pragma once
// Search strategies over rewrites: every driver has explicit limits and says why it stopped.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/cost/cost_model.h"
#include "rlflow/ir/graph.h"
#include "rlflow/rules/match.h"

namespace rlflow::search {

struct Limits {
  int64_t budget = 1000;                   // Report::budget_used: graphs expanded (greedy: rewrite steps; rl: agent actions)
  double time_limit_s = 0;                 // 0: none
  int64_t memory_bytes = int64_t{256} << 20;  // cap on stored search graphs (released and replayed beyond it)
  size_t max_locations = rules::kDefaultMaxMatches;  // matches considered per rule and graph
};

// kRolloutsDone: the rl strategy ran every rollout it was asked for.
enum class StopReason { kConverged, kExhausted, kBudget, kTimeLimit, kMemoryLimit, kRolloutsDone };
std::string_view stop_reason_name(StopReason r);

// One part of a combined search (combinators.h: Then, Portfolio), in the order the parts ran.
struct Phase {
  std::string name;          // the part's strategy (Optimizer::name())
  int from = -1;             // the phase whose best graph it started from; -1: the input graph
  bool ran = false;          // false: the limits left no room for it when its turn came
  bool returned = false;     // the result is this phase's best graph
  double initial_cost = 0, best_cost = 0;  // ms, of the graph it started from and of its best; 0 when it did not run
  int64_t steps = 0;         // rewrites from its start to its best graph
  double seconds = 0;
  StopReason stop = StopReason::kConverged;  // why it stopped; when it did not run, the limit that left no room
};

struct Report {
  int64_t expanded = 0;        // graphs whose rewrites were enumerated (under rl: graphs the agent observed)
  int64_t generated = 0;       // rewrites applied
  int64_t unique_graphs = 0;   // distinct graphs seen, by 64-bit structural hash (trusted; see engine.h)
  int64_t pruned = 0;          // children dropped by the strategy (alpha, duplicates)
  int64_t rejected = 0;        // matches apply() refused
  // Refusals by reason (rules::Rejection): complete placements the matcher refused, and apply()'s.
  rules::RejectionCounts rejections{};
  int64_t peak_states = 0;     // states held at once
  int64_t peak_state_bytes = 0;  // held graphs plus the states stored as deltas
  double seconds_match = 0, seconds_apply = 0, seconds_cost = 0, seconds_total = 0;
  // rl: actions the agent took in its rollouts (environment steps, NO-OP and refused ones included)
  // and rewrites its beam search tried. What Limits::budget counts under rl.
  int64_t agent_actions = 0;
  // What Limits::budget counted: `expanded` for greedy, taso and exhaustive, `agent_actions` for
  // rl, their sum over the phases of a combined search (which hands each phase what is left).
  int64_t budget_used = 0;
  std::vector<Phase> phases;   // combined searches only; empty for a single strategy
};

struct Result {
  ir::Graph best;
  double initial_cost = 0, best_cost = 0;
  std::vector<rules::Match> steps;  // replayable: apply them in order to the input graph
  StopReason stop = StopReason::kConverged;
  Report report;
};

// Called now and then with the report so far and the best cost (for progress lines).
using Progress = std::function<void(const Report&, double best_cost)>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual Expected<Result> run(const ir::Graph& g, const Limits& limits) = 0;
  virtual std::string name() const = 0;
  void set_progress(Progress p) { progress_ = std::move(p); }

 protected:
  Progress progress_;
};

struct SearchOptions {
  double alpha = 1.05;  // taso: keep children whose cost < alpha * best
};

// The strategy of that name from the registry (registry.h: greedy, taso, exhaustive and the
// registered ones), over `rules`. The rules (not the list, which is copied) and `model` must outlive
// the optimizer. A strategy that needs more (rl: its rule library and settings) is made with
// search::make_strategy.
Expected<std::unique_ptr<Optimizer>> make_optimizer(const std::string& strategy, const std::vector<const rules::Rule*>& rules,
                                                    cost::CostModel& model, const SearchOptions& opts = {});

// Replays steps from a result (e.g. a saved optimisation) on a graph.
Expected<ir::Graph> replay(const ir::Graph& g, const std::vector<const rules::Rule*>& rules, const std::vector<rules::Match>& steps);

}  // namespace rlflow::search
