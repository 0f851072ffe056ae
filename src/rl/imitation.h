#pragma once
// Internal to rl: imitation of greedy search before PPO (behaviour cloning). The policy is first
// fitted to greedy search's trajectories, replayed in the environment's action space, so PPO
// starts from an agent that already follows the search's best single steps and stops where the
// search converges; PPO then improves on it with the real reward.
#include <random>
#include <vector>

#include "ppo.h"

namespace rlflow::rl::imitation {

struct Demonstrations {
  std::vector<ppo::Transition> steps;  // rewards, done flags and returns filled in
  std::vector<double> improvement;     // per model: greedy's improvement on the environment's cost
  int64_t env_steps = 0;               // environment steps the replays took
};

// Greedy search (search::make_optimizer("greedy")) under `model` on each training graph, at most
// cfg.env.max_steps rewrites, replayed step by step in a GraphEnv; a demonstration ends with
// NO-OP where greedy converged. A greedy step whose match is not among the environment's first
// max_locations matches ends that model's demonstration there.
Expected<Demonstrations> greedy_demonstrations(const std::vector<TrainModel>& models, const std::vector<const rules::Rule*>& rules,
                                               cost::CostModel& model, const PpoConfig& cfg);

// One DAgger round (Ross, Gordon & Bagnell, 2011): the policy's own argmax rollout on each
// training model, every state it reaches labelled with greedy's choice there (one greedy step;
// NO-OP where no rewrite improves), appended to `demos`. Cloning only the expert's own states
// compounds errors once the policy leaves them; these labels teach it to recover. Their value
// targets are unknown (NaN: behaviour_cloning fits the value on the expert's steps only).
// Returns the number of states added.
Expected<int64_t> dagger_round(nets::PolicyNet& net, Demonstrations& demos, const std::vector<TrainModel>& models,
                               const std::vector<const rules::Rule*>& rules, cost::CostModel& model, const PpoConfig& cfg,
                               std::mt19937_64& rng);

struct Stats {
  int epochs = 0;
  double first_loss = 0, last_loss = 0;  // mean negative log-likelihood of the expert actions
  double accuracy = 0;                   // share of demonstration steps the fitted policy's argmax reproduces
};

// `epochs` passes of minibatch gradient steps on -log pi(expert action) + value_coef * (V - return)^2.
Stats behaviour_cloning(nets::PolicyNet& net, torch::optim::Optimizer& opt, const Demonstrations& demos, const PpoConfig& cfg,
                        int epochs, std::mt19937_64& rng);

}  // namespace rlflow::rl::imitation
