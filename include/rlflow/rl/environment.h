#pragma once
// Gym-style environments over graph rewrites. The real one applies rules to an ir::Graph and
// costs it; the world model's dream implements the same interface.
#include <memory>
#include <string>
#include <vector>

#include "rlflow/cost/cost_model.h"
#include "rlflow/rl/observation.h"
#include "rlflow/rules/match.h"
#include "rlflow/rules/rule.h"

namespace rlflow::rl {

struct Action {
  int xfer = 0;
  int location = 0;
};

struct EnvConfig {
  size_t max_locations = rules::kDefaultMaxMatches;  // L: matches kept per rule and state
  int max_steps = 50;          // episode length limit
  // dense: 100 * (cost(t-1) - cost(t)) / cost(0) every step; final: the whole improvement at the end.
  std::string reward = "dense";
  double reward_scale = 100.0;
  // Not a training setting (never read from or written to a config): hash every visited graph so that
  // distinct_graphs() counts them. The rl search strategy turns it on for its report.
  bool count_distinct_graphs = false;
};

struct StepInfo {
  double cost = 0, initial_cost = 0, best_cost = 0;
  double improvement = 0;       // (initial - cost) / initial, reported every step
  bool rejected = false;        // apply() refused the chosen match; the state did not change
  rules::Rejection rejection = rules::Rejection::kNone;  // why, when rejected
  std::string rule;             // the applied rule ("" for NO-OP)
  double seconds = 0;           // wall time of this step (apply, match, cost, featurise)
};

struct Step {
  Observation observation;
  double reward = 0;
  bool done = false;
  StepInfo info;
};

class Environment {
 public:
  virtual ~Environment() = default;
  virtual Expected<Observation> reset() = 0;
  virtual Expected<Step> step(const Action& a) = 0;
  virtual int num_xfers() const = 0;
  virtual size_t max_locations() const = 0;
};

// The real environment. `model` must be usable from the thread that steps this environment
// (wrap a shared one with locked_cost_model).
class GraphEnv : public Environment {
 public:
  GraphEnv(ir::Graph g, std::vector<const rules::Rule*> rules, cost::CostModel& model, EnvConfig cfg = {});
  ~GraphEnv() override;
  Expected<Observation> reset() override;
  // Continues an episode of this environment's graph from a state reached elsewhere (a search
  // branching over the policy): `g` after `steps`, with the episode's initial cost `cost0`, so the
  // observation is the one the policy would see had it got there itself.
  Expected<Observation> reset_to(const ir::Graph& g, double cost0, std::vector<rules::Match> steps);
  Expected<Step> step(const Action& a) override;
  int num_xfers() const override;
  size_t max_locations() const override;

  const ir::Graph& graph() const;           // current state
  const ir::Graph& best_graph() const;      // lowest cost seen this episode
  double best_cost() const;
  double initial_cost() const;
  const std::vector<rules::Match>& steps() const;       // applied matches this episode
  const std::vector<rules::Match>& best_steps() const;  // the prefix that reaches best_graph()
  double total_step_seconds() const;
  int64_t total_steps() const;
  int64_t distinct_graphs() const;  // distinct graphs visited since construction (count_distinct_graphs; else 0)
  // Counts a graph a search reached without stepping this environment (a beam's children).
  void count_graph(const ir::Graph& g);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serialises op_cost calls of a shared model (measuring backends are not thread-safe, and
// timings taken concurrently would disturb each other).
std::unique_ptr<cost::CostModel> locked_cost_model(cost::CostModel& inner);

}  // namespace rlflow::rl
