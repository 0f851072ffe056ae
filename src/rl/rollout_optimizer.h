#pragma once
// Internal to rl: a trained agent as a search strategy. The greedy rollout, then `rollouts`
// sampled ones in the real environment; the best graph met anywhere on them wins (an episode may
// pass through its best state and go on). Subclasses supply one rollout, and may search on after
// the rollouts (the beam). What runs after the agent (--polish, --never-below-greedy) is composed
// around it from search's combinators by make_rl_optimizer.
#include <random>

#include "rlflow/rl/agent.h"

namespace rlflow::rl {

class RolloutOptimizer : public search::Optimizer {
 public:
  RolloutOptimizer(std::vector<const rules::Rule*> rules, cost::CostModel& model, EnvConfig env, RlSearchOptions o, int torch_threads)
      : rules_(std::move(rules)), model_(model), env_(std::move(env)), o_(std::move(o)), torch_threads_(torch_threads) {}
  std::string name() const override { return "rl"; }
  Expected<search::Result> run(const ir::Graph& g, const search::Limits& limits) override;
  // The rules the agent chooses among, in its action order.
  const std::vector<const rules::Rule*>& rules() const { return rules_; }

 protected:
  // One episode in `env` from reset to done; counts into `report` its actions (agent_actions), the
  // graphs it observed (expanded), and its applied and refused rewrites (generated, rejected).
  virtual Status rollout(GraphEnv& env, bool greedy, std::mt19937_64& rng, search::Report& report) = 0;
  // After the rollouts, a subclass may search on from the input `g` (improving `r` in place).
  virtual Status refine(GraphEnv&, const ir::Graph&, const search::Limits&, double /*elapsed_s*/, search::Result&) { return {}; }
  const RlSearchOptions& options() const { return o_; }
  const EnvConfig& env_config() const { return env_; }
  cost::CostModel& cost_model() const { return model_; }

 private:
  std::vector<const rules::Rule*> rules_;
  cost::CostModel& model_;
  EnvConfig env_;
  RlSearchOptions o_;
  int torch_threads_;
};

}  // namespace rlflow::rl
