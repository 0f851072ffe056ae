#include "ppo.h"

#include <algorithm>
#include <numeric>

#include "distributed.h"

namespace rlflow::rl::ppo {

torch::Tensor bool_rows(const std::vector<const std::vector<uint8_t>*>& rows, int64_t width) {
  auto t = torch::zeros({static_cast<int64_t>(rows.size()), width}, torch::kBool);
  auto a = t.accessor<bool, 2>();
  for (size_t b = 0; b < rows.size(); ++b)
    for (size_t k = 0; k < std::min<size_t>(rows[b]->size(), static_cast<size_t>(width)); ++k) a[b][k] = (*rows[b])[k] != 0;
  return t;
}

namespace {

// row b*L + l -> the batched ids of the nodes location l of graph b matched.
nets::LocationIndex location_index(const std::vector<const std::vector<std::vector<int32_t>>*>& nodes,
                                   const std::vector<const std::vector<uint8_t>*>& masks, const std::vector<int64_t>& offset,
                                   int64_t L) {
  std::vector<int64_t> row, node;
  for (size_t b = 0; b < nodes.size(); ++b)
    for (size_t l = 0; l < std::min<size_t>(nodes[b]->size(), static_cast<size_t>(L)); ++l)
      for (auto n : (*nodes[b])[l]) {
        row.push_back(static_cast<int64_t>(b) * L + static_cast<int64_t>(l));
        node.push_back(offset[b] + n);
      }
  nets::LocationIndex li;
  li.L = L;
  li.row = torch::tensor(row, torch::kInt64);
  li.node = torch::tensor(node, torch::kInt64);
  li.mask = bool_rows(masks, L);
  return li;
}

}  // namespace

int sample_row(const float* p, const bool* mask, int64_t n, bool greedy, std::mt19937_64& rng) {
  int best = -1;
  double total = 0;
  for (int64_t k = 0; k < n; ++k)
    if (mask[k]) {
      total += p[k];
      if (best < 0 || p[k] > p[best]) best = static_cast<int>(k);
    }
  if (greedy || best < 0 || total <= 0) return best;
  double r = std::uniform_real_distribution<double>(0.0, total)(rng);
  int last = best;
  for (int64_t k = 0; k < n; ++k) {
    if (!mask[k] || p[k] <= 0) continue;
    last = static_cast<int>(k);
    r -= p[k];
    if (r < 0) return static_cast<int>(k);
  }
  return last;  // rounding: the last valid entry with mass
}

namespace {

std::vector<std::vector<int32_t>> matched_nodes(const std::vector<rules::Match>& ms) {
  std::vector<std::vector<int32_t>> out;
  out.reserve(ms.size());
  for (const auto& m : ms) out.emplace_back(m.nodes.begin(), m.nodes.end());
  return out;
}

}  // namespace

namespace {

// The policy's forward pass up to the xfer head, for a batch of observations.
struct Encoded {
  nets::GraphBatch batch;
  nets::GraphEncoderImpl::Out enc;
  torch::Tensor xmask, xlogp;  // [B, N + 1]
};

Encoded encode_observations(nets::PolicyNet& net, const std::vector<const Observation*>& obs) {
  std::vector<const GraphFeatures*> graphs;
  std::vector<const std::vector<uint8_t>*> xmasks;
  for (const auto* o : obs) {
    graphs.push_back(o->graph.get());
    xmasks.push_back(&o->xfer_mask);
  }
  Encoded e;
  e.batch = nets::make_batch(graphs);
  e.enc = net->encode(e.batch);
  e.xmask = bool_rows(xmasks, net->num_xfers + 1);
  e.xlogp = nets::masked_log_softmax(net->xfer_logits(e.enc.global), e.xmask).contiguous();
  return e;
}

// The location head for xfer xs[b] of each row b (NO-OP rows get no locations): log-probabilities
// [B, L], and the valid locations in `mask`.
torch::Tensor location_logp(nets::PolicyNet& net, const Encoded& e, const std::vector<const Observation*>& obs,
                            const std::vector<int64_t>& xs, size_t L, torch::Tensor* mask) {
  const size_t B = obs.size();
  std::vector<std::vector<std::vector<int32_t>>> nodes(B);
  std::vector<std::vector<uint8_t>> lmasks(B);
  std::vector<const std::vector<std::vector<int32_t>>*> np;
  std::vector<const std::vector<uint8_t>*> mp;
  for (size_t b = 0; b < B; ++b) {
    const int x = static_cast<int>(xs[b]);
    if (x < net->num_xfers) {
      nodes[b] = matched_nodes(obs[b]->locations[static_cast<size_t>(x)]);
      lmasks[b] = obs[b]->location_mask(x, L);
    }
    np.push_back(&nodes[b]);
    mp.push_back(&lmasks[b]);
  }
  auto li = location_index(np, mp, e.batch.node_offset, static_cast<int64_t>(L));
  *mask = li.mask;
  return nets::masked_log_softmax(net->location_logits(e.enc, torch::tensor(xs, torch::kInt64), li), li.mask).contiguous();
}

}  // namespace

std::vector<Choice> act(nets::PolicyNet& net, const std::vector<const Observation*>& obs, size_t L, bool greedy,
                        std::mt19937_64& rng) {
  return act(net, obs, L, greedy, std::vector<std::mt19937_64*>(obs.size(), &rng));
}

std::vector<Choice> act(nets::PolicyNet& net, const std::vector<const Observation*>& obs, size_t L, bool greedy,
                        const std::vector<std::mt19937_64*>& rngs) {
  torch::NoGradGuard no_grad;
  const int64_t B = static_cast<int64_t>(obs.size()), N1 = net->num_xfers + 1;
  auto e = encode_observations(net, obs);
  auto values = net->value(e.enc.global).contiguous();
  auto xprob = e.xlogp.exp().contiguous();
  std::vector<Choice> out(static_cast<size_t>(B));
  std::vector<int64_t> xs(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int x = sample_row(xprob[b].data_ptr<float>(), e.xmask[b].data_ptr<bool>(), N1, greedy, *rngs[static_cast<size_t>(b)]);
    out[static_cast<size_t>(b)].action.xfer = x;
    out[static_cast<size_t>(b)].logp = e.xlogp[b][x].item<float>();
    out[static_cast<size_t>(b)].value = values[b].item<float>();
    xs[static_cast<size_t>(b)] = x;
  }
  // Location head for the chosen xfers.
  torch::Tensor lmask;
  auto llogp = location_logp(net, e, obs, xs, L, &lmask);
  auto lprob = llogp.exp().contiguous();
  for (int64_t b = 0; b < B; ++b) {
    auto& c = out[static_cast<size_t>(b)];
    if (c.action.xfer >= net->num_xfers) continue;  // NO-OP: no location
    const int l = sample_row(lprob[b].data_ptr<float>(), lmask[b].data_ptr<bool>(), static_cast<int64_t>(L), greedy,
                             *rngs[static_cast<size_t>(b)]);
    c.action.location = l;
    c.logp += llogp[b][l].item<float>();
  }
  return out;
}

std::vector<std::vector<Choice>> top_actions(nets::PolicyNet& net, const std::vector<const Observation*>& obs, size_t L, int k) {
  torch::NoGradGuard no_grad;
  const int64_t B = static_cast<int64_t>(obs.size()), N = net->num_xfers;
  auto e = encode_observations(net, obs);
  // Per row, its valid xfers (NO-OP excluded), most likely first; at most k of them can hold a top-k move.
  std::vector<std::vector<int64_t>> xfers(static_cast<size_t>(B));
  size_t depth = 0;
  for (int64_t b = 0; b < B; ++b) {
    auto& xs = xfers[static_cast<size_t>(b)];
    for (int64_t x = 0; x < N; ++x)
      if (obs[static_cast<size_t>(b)]->xfer_mask[static_cast<size_t>(x)]) xs.push_back(x);
    const float* row = e.xlogp[b].data_ptr<float>();
    std::stable_sort(xs.begin(), xs.end(), [&](int64_t a, int64_t c) { return row[a] > row[c]; });
    if (xs.size() > static_cast<size_t>(k)) xs.resize(static_cast<size_t>(k));
    depth = std::max(depth, xs.size());
  }
  std::vector<std::vector<Choice>> out(static_cast<size_t>(B));
  // One location-head pass per rank j: row b scores the locations of its j-th xfer (rows with
  // fewer xfers repeat their last, and those results are ignored; rows with none score NO-OP).
  for (size_t j = 0; j < depth; ++j) {
    std::vector<int64_t> xs(static_cast<size_t>(B), N);
    for (int64_t b = 0; b < B; ++b) {
      const auto& cand = xfers[static_cast<size_t>(b)];
      if (!cand.empty()) xs[static_cast<size_t>(b)] = cand[std::min(j, cand.size() - 1)];
    }
    torch::Tensor lmask;
    auto llogp = location_logp(net, e, obs, xs, L, &lmask);
    for (int64_t b = 0; b < B; ++b) {
      if (j >= xfers[static_cast<size_t>(b)].size()) continue;
      const auto x = xs[static_cast<size_t>(b)];
      const float* lrow = llogp[b].data_ptr<float>();
      const bool* valid = lmask[b].data_ptr<bool>();
      const float xl = e.xlogp[b][x].item<float>();
      for (int64_t l = 0; l < static_cast<int64_t>(L); ++l)
        if (valid[l]) out[static_cast<size_t>(b)].push_back({Action{static_cast<int>(x), static_cast<int>(l)}, xl + lrow[l], 0.f});
    }
  }
  for (auto& row : out) {
    std::stable_sort(row.begin(), row.end(), [](const Choice& a, const Choice& c) { return a.logp > c.logp; });
    if (row.size() > static_cast<size_t>(k)) row.resize(static_cast<size_t>(k));
  }
  return out;
}

Transition make_transition(const Observation& o, const Choice& c) {
  Transition t;
  t.graph = o.graph;
  t.xfer_mask = o.xfer_mask;
  t.xfer = c.action.xfer;
  t.location = c.action.location;
  t.latent = o.latent;
  if (c.action.xfer < o.num_xfers()) {
    t.location_mask = o.location_valid[static_cast<size_t>(c.action.xfer)];
    if (static_cast<size_t>(c.action.xfer) < o.locations.size())
      t.location_nodes = matched_nodes(o.locations[static_cast<size_t>(c.action.xfer)]);
  }
  t.logp = c.logp;
  t.value = c.value;
  return t;
}

std::vector<float> gae(const std::vector<float>& rewards, const std::vector<float>& values, const std::vector<uint8_t>& done,
                       double gamma, double lambda, std::vector<float>* returns) {
  const size_t T = rewards.size();
  std::vector<float> adv(T, 0.f);
  double next_adv = 0, next_value = 0;
  for (size_t i = T; i-- > 0;) {
    if (done[i]) next_adv = next_value = 0;
    const double delta = rewards[i] + gamma * next_value - values[i];
    next_adv = delta + gamma * lambda * next_adv;
    adv[i] = static_cast<float>(next_adv);
    next_value = values[i];
  }
  if (returns) {
    returns->resize(T);
    for (size_t i = 0; i < T; ++i) (*returns)[i] = adv[i] + values[i];
  }
  return adv;
}

void compute_advantages(std::vector<Transition>& data, const PpoConfig& cfg) {
  std::vector<float> r, v, ret;
  std::vector<uint8_t> d;
  for (const auto& t : data) {
    r.push_back(t.reward);
    v.push_back(t.value);
    d.push_back(t.done ? 1 : 0);
  }
  auto adv = gae(r, v, d, cfg.gamma, cfg.gae_lambda, &ret);
  for (size_t i = 0; i < data.size(); ++i) {
    data[i].advantage = adv[i];
    data[i].ret = ret[i];
  }
}

Evaluated evaluate(nets::PolicyNet& net, const std::vector<const Transition*>& batch, size_t L) {
  std::vector<const GraphFeatures*> graphs;
  std::vector<const std::vector<uint8_t>*> xm, lm;
  std::vector<const std::vector<std::vector<int32_t>>*> nodes;
  std::vector<int64_t> xs, ls;
  std::vector<float> has_loc;
  for (const auto* t : batch) {
    graphs.push_back(t->graph.get());
    xm.push_back(&t->xfer_mask);
    lm.push_back(&t->location_mask);
    nodes.push_back(&t->location_nodes);
    xs.push_back(t->xfer);
    ls.push_back(t->location);
    has_loc.push_back(t->xfer < net->num_xfers ? 1.f : 0.f);
  }
  auto gb = nets::make_batch(graphs);
  auto enc = net->encode(gb);
  auto xmask = bool_rows(xm, net->num_xfers + 1);
  auto xlogp = nets::masked_log_softmax(net->xfer_logits(enc.global), xmask);
  auto xt = torch::tensor(xs, torch::kInt64);
  auto li = location_index(nodes, lm, gb.node_offset, static_cast<int64_t>(L));
  auto llogp = nets::masked_log_softmax(net->location_logits(enc, xt, li), li.mask);
  auto hl = torch::tensor(has_loc);
  Evaluated ev;
  ev.logp = xlogp.gather(1, xt.unsqueeze(1)).squeeze(1) + hl * llogp.gather(1, torch::tensor(ls, torch::kInt64).unsqueeze(1)).squeeze(1);
  ev.entropy = nets::masked_entropy(xlogp, xmask) + hl * nets::masked_entropy(llogp, li.mask);
  ev.value = net->value(enc.global);
  ev.xfer_logp = xlogp;
  ev.location_logp = llogp;
  return ev;
}

LossTerms ppo_loss(const Evaluated& ev, const torch::Tensor& old_logp, const torch::Tensor& adv, const torch::Tensor& returns,
                   const PpoConfig& cfg) {
  LossTerms l;
  auto log_ratio = ev.logp - old_logp;
  auto ratio = log_ratio.exp();
  auto surr1 = ratio * adv;
  auto surr2 = ratio.clamp(1.0 - cfg.clip, 1.0 + cfg.clip) * adv;
  l.policy = -torch::min(surr1, surr2).mean();
  l.value = (ev.value - returns).pow(2).mean();
  l.entropy = ev.entropy.mean();
  l.total = l.policy + cfg.value_coef * l.value - cfg.entropy_coef * l.entropy;
  torch::NoGradGuard ng;
  l.approx_kl = ((ratio - 1) - log_ratio).mean();  // the low-variance estimator k3
  l.clip_fraction = ((ratio - 1).abs() > cfg.clip).to(torch::kFloat).mean();
  return l;
}

Expected<UpdateStats> update(nets::PolicyNet& net, torch::optim::Optimizer& opt, const std::vector<Transition>& data,
                             const PpoConfig& cfg, std::mt19937_64& rng, const Shard* shard) {
  const size_t L = std::max<size_t>(cfg.env.max_locations, 1);
  return update([&](const std::vector<const Transition*>& mb) { return evaluate(net, mb, L); }, net->parameters(), opt, data, cfg,
                rng, shard);
}

UpdateStats update(const Evaluator& eval, std::vector<torch::Tensor> params, torch::optim::Optimizer& opt,
                   const std::vector<Transition>& data, const PpoConfig& cfg, std::mt19937_64& rng) {
  return update(eval, std::move(params), opt, data, cfg, rng, nullptr).value();  // no collectives: cannot fail
}

Expected<UpdateStats> update(const Evaluator& eval, std::vector<torch::Tensor> params, torch::optim::Optimizer& opt,
                             const std::vector<Transition>& data, const PpoConfig& cfg, std::mt19937_64& rng,
                             const Shard* shard) {
  UpdateStats s;
  dist::Comm* comm = shard && shard->comm && shard->comm->size() > 1 ? shard->comm : nullptr;
  const size_t T = comm ? static_cast<size_t>(shard->global_size) : data.size();
  if (T == 0) return s;
  // local[g]: this rank's position of the update's transition g, or -1 (another rank holds it).
  std::vector<int64_t> local(T, -1);
  for (size_t i = 0; i < data.size(); ++i) local[comm ? static_cast<size_t>(shard->global_index[i]) : i] = static_cast<int64_t>(i);
  auto global_sum = [&](double v) -> Expected<double> {
    if (!comm) return v;
    auto t = torch::tensor({v}, torch::kFloat64);
    RLFLOW_TRY_STATUS(comm->allreduce_sum(t));
    return t.item<double>();
  };
  std::vector<float> adv(data.size());
  for (size_t i = 0; i < data.size(); ++i) adv[i] = data[i].advantage;
  if (cfg.normalize_advantages && T > 1) {
    auto sum = global_sum(std::accumulate(adv.begin(), adv.end(), 0.0));
    if (!sum) return sum.error();
    const double mean = *sum / static_cast<double>(T);
    double var = 0;
    for (auto a : adv) var += (a - mean) * (a - mean);
    auto var_all = global_sum(var);
    if (!var_all) return var_all.error();
    const double sd = std::sqrt(*var_all / static_cast<double>(T - 1));
    for (auto& a : adv) a = static_cast<float>((a - mean) / (sd + 1e-8));
  }
  std::vector<size_t> order(T);
  std::iota(order.begin(), order.end(), size_t{0});
  double kl_sum = 0;
  int kl_n = 0;
  for (int epoch = 0; epoch < cfg.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double epoch_kl = 0;
    int epoch_n = 0;
    for (size_t start = 0; start < T; start += static_cast<size_t>(cfg.minibatch)) {
      const size_t end = std::min(T, start + static_cast<size_t>(cfg.minibatch));
      std::vector<const Transition*> mb;
      std::vector<float> old, a, ret;
      for (size_t k = start; k < end; ++k) {
        const int64_t i = local[order[k]];
        if (i < 0) continue;
        const auto& t = data[static_cast<size_t>(i)];
        mb.push_back(&t);
        old.push_back(t.logp);
        a.push_back(adv[static_cast<size_t>(i)]);
        ret.push_back(t.ret);
      }
      // This rank's share of the minibatch mean: its members' mean weighted by their fraction.
      const double share = static_cast<double>(mb.size()) / static_cast<double>(end - start);
      auto stats = torch::zeros({5}, torch::kFloat);  // policy, value, entropy, clip fraction, approx KL
      opt.zero_grad();
      if (!mb.empty()) {
        auto ev = eval(mb);
        auto loss = ppo_loss(ev, torch::tensor(old), torch::tensor(a), torch::tensor(ret), cfg);
        (share == 1.0 ? loss.total : loss.total * share).backward();
        torch::NoGradGuard ng;
        stats = torch::stack({loss.policy, loss.value, loss.entropy, loss.clip_fraction, loss.approx_kl}).detach().to(torch::kFloat) *
                static_cast<float>(share);
      }
      if (comm) RLFLOW_TRY_STATUS(dist::allreduce_grads(*comm, params, stats));
      torch::nn::utils::clip_grad_norm_(params, cfg.max_grad_norm);
      opt.step();
      auto st = stats.accessor<float, 1>();
      s.policy_loss += st[0];
      s.value_loss += st[1];
      s.entropy += st[2];
      s.clip_fraction += st[3];
      epoch_kl += st[4];
      ++epoch_n;
      ++s.minibatches;
    }
    ++s.epochs;
    kl_sum += epoch_kl;
    kl_n += epoch_n;
    if (cfg.target_kl > 0 && epoch_kl / epoch_n > 1.5 * cfg.target_kl) {
      s.early_stop = true;
      break;
    }
  }
  const double n = std::max(1, s.minibatches);
  s.policy_loss /= n;
  s.value_loss /= n;
  s.entropy /= n;
  s.clip_fraction /= n;
  s.approx_kl = kl_n ? kl_sum / kl_n : 0.0;
  return s;
}

}  // namespace rlflow::rl::ppo
