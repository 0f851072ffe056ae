#pragma once
// Internal to rl (and its tests): the networks. The only rl header that includes torch.
#include <torch/torch.h>

#include <vector>

#include "rlflow/rl/observation.h"

namespace rlflow::rl::nets {

// Several graphs as one disconnected graph: node ids shifted by each graph's offset.
struct GraphBatch {
  torch::Tensor x, e, u;             // node [Ntot, Dn], edge [Etot, De], global [B, Dg] features
  torch::Tensor src, dst;            // [Etot] int64, batched node ids
  torch::Tensor node_graph, edge_graph;  // [Ntot], [Etot] int64: which graph each belongs to
  std::vector<int64_t> node_offset;  // first batched node id of each graph
  int64_t batch = 0;
};
GraphBatch make_batch(const std::vector<const GraphFeatures*>& graphs);

// The candidate locations of one chosen xfer per graph: row b*L + l lists the (batched) nodes
// that location l matched. Rows without nodes are masked out.
struct LocationIndex {
  torch::Tensor row, node;  // [K] int64 each
  torch::Tensor mask;       // [B, L] bool
  int64_t L = 0;
};

// Node features [N, node_feature_dim()] as a network with `op_vocab` op slots sees them: the slots of
// ops added after it was trained are folded into its Opaque slot (see src/rl/features.cpp).
torch::Tensor fit_node_features(const torch::Tensor& x, int op_vocab);

// Sum over segments with index_add_ (the GN aggregation); mean divides by the counts.
torch::Tensor segment_sum(const torch::Tensor& values, const torch::Tensor& index, int64_t segments);
torch::Tensor segment_mean(const torch::Tensor& values, const torch::Tensor& index, int64_t segments);

// Battaglia et al.'s graph network: each round updates edges from (edge, sender, receiver,
// global), nodes from (node, sum of incoming edges, sum of outgoing edges, global) and the global
// from (global, mean node, mean edge), with residual connections and layer norm.
struct GraphEncoderImpl : torch::nn::Module {
  GraphEncoderImpl(int node_dim, int edge_dim, int global_dim, int hidden, int rounds);
  struct Out {
    torch::Tensor nodes, global;  // [Ntot, H], [B, H]
  };
  Out forward(const GraphBatch& b);

  int hidden, rounds;
  int op_vocab;  // op one-hot slots the node input was built for: node_dim - the other node features
  torch::nn::Linear node_in{nullptr}, edge_in{nullptr}, global_in{nullptr};
  torch::nn::ModuleList edge_mlps, node_mlps, global_mlps, edge_norms, node_norms, global_norms;
};
TORCH_MODULE(GraphEncoder);

// Masked categorical helpers: masked entries get probability exactly 0, and their terms are
// dropped from the entropy so it stays finite.
torch::Tensor masked_log_softmax(const torch::Tensor& logits, const torch::Tensor& mask);
torch::Tensor masked_entropy(const torch::Tensor& logp, const torch::Tensor& mask);

// The hierarchical actor-critic: xfer head over N + 1 (last = NO-OP), location head conditioned
// on the chosen xfer and the matched nodes' embeddings, value head. All trained end to end.
struct PolicyNetImpl : torch::nn::Module {
  // op_vocab: the op slots of the checkpoint it will load (op_vocab_size() for a new network).
  PolicyNetImpl(int num_xfers, int hidden, int rounds, int op_vocab = op_vocab_size());
  GraphEncoderImpl::Out encode(const GraphBatch& b) { return encoder->forward(b); }
  torch::Tensor xfer_logits(const torch::Tensor& global);  // [B, N + 1]
  torch::Tensor value(const torch::Tensor& global);        // [B]
  // [B, L] logits of the locations of xfer[b] (int64 [B]).
  torch::Tensor location_logits(const GraphEncoderImpl::Out& enc, const torch::Tensor& xfer, const LocationIndex& loc);

  int num_xfers, hidden;
  GraphEncoder encoder{nullptr};
  torch::nn::Sequential xfer_head{nullptr}, value_head{nullptr}, location_head{nullptr};
  torch::nn::Embedding xfer_embedding{nullptr};
};
TORCH_MODULE(PolicyNet);

}  // namespace rlflow::rl::nets
