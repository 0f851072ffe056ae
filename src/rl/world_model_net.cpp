#include "world_model_net.h"

#include <cmath>

namespace rlflow::rl::wm {

namespace {

torch::nn::Sequential mlp(int in, int hidden, int out) {
  return torch::nn::Sequential(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, out));
}

torch::Tensor latent_batch(const std::vector<const std::vector<float>*>& rows, int64_t dim) {
  auto t = torch::empty({static_cast<int64_t>(rows.size()), dim});
  for (size_t b = 0; b < rows.size(); ++b) {
    if (static_cast<int64_t>(rows[b]->size()) != dim) throw std::runtime_error("latent observation of the wrong size");
    std::copy(rows[b]->begin(), rows[b]->end(), t.data_ptr<float>() + static_cast<int64_t>(b) * dim);
  }
  return t;
}

}  // namespace

WorldModelNetImpl::WorldModelNetImpl(int z, int n, int L, int h, int k, double lo, double hi, bool cs, int mf)
    : z_dim(z), num_xfers(n), max_locations(L), hidden(h), mixtures(k), count_state(cs), match_features(mf), log_sigma_min(lo),
      log_sigma_max(hi) {
  const int me = mf > 0 ? kMatchEmbedding : 0;
  z_mean = register_buffer("z_mean", torch::zeros({z}));
  z_std = register_buffer("z_std", torch::ones({z}));
  xfer_embedding = register_module("xfer_embedding", torch::nn::Embedding(n + 1, kXferEmbedding));
  location_embedding = register_module("location_embedding", torch::nn::Embedding(L, kLocationEmbedding));
  cell = register_module("cell", torch::nn::LSTMCell(z + kXferEmbedding + kLocationEmbedding + me + (cs ? kCountEmbedding : 0), h));
  mdn = register_module("mdn", torch::nn::Linear(h, k + 2 * k * z));
  reward = register_module("reward", torch::nn::Linear(h + me, 1));
  done = register_module("done", torch::nn::Linear(h, 1));
  mask = register_module("mask", torch::nn::Linear(h, n));
  count = register_module("count", torch::nn::Linear(h, n));
  if (cs) count_in = register_module("count_in", torch::nn::Linear(n, kCountEmbedding));
  if (mf > 0) {
    f_mean = register_buffer("f_mean", torch::zeros({mf}));
    f_std = register_buffer("f_std", torch::ones({mf}));
    // Two layers: a rewrite's reward is not monotone in its match's features (it depends on the xfer).
    match_in = register_module("match_in", torch::nn::Sequential(torch::nn::Linear(mf + kXferEmbedding, 64), torch::nn::ReLU(),
                                                                 torch::nn::Linear(64, kMatchEmbedding), torch::nn::ReLU()));
  }
}

void WorldModelNetImpl::set_feature_normalization(const torch::Tensor& mean, const torch::Tensor& std) {
  torch::NoGradGuard ng;
  f_mean.copy_(mean);
  f_std.copy_(std.clamp_min(1e-3));
}

void WorldModelNetImpl::set_normalization(const torch::Tensor& mean, const torch::Tensor& std) {
  torch::NoGradGuard ng;
  z_mean.copy_(mean);
  z_std.copy_(std.clamp_min(1e-4));
}

WorldModelNetImpl::State WorldModelNetImpl::initial(int64_t batch) const {
  return {torch::zeros({batch, hidden}), torch::zeros({batch, hidden})};
}

torch::Tensor WorldModelNetImpl::action_input(const torch::Tensor& xfer, const torch::Tensor& location, const torch::Tensor& features) {
  auto xe = xfer_embedding->forward(xfer);
  auto le = location_embedding->forward(location.clamp(0, max_locations - 1));
  if (match_features <= 0) return torch::cat({xe, le}, 1);
  auto f = features.defined() ? features : torch::zeros({xfer.size(0), match_features});
  // Last kMatchEmbedding columns: step() hands them to the reward head as well.
  return torch::cat({xe, le, match_in->forward(torch::cat({(f - f_mean) / f_std, xe}, 1))}, 1);
}

