#pragma once
// Internal to rl: the dream (a batch of environments simulated by the world model) and the
// controller's rollouts in the real environment.
#include <random>

#include "rlflow/rl/world_model.h"
#include "world_model_data.h"
#include "world_model_net.h"

namespace rlflow::rl::wm {

// Where a dream starts: a real initial state (its latent and masks).
struct DreamStart {
  std::vector<float> z;
  std::vector<uint8_t> xfer_mask;  // N + 1
  std::vector<uint16_t> count;     // N
  MatchRows matches;               // match_rows of the real state (used by match_features world models)
};

// E dream environments stepped together by one forward pass of the world model. Rewards are
// the reward head's predictions; NO-OP ends an episode with reward 0 (the real env's rule);
// masks and location counts come from their heads; z' is sampled at temperature tau.
//
// With several members (an ensemble), every member's LSTM follows the same (z, a) sequence; each
// environment's z' is sampled from a member drawn uniformly at random at every step (MBPO's
// rollouts), masks, counts and the done flag are the members' mean, and the reward is the members'
// mean reward minus `penalty` times their standard deviation (MOPO's uncertainty-penalised reward).
// The controller's latent is [z, h of member 0], the member a real actor's LSTM uses.
class DreamBatch {
 public:
  DreamBatch(std::vector<WorldModelNet> members, EnvConfig env, double reward_std, double tau, double penalty = 0,
             uint64_t seed = 0);
  std::vector<Observation> reset(const std::vector<DreamStart>& starts);
  // Steps the environments `which` (indices into the batch) with `actions`.
  std::vector<Step> step(const std::vector<size_t>& which, const std::vector<Action>& actions);
  size_t size() const { return t_.size(); }
  // The last step's unpenalised rewards (the members' mean), in the order of `which`.
  const std::vector<double>& raw_rewards() const { return raw_; }
  // Mean over the dream steps so far of the members' reward standard deviation (0 for one member).
  // match_features world models: environment e's carried match lists (per xfer, in location order).
  const MatchRows& matches(size_t e) const { return matches_[e]; }
  double mean_disagreement() const { return disagreement_n_ ? disagreement_sum_ / static_cast<double>(disagreement_n_) : 0.0; }

 private:
  Observation observe(int64_t row, const float* mask_prob, const float* log_count) const;  // row of z_, h_[0]
  std::vector<WorldModelNet> members_;
  EnvConfig env_;
  double reward_std_, tau_, penalty_;
  std::mt19937_64 pick_;
  torch::Tensor z_;
  torch::Tensor counts_;              // [E, N] valid locations per xfer (count_state world models)
  std::vector<MatchRows> matches_;    // per environment: the carried match lists (match_features world models)
  std::vector<torch::Tensor> h_, c_;  // per member
  std::vector<int> t_;
  std::vector<double> raw_;
  double disagreement_sum_ = 0;
  int64_t disagreement_n_ = 0;
};

// The Environment interface over one dream.
class DreamEnv : public Environment {
 public:
  DreamEnv(std::vector<WorldModelNet> members, EnvConfig env, double reward_std, double tau, DreamStart start, double penalty = 0);
  Expected<Observation> reset() override;
  Expected<Step> step(const Action& a) override;
  int num_xfers() const override { return static_cast<int>(start_.count.size()); }
  size_t max_locations() const override { return env_.max_locations; }

 private:
  DreamBatch batch_;
  EnvConfig env_;
  DreamStart start_;
  Observation last_;
};

// The controller acting on real observations: z from the frozen encoder, h from the world
// model's LSTM fed with the real (z, a) sequence.
class RealActor {
 public:
  RealActor(ControllerNet ctrl, nets::GraphEncoder enc, WorldModelNet net) : ctrl_(std::move(ctrl)), enc_(std::move(enc)), net_(std::move(net)) {}
  void reset();  // before each episode
  // The controller's action in `o` (greedy or sampled; sets o.latent = [z, h]); it then waits
  // for advance().
  Action choose(Observation& o, bool greedy, std::mt19937_64& rng);
  // Feeds (z of the last chosen-on state, the action actually taken) to the LSTM.
  void advance(const Action& a);
  nets::GraphEncoder& encoder() { return enc_; }

 private:
  ControllerNet ctrl_;
  nets::GraphEncoder enc_;
  WorldModelNet net_;
  WorldModelNetImpl::State state_;
  torch::Tensor z_, counts_;
  // match_features: the carried match lists, as the dream and the data keep them; the row taken by
  // advance() is fitted to the counts of the state that follows at the next choose().
  MatchRows rows_;
  MatchRow taken_{};
  bool fresh_ = true, pending_ = false;
};

// A dream-controller checkpoint as a RealActor; it must have been trained with `rules`.
Expected<RealActor> load_real_actor(const std::string& path, const std::vector<const rules::Rule*>& rules);

// The best state itself stays in `env` (best_graph(), best_steps()).
struct RealRollout {
  double initial_cost = 0, best_cost = 0;
  int64_t steps = 0;
  std::vector<TraceStep> trace;  // every step's rule, location and real reward
};
Expected<RealRollout> real_rollout(RealActor& actor, GraphEnv& env, bool greedy, std::mt19937_64& rng);

}  // namespace rlflow::rl::wm
