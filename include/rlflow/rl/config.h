#pragma once
// PPO agent hyperparameters; configs/agent/ppo.yaml documents every default.
#include <string>

#include "rlflow/rl/environment.h"
#include "rlflow/util/expected.h"

namespace rlflow::rl {

struct PpoConfig {
  EnvConfig env;
  // network
  int hidden = 64;      // width of every embedding and MLP layer
  int gnn_rounds = 3;   // graph-network message-passing rounds
  // PPO
  double learning_rate = 1e-3;
  double gamma = 0.99, gae_lambda = 0.95;
  double clip = 0.2;
  double value_coef = 0.5, entropy_coef = 0.01;
  double max_grad_norm = 0.5;
  int epochs = 4;
  int minibatch = 64;          // transitions per gradient step
  double target_kl = 0.03;     // stop the epochs of an update once approx KL > 1.5 x this
  bool normalize_advantages = true;
  // data collection
  int episodes_per_update = 8;
  int num_envs = 2;            // environments stepped together, one thread each
  int checkpoint_every = 5;    // updates between checkpoints (and always at the end)
  int torch_threads = 1;
  // Imitation before PPO: epochs of behaviour cloning on greedy search's trajectories of the
  // training models (src/rl/imitation.h). 0: none, PPO starts from a random policy.
  int imitation_epochs = 0;
  // DAgger rounds after the first cloning: the policy's own states, labelled by greedy, are added
  // and the policy is cloned again (imitation_epochs each round). Needs imitation_epochs > 0.
  int dagger_rounds = 0;
};

Expected<PpoConfig> load_ppo_config(const std::string& path);
Expected<PpoConfig> parse_ppo_config(const std::string& yaml_text, const std::string& origin);
std::string to_yaml(const PpoConfig& c);

}  // namespace rlflow::rl