std::pair<WorldModelNetImpl::State, WorldModelNetImpl::Heads> WorldModelNetImpl::step(const torch::Tensor& z, const torch::Tensor& action,
                                                                                       const State& s, const torch::Tensor& counts) {
  auto in = count_state ? torch::cat({z, action, count_in->forward(torch::log1p(counts))}, 1) : torch::cat({z, action}, 1);
  auto hc = cell->forward(in, std::make_tuple(s.h, s.c));
  State next{std::get<0>(hc), std::get<1>(hc)};
  const int64_t B = z.size(0), K = mixtures, Z = z_dim;
  auto m = mdn->forward(next.h);
  Heads out;
  out.logit_pi = m.slice(1, 0, K);
  out.mu = m.slice(1, K, K + K * Z).view({B, K, Z});
  out.log_sigma = m.slice(1, K + K * Z, K + 2 * K * Z).view({B, K, Z}).clamp(log_sigma_min, log_sigma_max);
  out.reward = (match_features > 0 ? reward->forward(torch::cat({next.h, action.slice(1, action.size(1) - kMatchEmbedding)}, 1))
                                    : reward->forward(next.h))
                   .squeeze(1);
  out.done_logit = done->forward(next.h).squeeze(1);
  out.mask_logit = mask->forward(next.h);
  out.log_count = count->forward(next.h);
  return {next, out};
}

torch::Tensor WorldModelNetImpl::next_counts(const torch::Tensor& counts, const torch::Tensor& delta) const {
  return (counts + delta).round().clamp(0, max_locations);
}

torch::Tensor mdn_nll(const torch::Tensor& logit_pi, const torch::Tensor& mu, const torch::Tensor& log_sigma, const torch::Tensor& target) {
  const double log2pi = std::log(2 * M_PI);
  auto diff = (target.unsqueeze(1) - mu) * torch::exp(-log_sigma);  // [B, K, Z]
  auto log_n = (-0.5 * diff.pow(2) - log_sigma - 0.5 * log2pi).sum(2);  // [B, K]
  return -torch::logsumexp(torch::log_softmax(logit_pi, 1) + log_n, 1);
}

torch::Tensor mdn_sample(const torch::Tensor& logit_pi, const torch::Tensor& mu, const torch::Tensor& log_sigma, double tau) {
  const double t = std::max(tau, 1e-6);
  auto probs = torch::softmax(logit_pi / t, 1);
  auto k = torch::multinomial(probs, 1);  // [B, 1]
  const int64_t Z = mu.size(2);
  auto idx = k.unsqueeze(2).expand({mu.size(0), 1, Z});
  auto m = mu.gather(1, idx).squeeze(1);
  auto s = log_sigma.gather(1, idx).squeeze(1).exp();
  return m + s * std::sqrt(t) * torch::randn_like(m);
}

std::vector<std::pair<std::string, torch::nn::Module*>> ensemble_modules(const std::vector<WorldModelNet>& members,
                                                                         const nets::GraphEncoder& encoder) {
  std::vector<std::pair<std::string, torch::nn::Module*>> out;
  for (size_t k = 0; k < members.size(); ++k)
    out.emplace_back(k == 0 ? std::string("world_model") : "world_model_" + std::to_string(k), members[k].ptr().get());
  out.emplace_back("encoder", encoder.ptr().get());
  return out;
}

ControllerNetImpl::ControllerNetImpl(int in, int n, int h, int L) : in_dim(in), num_xfers(n), hidden(h), max_locations(L) {
  body = register_module("body", torch::nn::Sequential(torch::nn::Linear(in, h), torch::nn::ReLU(), torch::nn::Linear(h, h), torch::nn::ReLU()));
  xfer_head = register_module("xfer_head", mlp(h, h, n + 1));
  value_head = register_module("value_head", mlp(h, h, 1));
  location_head = register_module("location_head", mlp(3 * h, h, 1));
  xfer_embedding = register_module("xfer_embedding", torch::nn::Embedding(n + 1, h));
  position_embedding = register_module("position_embedding", torch::nn::Embedding(L, h));
}

torch::Tensor ControllerNetImpl::location_logits(const torch::Tensor& t, const torch::Tensor& xfer) {
  const int64_t B = t.size(0), L = max_locations;
  auto ctx = torch::cat({t, xfer_embedding->forward(xfer)}, 1).unsqueeze(1).expand({B, L, 2 * hidden});
  auto pos = position_embedding->weight.unsqueeze(0).expand({B, L, hidden});
  return location_head->forward(torch::cat({ctx, pos}, 2).reshape({B * L, 3 * hidden})).view({B, L});
}

