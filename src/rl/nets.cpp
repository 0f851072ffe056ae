#include "nets.h"

namespace rlflow::rl::nets {

namespace {

torch::nn::Sequential mlp(int in, int hidden, int out) {
  return torch::nn::Sequential(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, out));
}

torch::Tensor as_long(const std::vector<int64_t>& v) {
  return torch::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kInt64).clone();
}

}  // namespace

GraphBatch make_batch(const std::vector<const GraphFeatures*>& graphs) {
  GraphBatch b;
  b.batch = static_cast<int64_t>(graphs.size());
  int64_t nn = 0, ne = 0;
  for (const auto* g : graphs) {
    b.node_offset.push_back(nn);
    nn += g->num_nodes;
    ne += g->num_edges;
  }
  const int dn = node_feature_dim(), de = edge_feature_dim(), dg = global_feature_dim();
  b.x = torch::empty({nn, dn});
  b.e = torch::empty({ne, de});
  b.u = torch::empty({b.batch, dg});
  std::vector<int64_t> src(static_cast<size_t>(ne)), dst(static_cast<size_t>(ne)), ng(static_cast<size_t>(nn)),
      eg(static_cast<size_t>(ne));
  float* px = b.x.data_ptr<float>();
  float* pe = b.e.data_ptr<float>();
  float* pu = b.u.data_ptr<float>();
  int64_t n0 = 0, e0 = 0;
  for (size_t k = 0; k < graphs.size(); ++k) {
    const auto& g = *graphs[k];
    std::copy(g.nodes.begin(), g.nodes.end(), px + n0 * dn);
    std::copy(g.edges.begin(), g.edges.end(), pe + e0 * de);
    std::copy(g.global.begin(), g.global.end(), pu + static_cast<int64_t>(k) * dg);
    for (int32_t i = 0; i < g.num_nodes; ++i) ng[static_cast<size_t>(n0 + i)] = static_cast<int64_t>(k);
    for (int32_t j = 0; j < g.num_edges; ++j) {
      src[static_cast<size_t>(e0 + j)] = n0 + g.src[static_cast<size_t>(j)];
      dst[static_cast<size_t>(e0 + j)] = n0 + g.dst[static_cast<size_t>(j)];
      eg[static_cast<size_t>(e0 + j)] = static_cast<int64_t>(k);
    }
    n0 += g.num_nodes;
    e0 += g.num_edges;
  }
  b.src = as_long(src);
  b.dst = as_long(dst);
  b.node_graph = as_long(ng);
  b.edge_graph = as_long(eg);
  return b;
}

torch::Tensor fit_node_features(const torch::Tensor& x, int op_vocab) {
  const int64_t now = op_vocab_size();
  if (op_vocab >= now) return x;
  using torch::indexing::Slice;
  auto known = x.index({Slice(), Slice(0, op_vocab)}).clone();
  known.select(1, kOpaqueSlot).add_(x.index({Slice(), Slice(op_vocab, now)}).sum(1));
  return torch::cat({known, x.index({Slice(), Slice(now, torch::indexing::None)})}, 1);
}

torch::Tensor segment_sum(const torch::Tensor& values, const torch::Tensor& index, int64_t segments) {
  auto out = torch::zeros({segments, values.size(1)}, values.options());
  return out.index_add_(0, index, values);
}

torch::Tensor segment_mean(const torch::Tensor& values, const torch::Tensor& index, int64_t segments) {
  auto count = torch::zeros({segments}, values.options()).index_add_(0, index, torch::ones({index.size(0)}, values.options()));
  return segment_sum(values, index, segments) / count.clamp_min(1.0).unsqueeze(1);
}

