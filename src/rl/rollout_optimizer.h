#pragma once
// Internal to rl: a trained agent as a search strategy. The greedy rollout, then `rollouts`
// sampled ones in the real environment; the best graph met anywhere on them wins (an episode may
// pass through its best state and go on). Subclasses supply one rollout.
#include <optional>
#include <random>

#include "rlflow/rl/agent.h"

namespace rlflow::rl {

class RolloutOptimizer : public search::Optimizer {
 public:
  RolloutOptimizer(std::vector<const rules::Rule*> rules, cost::CostModel& model, EnvConfig env, RlSearchOptions o, int torch_threads)
      : rules_(std::move(rules)), model_(model), env_(std::move(env)), o_(std::move(o)), torch_threads_(torch_threads) {}
  std::string name() const override { return "rl"; }
  Expected<search::Result> run(const ir::Graph& g, const search::Limits& limits) override;

 protected:
  // One episode in `env` from reset to done; counts its steps into `report` (expanded, generated,
  // rejected).
  virtual Status rollout(GraphEnv& env, bool greedy, std::mt19937_64& rng, search::Report& report) = 0;
  // After the rollouts, a subclass may search on from the input `g` (improving `r` in place).
  virtual Status refine(GraphEnv&, const ir::Graph&, const search::Limits&, double /*elapsed_s*/, search::Result&) { return {}; }
  // Greedy descent from r.best (RlSearchOptions::polish); its result replaces r.best if cheaper.
  Status polish(const search::Limits& limits, double elapsed_s, search::Result& r);
  // Greedy search from the input `g` (RlSearchOptions::never_below_greedy); its result replaces
  // r.best unless r.best is cheaper.
  Status fallback(const ir::Graph& g, const search::Limits& limits, double elapsed_s, search::Result& r);
  // Greedy from `start` within what is left of `limits`; nullopt when nothing is left (r.stop set).
  Expected<std::optional<search::Result>> descend(const ir::Graph& start, const search::Limits& limits, double elapsed_s,
                                                  search::Result& r);
  const RlSearchOptions& options() const { return o_; }
  const EnvConfig& env_config() const { return env_; }
  const std::vector<const rules::Rule*>& rules() const { return rules_; }
  cost::CostModel& cost_model() const { return model_; }

 private:
  std::vector<const rules::Rule*> rules_;
  cost::CostModel& model_;
  EnvConfig env_;
  RlSearchOptions o_;
  int torch_threads_;
};

}  // namespace rlflow::rl