std::vector<ppo::Choice> act(ControllerNet& net, const std::vector<const Observation*>& obs, bool greedy, std::mt19937_64& rng) {
  torch::NoGradGuard ng;
  std::vector<const std::vector<float>*> lat;
  std::vector<const std::vector<uint8_t>*> xm;
  for (const auto* o : obs) {
    lat.push_back(&o->latent);
    xm.push_back(&o->xfer_mask);
  }
  const int64_t B = static_cast<int64_t>(obs.size()), N1 = net->num_xfers + 1, L = net->max_locations;
  auto t = net->trunk(latent_batch(lat, net->in_dim));
  auto xmask = ppo::bool_rows(xm, N1);
  auto xlogp = nets::masked_log_softmax(net->xfer_logits(t), xmask);
  auto xprob = xlogp.exp().contiguous();
  auto values = net->value(t);
  std::vector<ppo::Choice> out(static_cast<size_t>(B));
  std::vector<int64_t> xs(static_cast<size_t>(B));
  std::vector<std::vector<uint8_t>> lm(static_cast<size_t>(B));
  std::vector<const std::vector<uint8_t>*> lmp;
  for (int64_t b = 0; b < B; ++b) {
    const int x = ppo::sample_row(xprob[b].data_ptr<float>(), xmask[b].data_ptr<bool>(), N1, greedy, rng);
    auto& c = out[static_cast<size_t>(b)];
    c.action.xfer = x;
    c.logp = xlogp[b][x].item<float>();
    c.value = values[b].item<float>();
    xs[static_cast<size_t>(b)] = x;
    lm[static_cast<size_t>(b)] = obs[static_cast<size_t>(b)]->location_mask(x, static_cast<size_t>(L));
    lmp.push_back(&lm[static_cast<size_t>(b)]);
  }
  auto lmask = ppo::bool_rows(lmp, L);
  auto llogp = nets::masked_log_softmax(net->location_logits(t, torch::tensor(xs, torch::kInt64)), lmask);
  auto lprob = llogp.exp().contiguous();
  for (int64_t b = 0; b < B; ++b) {
    auto& c = out[static_cast<size_t>(b)];
    if (c.action.xfer >= net->num_xfers) continue;
    const int l = ppo::sample_row(lprob[b].data_ptr<float>(), lmask[b].data_ptr<bool>(), L, greedy, rng);
    c.action.location = l;
    c.logp += llogp[b][l].item<float>();
  }
  return out;
}

ppo::Evaluated evaluate(ControllerNet& net, const std::vector<const ppo::Transition*>& batch) {
  std::vector<const std::vector<float>*> lat;
  std::vector<const std::vector<uint8_t>*> xm, lm;
  std::vector<int64_t> xs, ls;
  std::vector<float> has_loc;
  for (const auto* t : batch) {
    lat.push_back(&t->latent);
    xm.push_back(&t->xfer_mask);
    lm.push_back(&t->location_mask);
    xs.push_back(t->xfer);
    ls.push_back(t->location);
    has_loc.push_back(t->xfer < net->num_xfers ? 1.f : 0.f);
  }
  auto t = net->trunk(latent_batch(lat, net->in_dim));
  auto xmask = ppo::bool_rows(xm, net->num_xfers + 1);
  auto xlogp = nets::masked_log_softmax(net->xfer_logits(t), xmask);
  auto xt = torch::tensor(xs, torch::kInt64);
  auto lmask = ppo::bool_rows(lm, net->max_locations);
  auto llogp = nets::masked_log_softmax(net->location_logits(t, xt), lmask);
  auto hl = torch::tensor(has_loc);
  ppo::Evaluated ev;
  ev.logp = xlogp.gather(1, xt.unsqueeze(1)).squeeze(1) + hl * llogp.gather(1, torch::tensor(ls, torch::kInt64).unsqueeze(1)).squeeze(1);
  ev.entropy = nets::masked_entropy(xlogp, xmask) + hl * nets::masked_entropy(llogp, lmask);
  ev.value = net->value(t);
  return ev;
}

}  // namespace rlflow::rl::wm
