#pragma once
// Internal to rl: real rollouts for the world model, (z_t, a_t, r_t, done_t, masks_t), and their
// file format: a JSON header line, then per episode T, z[(T+1) x Z], mask[(T+1) x N],
// count[(T+1) x N] (uint16), xfer[T], location[T] (int32), reward[T] (float), done[T] (uint8),
// then (header match_features F > 0) feat[T x F] (float), little-endian. States carry the xfer mask
// without the NO-OP and each xfer's valid locations.
#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nets.h"
#include "rlflow/rl/environment.h"

namespace rlflow::rl::wm {

// What identifies a match to the world model (model.match_features): local features of its matched
// nodes, read from the observation's node features, so they do not change while rewrites elsewhere
// leave those nodes alone:
//   0 sum of the nodes' cost share (node cost / the episode's initial cost * 10), the reward's units
//   1 log1p(sum of the nodes' cost in us) / 10
//   2 max log2(1 + output numel) / 32       3 max kernel height / 7
//   4 max log2(1 + channels) / 16           5 max log2(1 + height) / 16
//   6 matched nodes / 8
// A row holds one more entry, not a network input: the position key (mean node id / nodes), by
// which the carried lists are ordered and new matches are placed near the rewrite that made them.
inline constexpr int kMatchFeatures = 7;
using MatchRow = std::array<float, kMatchFeatures + 1>;
// Per xfer, one row per location, in the environment's location order.
using MatchRows = std::vector<std::vector<MatchRow>>;

MatchRow match_row(const GraphFeatures& g, const rules::Match& m);
MatchRows match_rows(const Observation& o);
// The dream's (and the data's) bookkeeping of the match lists, in two halves around the world-model
// step. take_match: the row of (xfer, location), removed from its list (a rewrite consumes its match;
// zeros for NO-OP or an unknown location). fit_matches: then each xfer's list is made as long as its
// new count: surplus rows nearest the rewrite's position are dropped (the matches it destroyed), and
// missing ones are copies of the taken row placed at its position (the matches it created are next
// to it; their own features are unknown until the real graph is matched). Applied to a real episode
// with its real counts, this gives exactly the rows a dream gives with the same counts.
MatchRow take_match(MatchRows& rows, const Action& a);
void fit_matches(MatchRows& rows, const MatchRow& taken, const std::vector<uint16_t>& counts);

struct EpisodeData {
  int32_t T = 0;
  std::vector<float> z;         // (T + 1) x Z
  std::vector<uint8_t> mask;    // (T + 1) x N
  std::vector<uint16_t> count;  // (T + 1) x N
  std::vector<int32_t> xfer, location;
  std::vector<float> reward;
  std::vector<uint8_t> done;
  std::vector<float> feat;      // T x kMatchFeatures: the chosen match's carried features (0 for NO-OP)
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
