#pragma once
// Internal to rl: real rollouts for the world model, (z_t, a_t, r_t, done_t, masks_t), and their
// file format: a JSON header line, then per episode T, z[(T+1) x Z], mask[(T+1) x N],
// count[(T+1) x N] (uint16), xfer[T], location[T] (int32), reward[T] (float), done[T] (uint8),
// little-endian. States carry the xfer mask without the NO-OP and each xfer's valid locations.
#include <nlohmann/json.hpp>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nets.h"
#include "rlflow/rl/environment.h"

namespace rlflow::rl::wm {

struct EpisodeData {
  int32_t T = 0;
  std::vector<float> z;         // (T + 1) x Z
  std::vector<uint8_t> mask;    // (T + 1) x N
  std::vector<uint16_t> count;  // (T + 1) x N
  std::vector<int32_t> xfer, location;
  std::vector<float> reward;
  std::vector<uint8_t> done;
  int32_t model = 0;            // index into the header's models
};

struct DataSet {
  nlohmann::json header;  // z_dim, num_xfers, max_locations, encoder fingerprint, rules, models
  std::vector<EpisodeData> episodes;
  int64_t steps() const;
};

Expected<DataSet> read_data(const std::string& path);
Status write_data(const std::string& path, const DataSet& d);

// A fingerprint of the encoder's weights: data encoded by another encoder is not reused.
std::string encoder_fingerprint(nets::GraphEncoder& enc);
// z of each graph: the encoder's global embedding.
torch::Tensor encode(nets::GraphEncoder& enc, const std::vector<const GraphFeatures*>& graphs);

// The mask and location counts of a real observation, as stored.
void state_masks(const Observation& o, std::vector<uint8_t>& mask, std::vector<uint16_t>& count);

// The random data agent: NO-OP with probability noop_share, otherwise a uniform valid xfer and a
// uniform valid location of it.
Action random_action(const Observation& o, double noop_share, std::mt19937_64& rng);

// One real episode in `env`, actions from `choose` (called once per state, in order, from the
// reset on; it may fill the observation's latent). Returns its env-step seconds in `seconds`.
using ChooseAction = std::function<Expected<Action>(Observation&)>;
Expected<EpisodeData> record_episode(Environment& env, nets::GraphEncoder& enc, const ChooseAction& choose, double* seconds);

}  // namespace rlflow::rl::wm
