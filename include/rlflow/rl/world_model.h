#pragma once
// The model-based agent: an MDN-RNN world model learned from real rollouts, and a controller
// trained inside it ("in the dream"). No torch in this header.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rlflow/rl/agent.h"

namespace rlflow::rl {

// configs/world_model.yaml documents every default.
struct WorldModelConfig {
  int lstm_hidden = 256;
  int mixtures = 8;
  // Independently initialised members trained on the same data, each in its own episode order
  // (a deep ensemble). With more than one, the dream samples each next state from a random member
  // and can penalise the members' disagreement on the reward (train-agent --uncertainty-penalty).
  int ensemble = 1;
  // Each xfer's number of valid locations is an explicit state the LSTM reads and the dream carries
  // forward, the count head predicting its change (see WorldModelNetImpl). false: the mask and
  // count heads predict the next state's mask and log counts afresh at every step.
  bool count_state = true;
  // An action is also the chosen match's feature vector (its nodes' cost share, size, kernel), carried
  // by the dream per location like the counts (see WorldModelNetImpl); needs count_state. Off when a
  // checkpoint's config does not mention it.
  bool match_features = false;
  // Clamp of the mixture's log sigma, in units of each latent dimension's std. A lower floor lets
  // the NLL's gradients (~1/sigma^2) swamp the reward/done/mask heads (measured: mask accuracy 0.78
  // at -5, 1.00 at -3 on the fire-module test environment).
  double log_sigma_min = -3.0, log_sigma_max = 2.0;
  // loss = nll * NLL(z')/Z + reward * MSE(r / r_std) + done * BCE(done) + mask * BCE(mask') + count * MSE(log1p count')
  double w_nll = 1.0, w_reward = 1.0, w_done = 1.0, w_mask = 1.0, w_count = 0.5;
  double learning_rate = 1e-3;
  int epochs = 40;
  int batch_episodes = 16;
  int checkpoint_every = 5;    // epochs between checkpoints (and always at the end), so a killed run can --resume
  double holdout = 0.1;        // share of episodes kept out of training for the held-out metrics
  double max_grad_norm = 1.0;
  double noop_share = 0.05;    // the random data agent's probability of choosing NO-OP
  double policy_epsilon = 0.1; // with a data policy: share of steps that take the random agent's action instead
};
Expected<WorldModelConfig> load_world_model_config(const std::string& path);
Expected<WorldModelConfig> parse_world_model_config(const std::string& yaml_text, const std::string& origin);
std::string to_yaml(const WorldModelConfig& c);

struct WorldModelTrainOptions {
  std::vector<TrainModel> models;
  std::vector<const rules::Rule*> rules;  // must be the encoder agent's rules when one is given
  cost::CostModel* cost = nullptr;
  // The graph encoder: taken (frozen) from a trained model-free agent; empty: a seeded random
  // encoder, frozen (random graph-network features; weaker).
  std::string encoder_agent;
  // New episodes come from this dream controller (sampled actions, policy_epsilon random ones)
  // instead of the random agent: the later rounds of the iterated model-based loop.
  std::string policy;
  PpoConfig agent_config;  // env settings and encoder size when no agent is given
  WorldModelConfig config;
  int64_t episodes = 200;  // real episodes in the data set (reused from `data_path`, topped up)
  uint64_t seed = 0;
  std::string out, data_path, log_path;
  bool resume = false;
  // Progress (train_world_model's own argument is called once per epoch). Empty: none. on_episode's
  // episodes_done counts the data set's episodes, reused ones included, towards `episodes`.
  EpisodeProgress on_episode;               // each new real episode recorded
  PhaseProgress on_phase;                   // "collecting real episodes", "fitting"
};

struct WorldModelMetrics {
  int epoch = 0;
  double train_loss = 0;
  double nll = 0, reward_mse = 0, done_accuracy = 0, mask_accuracy = 0, count_mae = 0;  // held-out
  double seconds = 0;
};

struct WorldModelSummary {
  int64_t episodes = 0, collected = 0, real_steps = 0;  // data set size, newly collected, their env steps
  int64_t data_steps = 0;                                // env steps of every episode in the data set
  double collect_seconds = 0, real_step_ms = 0, train_seconds = 0;
  WorldModelMetrics last;
};

Expected<WorldModelSummary> train_world_model(const WorldModelTrainOptions& o,
                                              const std::function<void(const WorldModelMetrics&)>& progress = {});

struct DreamTrainOptions {
  std::string world_model;
  std::vector<TrainModel> models;  // dreams start from their real initial states
  const rules::RuleLibrary* library = nullptr;
  cost::CostModel* cost = nullptr;
  std::string target, cost_model;  // recorded in the controller's checkpoint
  PpoConfig config;                // PPO settings; the env settings come from the world model
  int64_t episodes = 2000;         // dream episodes
  double temperature = 1.0;
  // Dream episodes stepped together by one world-model forward pass; they are also one PPO
  // update's episodes. Bigger batches make a dream step cheaper (see docs/rl.md).
  int batch = 64;
  uint64_t seed = 0;
  std::string out, log_path;
  int eval_every = 10;             // updates between greedy evaluations in the real environment (0: only at the end)
  // With an ensemble world model: a dream step's reward is the members' mean minus this many of
  // their standard deviations (MOPO's uncertainty-penalised reward, with the ensemble's
  // disagreement as the uncertainty), and the next state comes from a member drawn at random.
  double uncertainty_penalty = 0;
};

// One step of a greedy rollout: the rule applied ("" for NO-OP), its location index and the reward
// (predicted in the dream, measured in the real environment).
struct TraceStep {
  std::string rule;
  int location = 0;
  double reward = 0;
};

struct DreamSummary {
  int64_t updates = 0, dream_episodes = 0, dream_steps = 0;
  double dream_seconds = 0, dream_step_ms = 0, seconds = 0;
  double dream_score = 0;                  // mean dream return of the last update's episodes (penalised)
  double dream_score_raw = 0;              // the same with the members' mean reward, no penalty
  double disagreement = 0;                 // mean std of the members' reward per dream step, last update
  int ensemble = 1;
  std::map<std::string, double> real_improvement;  // greedy rollout of the final controller, real env
  double real_score = 0;                   // mean over models of real_improvement, in percent
  int64_t real_eval_steps = 0;             // real env steps spent on evaluations
  // The final controller's greedy rollout in the dream from each model's real initial state (the
  // dream's prediction of the real greedy rollout, unpenalised members' mean reward), in percent.
  std::map<std::string, double> dream_greedy_improvement;
  double dream_greedy_score = 0;           // mean over models
  // Both greedy rollouts step by step, per model: where the dream's promise departs from the real.
  std::map<std::string, std::vector<TraceStep>> dream_trace, real_trace;
};

Expected<DreamSummary> train_dream_agent(const DreamTrainOptions& o, const TrainProgress& progress = {});

}  // namespace rlflow::rl
