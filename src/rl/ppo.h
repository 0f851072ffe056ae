#pragma once
// Internal to rl (and its tests): acting, GAE, the PPO loss and the update.
#include <functional>
#include <random>
#include <vector>

#include "nets.h"
#include "rlflow/rl/agent.h"
#include "rlflow/rl/config.h"
#include "rlflow/rl/environment.h"

namespace rlflow::rl::dist {
class Comm;
}

namespace rlflow::rl::ppo {

// One step as PPO needs it again at update time. Both masks are stored, so the update
// re-evaluates log-probabilities under exactly the masks the action was sampled with.
struct Transition {
  std::shared_ptr<const GraphFeatures> graph;
  std::vector<uint8_t> xfer_mask;                     // N + 1
  int xfer = 0, location = 0;
  std::vector<uint8_t> location_mask;                 // the chosen xfer's locations (empty for NO-OP)
  std::vector<std::vector<int32_t>> location_nodes;   // nodes each of those locations matched
  float logp = 0, value = 0, reward = 0;
  bool done = false;
  float advantage = 0, ret = 0;                       // filled by compute_advantages
  std::vector<float> latent;                          // latent-state policies (the dream controller)
};

struct Choice {
  Action action;
  float logp = 0, value = 0;
};

// Picks an action for each observation: argmax of both heads (greedy) or a sample drawn with
// `rng`. Masked actions have probability 0 and are never chosen.
std::vector<Choice> act(nets::PolicyNet& net, const std::vector<const Observation*>& obs, size_t L, bool greedy,
                        std::mt19937_64& rng);
// The same with one generator per observation (each episode draws from its own stream, so what an
// episode samples does not depend on which other episodes share its batch, process or rank).
std::vector<Choice> act(nets::PolicyNet& net, const std::vector<const Observation*>& obs, size_t L, bool greedy,
                        const std::vector<std::mt19937_64*>& rngs);

// The `k` most likely rewrites of each observation under the policy (joint log-probability of the
// xfer and its location, NO-OP left out), most likely first: the moves a policy-guided search
// expands.
std::vector<std::vector<Choice>> top_actions(nets::PolicyNet& net, const std::vector<const Observation*>& obs, size_t L, int k);

// Index of the chosen entry of one probability row (argmax when greedy); -1 if none is valid.
int sample_row(const float* p, const bool* mask, int64_t n, bool greedy, std::mt19937_64& rng);
torch::Tensor bool_rows(const std::vector<const std::vector<uint8_t>*>& rows, int64_t width);

Transition make_transition(const Observation& o, const Choice& c);

// Generalised advantage estimation over a flat sequence of steps; done[t] ends an episode
// (no bootstrapping across it). Returns advantages; `returns` gets advantage + value.
std::vector<float> gae(const std::vector<float>& rewards, const std::vector<float>& values, const std::vector<uint8_t>& done,
                       double gamma, double lambda, std::vector<float>* returns);
void compute_advantages(std::vector<Transition>& data, const PpoConfig& cfg);

struct Evaluated {
  torch::Tensor logp, entropy, value;  // [B] each
  torch::Tensor xfer_logp;             // [B, N + 1]: every xfer (masked ones -inf)
  torch::Tensor location_logp;         // [B, L]: the locations of each row's chosen xfer
};
Evaluated evaluate(nets::PolicyNet& net, const std::vector<const Transition*>& batch, size_t L);

struct LossTerms {
  torch::Tensor total, policy, value, entropy, approx_kl, clip_fraction;
};
LossTerms ppo_loss(const Evaluated& ev, const torch::Tensor& old_logp, const torch::Tensor& advantages,
                   const torch::Tensor& returns, const PpoConfig& cfg);

struct UpdateStats {
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0;
  int epochs = 0, minibatches = 0;
  bool early_stop = false;
};
// The update's statistics into a training-progress record.
inline void record(const UpdateStats& s, UpdateLog& u) {
  u.policy_loss = s.policy_loss;
  u.value_loss = s.value_loss;
  u.entropy = s.entropy;
  u.approx_kl = s.approx_kl;
  u.clip_fraction = s.clip_fraction;
  u.ppo_epochs = s.epochs;
}
using Evaluator = std::function<Evaluated(const std::vector<const Transition*>&)>;
// Data-parallel PPO: this rank holds part of an update's transitions. `global_index[i]` is where
// data[i] stands in the whole update (every rank's episodes, in episode order), which has
// `global_size` transitions. Every rank draws the same minibatch order over the whole update,
// evaluates its own members, and the gradients (each rank's share of the minibatch mean) are summed
// across ranks before the clipped step, so the ranks' parameters stay equal and equal to a
// single-process update over the same data, up to floating-point summation order.
struct Shard {
  dist::Comm* comm = nullptr;
  int64_t global_size = 0;
  std::vector<int64_t> global_index;
};
// PPO epochs over `data` for any actor-critic: `eval` re-evaluates a minibatch under the current
// parameters `params`. With a shard, an error is a failed collective.
Expected<UpdateStats> update(const Evaluator& eval, std::vector<torch::Tensor> params, torch::optim::Optimizer& opt,
                             const std::vector<Transition>& data, const PpoConfig& cfg, std::mt19937_64& rng,
                             const Shard* shard);
UpdateStats update(const Evaluator& eval, std::vector<torch::Tensor> params, torch::optim::Optimizer& opt,
                   const std::vector<Transition>& data, const PpoConfig& cfg, std::mt19937_64& rng);
// The policy network's update (the model-free trainer), data-parallel when given a shard.
Expected<UpdateStats> update(nets::PolicyNet& net, torch::optim::Optimizer& opt, const std::vector<Transition>& data,
                             const PpoConfig& cfg, std::mt19937_64& rng, const Shard* shard = nullptr);

}  // namespace rlflow::rl::ppo