GraphEncoderImpl::GraphEncoderImpl(int node_dim, int edge_dim, int global_dim, int h, int r)
    : hidden(h), rounds(r), op_vocab(node_dim - (node_feature_dim() - op_vocab_size())) {
  node_in = register_module("node_in", torch::nn::Linear(node_dim, h));
  edge_in = register_module("edge_in", torch::nn::Linear(edge_dim, h));
  global_in = register_module("global_in", torch::nn::Linear(global_dim, h));
  for (int k = 0; k < r; ++k) {
    edge_mlps->push_back(mlp(4 * h, h, h));
    node_mlps->push_back(mlp(4 * h, h, h));
    global_mlps->push_back(mlp(3 * h, h, h));
    edge_norms->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
    node_norms->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
    global_norms->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
  }
  register_module("edge_mlps", edge_mlps);
  register_module("node_mlps", node_mlps);
  register_module("global_mlps", global_mlps);
  register_module("edge_norms", edge_norms);
  register_module("node_norms", node_norms);
  register_module("global_norms", global_norms);
}

GraphEncoderImpl::Out GraphEncoderImpl::forward(const GraphBatch& b) {
  const int64_t N = b.x.size(0), B = b.batch;
  auto v = torch::relu(node_in->forward(fit_node_features(b.x, op_vocab)));
  auto e = torch::relu(edge_in->forward(b.e));
  auto u = torch::relu(global_in->forward(b.u));
  for (int k = 0; k < rounds; ++k) {
    auto ue = u.index_select(0, b.edge_graph);
    auto e_new = edge_mlps[k]->as<torch::nn::Sequential>()->forward(
        torch::cat({e, v.index_select(0, b.src), v.index_select(0, b.dst), ue}, 1));
    e = edge_norms[k]->as<torch::nn::LayerNorm>()->forward(e + e_new);
    auto incoming = segment_sum(e, b.dst, N), outgoing = segment_sum(e, b.src, N);
    auto v_new = node_mlps[k]->as<torch::nn::Sequential>()->forward(
        torch::cat({v, incoming, outgoing, u.index_select(0, b.node_graph)}, 1));
    v = node_norms[k]->as<torch::nn::LayerNorm>()->forward(v + v_new);
    auto u_new = global_mlps[k]->as<torch::nn::Sequential>()->forward(
        torch::cat({u, segment_mean(v, b.node_graph, B), segment_mean(e, b.edge_graph, B)}, 1));
    u = global_norms[k]->as<torch::nn::LayerNorm>()->forward(u + u_new);
  }
  return {v, u};
}

torch::Tensor masked_log_softmax(const torch::Tensor& logits, const torch::Tensor& mask) {
  return torch::log_softmax(logits.masked_fill(mask.logical_not(), -1e9), -1);
}

torch::Tensor masked_entropy(const torch::Tensor& logp, const torch::Tensor& mask) {
  return -(logp.exp() * logp).masked_fill(mask.logical_not(), 0.0).sum(-1);
}

PolicyNetImpl::PolicyNetImpl(int n, int h, int rounds, int op_vocab) : num_xfers(n), hidden(h) {
  encoder = register_module("encoder", GraphEncoder(node_feature_dim(op_vocab), edge_feature_dim(), global_feature_dim(), h, rounds));
  xfer_head = register_module("xfer_head", mlp(h, h, n + 1));
  value_head = register_module("value_head", mlp(h, h, 1));
  location_head = register_module("location_head", mlp(3 * h, h, 1));
  xfer_embedding = register_module("xfer_embedding", torch::nn::Embedding(n + 1, h));
}

torch::Tensor PolicyNetImpl::xfer_logits(const torch::Tensor& global) { return xfer_head->forward(global); }

torch::Tensor PolicyNetImpl::value(const torch::Tensor& global) { return value_head->forward(global).squeeze(1); }

torch::Tensor PolicyNetImpl::location_logits(const GraphEncoderImpl::Out& enc, const torch::Tensor& xfer, const LocationIndex& loc) {
  const int64_t B = xfer.size(0), L = loc.L;
  // A location's embedding: the mean of the embeddings of the nodes it matched.
  auto matched = segment_mean(enc.nodes.index_select(0, loc.node), loc.row, B * L);
  auto per_graph = torch::cat({xfer_embedding->forward(xfer), enc.global}, 1);  // [B, 2H]
  auto ctx = per_graph.unsqueeze(1).expand({B, L, 2 * hidden}).reshape({B * L, 2 * hidden});
  return location_head->forward(torch::cat({matched, ctx}, 1)).view({B, L});
}

}  // namespace rlflow::rl::nets
