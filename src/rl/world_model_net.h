#pragma once
// Internal to rl (and its tests): the MDN-RNN world model and the latent-state controller.
#include <random>

#include "ppo.h"

namespace rlflow::rl::wm {

// P(z_{t+1} | z_t, a_t, h_t) as a mixture of diagonal Gaussians, plus heads for the reward and
// done flag of (z_t, a_t) and for the next state's xfer mask (multi-label) and log(1 + number of
// valid locations) of each xfer, so a dream step never needs the real environment.
//
// With count_state, each xfer's number of valid locations c_t is an explicit part of the state:
// log(1 + c_t) is an input of the LSTM, the count head predicts the change c_{t+1} - c_t (the
// state-difference parametrisation of PETS and MBPO), and the dream carries c forward with the
// rounded change, its mask being c >= 1. Applying a rewrite typically consumes one of its matches
// (a change of -1 at any count), so the dream runs out of matches where the real graph does,
// instead of extrapolating "still applicable" beyond the few applications a random agent's
// episodes show. (A categorical change sampled at the dream's temperature was tried: the
// controller learned to exploit the samples where a rewrite did not consume its match.)
//
// With match_features F > 0, an action is also the chosen match's feature vector (world_model_data.h:
// its nodes' cost share, size and kernel), which the dream carries per location as it carries the
// counts. A location index alone does not say which of several alike matches a rewrite hits, and
// their rewards differ (on squeezenet1_1 2.27, 1.07 or 0.69 points by fire module). The features,
// embedded together with the xfer, enter the LSTM (so the next-state and all other heads see them)
// and the reward head directly.
struct WorldModelNetImpl : torch::nn::Module {
  WorldModelNetImpl(int z_dim, int num_xfers, int max_locations, int hidden, int mixtures, double log_sigma_min, double log_sigma_max,
                    bool count_state = false, int match_features = 0);
  struct State {
    torch::Tensor h, c;  // [B, hidden]
  };
  struct Heads {
    torch::Tensor logit_pi, mu, log_sigma;  // [B, K], [B, K, Z], [B, K, Z] (log sigma clamped)
    torch::Tensor reward, done_logit;        // [B]
    torch::Tensor mask_logit;                // [B, N]
    torch::Tensor log_count;                 // [B, N]: log(1 + c_{t+1}); with count_state, c_{t+1} - c_t
  };
  State initial(int64_t batch) const;
  // The world model (and the controller) see z standardised per dimension with the training
  // data's mean and std (buffers, saved with the model), so the log-sigma floor means the same
  // relative precision in every dimension.
  torch::Tensor normalize(const torch::Tensor& z) const { return (z - z_mean) / z_std; }
  void set_normalization(const torch::Tensor& mean, const torch::Tensor& std);
  // match_features: the features are standardised too (the data's mean and std over its rewrites).
  // Alike matches differ by a few hundredths in a raw feature (squeezenet1_1's fire modules: cost
  // shares 0.55, 0.59, 0.64 for rewards 1.07, 1.05, 2.27), too little for the embedding to resolve.
  void set_feature_normalization(const torch::Tensor& mean, const torch::Tensor& std);
  // LSTM input for actions: learned embeddings of the xfer (N + 1 entries; a lookup, not a one-hot
  // matmul, which was a third of a dream step's FLOPs at N = 321) and of the location index
  // (int64 tensors [B]). A scalar location / L made neighbouring matches indistinguishable.
  // With match_features, `features` [B, F] (float) is the chosen match's feature vector (zeros for NO-OP).
  torch::Tensor action_input(const torch::Tensor& xfer, const torch::Tensor& location, const torch::Tensor& features = {});
  // `counts` [B, N]: c_t, each xfer's valid locations (used only with count_state).
  std::pair<State, Heads> step(const torch::Tensor& z, const torch::Tensor& action, const State& s, const torch::Tensor& counts = {});
  // With count_state: c_{t+1} from c_t and the count head's change, rounded and clamped to [0, L].
  torch::Tensor next_counts(const torch::Tensor& counts, const torch::Tensor& delta) const;

  static constexpr int kXferEmbedding = 32, kLocationEmbedding = 16, kCountEmbedding = 32, kMatchEmbedding = 32;
  int z_dim, num_xfers, max_locations, hidden, mixtures;
  bool count_state = false;
  int match_features = 0;
  double log_sigma_min, log_sigma_max;
  torch::Tensor z_mean, z_std;  // [Z]
  torch::nn::Embedding xfer_embedding{nullptr}, location_embedding{nullptr};
  torch::nn::LSTMCell cell{nullptr};
  torch::nn::Linear mdn{nullptr}, reward{nullptr}, done{nullptr}, mask{nullptr}, count{nullptr};
  torch::nn::Linear count_in{nullptr};  // count_state: log(1 + c_t) -> LSTM input
  torch::Tensor f_mean, f_std;             // [F] (match_features)
  torch::nn::Sequential match_in{nullptr};  // match_features: [features, xfer embedding] -> action input and reward head
};
TORCH_MODULE(WorldModelNet);

// Negative log-likelihood of `target` [B, Z] under the mixture, per row, via log-sum-exp.
torch::Tensor mdn_nll(const torch::Tensor& logit_pi, const torch::Tensor& mu, const torch::Tensor& log_sigma, const torch::Tensor& target);
// One sample per row at temperature tau: mixture logits divided by tau, Gaussian noise scaled by
// sqrt(tau). Uses torch's global generator.
torch::Tensor mdn_sample(const torch::Tensor& logit_pi, const torch::Tensor& mu, const torch::Tensor& log_sigma, double tau);

// The controller: acts from a latent state [z, h] alone (it must work inside the dream).
// Location logits come from the chosen xfer's embedding and a learned embedding of the location
// index, conditioned on the state.
struct ControllerNetImpl : torch::nn::Module {
  ControllerNetImpl(int in_dim, int num_xfers, int hidden, int max_locations);
  torch::Tensor trunk(const torch::Tensor& x) { return body->forward(x); }
  torch::Tensor xfer_logits(const torch::Tensor& t) { return xfer_head->forward(t); }
  torch::Tensor value(const torch::Tensor& t) { return value_head->forward(t).squeeze(1); }
  torch::Tensor location_logits(const torch::Tensor& t, const torch::Tensor& xfer);  // [B, L]

  int in_dim, num_xfers, hidden, max_locations;
  torch::nn::Sequential body{nullptr}, xfer_head{nullptr}, value_head{nullptr}, location_head{nullptr};
  torch::nn::Embedding xfer_embedding{nullptr}, position_embedding{nullptr};
};
TORCH_MODULE(ControllerNet);

// Checkpoint names of an ensemble and its encoder: "world_model" (member 0, the name a one-member
// world model has always had), "world_model_1", ..., then "encoder" (last).
std::vector<std::pair<std::string, torch::nn::Module*>> ensemble_modules(const std::vector<WorldModelNet>& members,
                                                                         const nets::GraphEncoder& encoder);

std::vector<ppo::Choice> act(ControllerNet& net, const std::vector<const Observation*>& obs, bool greedy, std::mt19937_64& rng);
ppo::Evaluated evaluate(ControllerNet& net, const std::vector<const ppo::Transition*>& batch);

}  // namespace rlflow::rl::wm
