#pragma once
// What an RL agent sees of a graph: plain arrays (no torch here), turned into tensors by the
// networks. Costs are relative to the episode's initial cost so one agent serves many models.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "rlflow/ir/graph.h"
#include "rlflow/rules/match.h"

namespace rlflow::rl {

// Feature layout (documented in src/rl/features.cpp).
int node_feature_dim();              // at the current op vocabulary
int node_feature_dim(int op_vocab);  // as a network trained with `op_vocab` one-hot op slots sees it

// The op one-hot's slots: an append-only list of op names, so a slot keeps its meaning when ops are
// added. Checkpoints record the number of slots their network was trained with ("op_vocab").
inline constexpr int kLegacyOpVocab = 41;  // checkpoints written before the vocabulary was recorded
inline constexpr int kOpaqueSlot = 40;     // where a network sees the ops it never knew
int op_vocab_size();                       // slots: one per op kind, and slots held for kinds to come
std::string_view op_vocab_name(int slot);  // the kind's name; "" for a held slot and past the end
int op_feature_slot(ir::OpKind k);
int edge_feature_dim();
int global_feature_dim();

struct GraphFeatures {
  int32_t num_nodes = 0, num_edges = 0;
  std::vector<float> nodes;             // num_nodes x node_feature_dim()
  std::vector<int32_t> src, dst;        // edge endpoints (producer -> consumer), node ids
  std::vector<float> edges;             // num_edges x edge_feature_dim()
  std::vector<float> global;            // global_feature_dim()
};

// node_cost: per-node cost in ms (0 for free nodes); cost0: the episode's initial cost.
GraphFeatures featurize(const ir::Graph& g, const std::vector<double>& node_cost, double cost, double cost0,
                        double step_fraction);

// The action space of one state. Xfer x < N is rule x of the environment's rule list; x == N is
// NO-OP. Location l of xfer x is valid iff l < location_valid[x].size() and location_valid[x][l].
// A real state carries the graph and its matches; a dream state (world model) carries a latent
// vector instead, and its location_valid comes from the predicted location counts.
struct Observation {
  std::shared_ptr<const GraphFeatures> graph;
  std::vector<float> latent;
  std::vector<uint8_t> xfer_mask;                          // N + 1; NO-OP always valid
  std::vector<std::vector<rules::Match>> locations;        // per xfer, at most L matches
  std::vector<std::vector<uint8_t>> location_valid;        // per xfer, same length as locations[x]

  int num_xfers() const { return static_cast<int>(xfer_mask.size()) - 1; }
  bool valid(int xfer, int location) const;
  // Location mask of one xfer, padded to L entries (all false for NO-OP).
  std::vector<uint8_t> location_mask(int xfer, size_t L) const;
};

}  // namespace rlflow::rl
