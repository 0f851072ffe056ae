// World-model training: real rollouts of a random agent (reused from the data file), encoded by a
// frozen graph encoder, fit by an MDN-RNN with reward/done/mask/count heads.
#include "rlflow/rl/world_model.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>

#include "checkpoint.h"
#include "dream.h"
#include "rlflow/util/file_io.h"
#include "rlflow/util/clock.h"
#include "world_model_data.h"
#include "world_model_net.h"
#include "yaml_fields.h"

namespace rlflow::rl {

namespace {

using json = nlohmann::json;

template <class F>
void visit_wm(WorldModelConfig& c, F&& f) {
  f("model.lstm_hidden", c.lstm_hidden);
  f("model.mixtures", c.mixtures);
  f("model.ensemble", c.ensemble);
  f("model.count_state", c.count_state);
  f("model.match_features", c.match_features);
  f("model.log_sigma_min", c.log_sigma_min);
  f("model.log_sigma_max", c.log_sigma_max);
  f("loss.nll", c.w_nll);
  f("loss.reward", c.w_reward);
  f("loss.done", c.w_done);
  f("loss.mask", c.w_mask);
  f("loss.count", c.w_count);
  f("training.learning_rate", c.learning_rate);
  f("training.epochs", c.epochs);
  f("training.batch_episodes", c.batch_episodes);
  f("training.checkpoint_every", c.checkpoint_every);
  f("training.holdout", c.holdout);
  f("training.max_grad_norm", c.max_grad_norm);
  f("data.noop_share", c.noop_share);
  f("data.policy_epsilon", c.policy_epsilon);
}

}  // namespace

Expected<WorldModelConfig> parse_world_model_config(const std::string& text, const std::string& origin) {
  auto c = yaml_fields::parse<WorldModelConfig>(text, origin, [](WorldModelConfig& c, auto&& f) { visit_wm(c, f); });
  if (!c) return c.error();
  if (c->lstm_hidden < 1 || c->mixtures < 1 || c->ensemble < 1 || c->epochs < 0 || c->batch_episodes < 1 || c->checkpoint_every < 1 ||
      c->learning_rate <= 0)
    return Error::bad_input(origin + ": sizes, epochs and learning_rate must be positive");
  if (c->match_features && !c->count_state)
    return Error::bad_input(origin + ": match_features needs count_state (the dream sizes the match lists by the counts)");
  if (c->log_sigma_min >= c->log_sigma_max) return Error::bad_input(origin + ": log_sigma_min must be below log_sigma_max");
  if (c->holdout < 0 || c->holdout >= 1 || c->noop_share < 0 || c->noop_share > 1 || c->policy_epsilon < 0 || c->policy_epsilon > 1)
    return Error::bad_input(origin + ": holdout must be in [0, 1), noop_share and policy_epsilon in [0, 1]");
  return c;
}

Expected<WorldModelConfig> load_world_model_config(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  return parse_world_model_config(*text, path);
}

std::string to_yaml(const WorldModelConfig& c) {
  return yaml_fields::print(c, [](WorldModelConfig& c, auto&& f) { visit_wm(c, f); });
}

namespace wm {

// Episodes padded to the longest into [B, T(+1), ...] tensors.
struct SeqBatch {
  torch::Tensor z, mask, count, xfer, location, reward, done, valid;  // count: valid locations per xfer
  torch::Tensor feat;                                                // [B, T, F] with match features
  int64_t T = 0;
};

SeqBatch make_seq_batch(const std::vector<const EpisodeData*>& eps, int64_t Z, int64_t N, int64_t L, int64_t F) {
  SeqBatch b;
  const int64_t B = static_cast<int64_t>(eps.size());
  for (const auto* e : eps) b.T = std::max<int64_t>(b.T, e->T);
  b.z = torch::zeros({B, b.T + 1, Z});
  b.mask = torch::zeros({B, b.T + 1, N});
  b.count = torch::zeros({B, b.T + 1, N});
  b.xfer = torch::full({B, b.T}, N, torch::kInt64);
  b.location = torch::zeros({B, b.T}, torch::kInt64);
  b.reward = torch::zeros({B, b.T});
  b.done = torch::zeros({B, b.T});
  b.valid = torch::zeros({B, b.T});
  if (F > 0) b.feat = torch::zeros({B, b.T, F});
  // Accessors: one write per element, not one tensor op.
  auto xa = b.xfer.accessor<int64_t, 2>(), la = b.location.accessor<int64_t, 2>();
  auto ra = b.reward.accessor<float, 2>(), da = b.done.accessor<float, 2>(),
       va = b.valid.accessor<float, 2>();
  for (int64_t i = 0; i < B; ++i) {
    const auto& e = *eps[static_cast<size_t>(i)];
    const int64_t S = e.T + 1;
    b.z[i].slice(0, 0, S).copy_(torch::from_blob(const_cast<float*>(e.z.data()), {S, Z}, torch::kFloat));
    auto m = torch::from_blob(const_cast<uint8_t*>(e.mask.data()), {S, N}, torch::kUInt8).to(torch::kFloat);
    b.mask[i].slice(0, 0, S).copy_(m);
    auto c = torch::from_blob(const_cast<uint16_t*>(e.count.data()), {S * N}, torch::kInt16).to(torch::kInt32).bitwise_and(0xFFFF);
    b.count[i].slice(0, 0, S).copy_(c.to(torch::kFloat).view({S, N}));
    if (F > 0 && e.T > 0)
      b.feat[i].slice(0, 0, e.T).copy_(torch::from_blob(const_cast<float*>(e.feat.data()), {static_cast<int64_t>(e.T), F}, torch::kFloat));
    for (int64_t t = 0; t < e.T; ++t) {
      const auto k = static_cast<size_t>(t);
      xa[i][t] = e.xfer[k];
      la[i][t] = std::min<int64_t>(e.location[k], L - 1);
      ra[i][t] = e.reward[k];
      da[i][t] = static_cast<float>(e.done[k]);
      va[i][t] = 1.f;
    }
  }
  return b;
}

struct LossParts {
  torch::Tensor total, nll, reward_se, done_correct, mask_correct, count_ae;
  double steps = 0, mask_entries = 0, count_entries = 0;
};

LossParts sequence_loss(WorldModelNet& net, const SeqBatch& b, const WorldModelConfig& cfg, double reward_std) {
  const int64_t B = b.z.size(0);
  auto state = net->initial(B);
  const auto zs = net->normalize(b.z);
  LossParts out;
  auto zero = torch::zeros({});
  torch::Tensor nll = zero, rew = zero, done = zero, mask = zero, cnt = zero;
  torch::Tensor rse = zero, dc = zero, mc = zero, cae = zero;
  double mask_n = 0, count_n = 0;
  for (int64_t t = 0; t < b.T; ++t) {
    auto v = b.valid.select(1, t);
    auto a = net->action_input(b.xfer.select(1, t), b.location.select(1, t), b.feat.defined() ? b.feat.select(1, t) : torch::Tensor());
    auto [next, h] = net->step(zs.select(1, t), a, state, b.count.select(1, t));
    state = next;
    auto target_mask = b.mask.select(1, t + 1);
    // Per latent dimension, so the NLL's scale does not grow with Z and drown the other terms.
    nll = nll + (mdn_nll(h.logit_pi, h.mu, h.log_sigma, zs.select(1, t + 1)) * v).sum() / static_cast<double>(b.z.size(2));
    auto r = b.reward.select(1, t);
    rew = rew + ((h.reward - r / reward_std).pow(2) * v).sum();
    done = done + (torch::binary_cross_entropy_with_logits(h.done_logit, b.done.select(1, t), {}, {}, at::Reduction::None) * v).sum();
    mask = mask + (torch::binary_cross_entropy_with_logits(h.mask_logit, target_mask, {}, {}, at::Reduction::None).mean(1) * v).sum();
    auto on = target_mask * v.unsqueeze(1);
    // count_state: the squared error of every xfer's count change, summed over xfers (most changes
    // are 0; a mean over N would dilute the few that are not).
    if (net->count_state)
      cnt = cnt + ((h.log_count - (b.count.select(1, t + 1) - b.count.select(1, t))).pow(2) * v.unsqueeze(1)).sum();
    else
      cnt = cnt + ((h.log_count - torch::log1p(b.count.select(1, t + 1))).pow(2) * on).sum();
    torch::NoGradGuard ng;
    rse = rse + ((h.reward * reward_std - r).pow(2) * v).sum();
    dc = dc + (((h.done_logit > 0).to(torch::kFloat) == b.done.select(1, t)).to(torch::kFloat) * v).sum();
    // The metrics judge what the dream uses: with count_state, the carried counts and their mask.
    auto pred_count = net->count_state ? net->next_counts(b.count.select(1, t), h.log_count) : torch::expm1(h.log_count).round();
    auto pred_mask = net->count_state ? (pred_count >= 1).to(torch::kFloat) : (h.mask_logit > 0).to(torch::kFloat);
    mc = mc + ((pred_mask == target_mask).to(torch::kFloat) * v.unsqueeze(1)).sum();
    cae = cae + ((pred_count - b.count.select(1, t + 1)).abs() * on).sum();
    mask_n += v.sum().item<double>() * static_cast<double>(target_mask.size(1));
    count_n += on.sum().item<double>();
  }
  out.steps = b.valid.sum().item<double>();
  const double n = std::max(out.steps, 1.0);
  out.nll = nll / n;
  out.total = cfg.w_nll * nll / n + cfg.w_reward * rew / n + cfg.w_done * done / n + cfg.w_mask * mask / n +
              cfg.w_count * cnt / (net->count_state ? n : std::max(count_n, 1.0));
  out.reward_se = rse;
  out.done_correct = dc;
  out.mask_correct = mc;
  out.count_ae = cae;
  out.mask_entries = mask_n;
  out.count_entries = count_n;
  return out;
}

WorldModelMetrics evaluate_world_model(WorldModelNet& net, const std::vector<const EpisodeData*>& eps, int64_t Z, int64_t N, int64_t L,
                                       const WorldModelConfig& cfg, double reward_std) {
  torch::NoGradGuard ng;
  WorldModelMetrics m;
  double steps = 0, nll = 0, rse = 0, dc = 0, mc = 0, mn = 0, cae = 0, cn = 0;
  for (size_t s = 0; s < eps.size(); s += static_cast<size_t>(cfg.batch_episodes)) {
    std::vector<const EpisodeData*> chunk(eps.begin() + static_cast<int64_t>(s),
                                          eps.begin() + static_cast<int64_t>(std::min(eps.size(), s + static_cast<size_t>(cfg.batch_episodes))));
    auto b = make_seq_batch(chunk, Z, N, L, net->match_features);
    auto l = sequence_loss(net, b, cfg, reward_std);
    steps += l.steps;
    nll += l.nll.item<double>() * l.steps;
    rse += l.reward_se.item<double>();
    dc += l.done_correct.item<double>();
    mc += l.mask_correct.item<double>();
    mn += l.mask_entries;
    cae += l.count_ae.item<double>();
    cn += l.count_entries;
  }
  if (steps > 0) {
    m.nll = nll / steps;
    m.reward_mse = rse / steps;
    m.done_accuracy = dc / steps;
    m.mask_accuracy = mn > 0 ? mc / mn : 1.0;
    m.count_mae = cn > 0 ? cae / cn : 0.0;
  }
  return m;
}

}  // namespace wm

Expected<WorldModelSummary> train_world_model(const WorldModelTrainOptions& o, const std::function<void(const WorldModelMetrics&)>& progress) {
  if (o.models.empty()) return Error::bad_input("train-world-model: no model");
  if (!o.cost) return Error::internal("train-world-model: no cost model");
  if (o.out.empty()) return Error::bad_input("train-world-model: no output path (--out)");
  const auto t0 = std::chrono::steady_clock::now();
  const WorldModelConfig& cfg = o.config;
  PpoConfig acfg = o.agent_config;
  std::vector<const rules::Rule*> rules = o.rules;
  torch::set_num_threads(acfg.torch_threads);
  torch::manual_seed(o.seed);
  std::string encoder_source = "random (seeded, frozen)";
  // The encoder: from a trained model-free agent (its rules and env settings come with it).
  nets::PolicyNet agent(static_cast<int>(rules.size()), acfg.hidden, acfg.gnn_rounds);
  if (!o.encoder_agent.empty()) {
    auto info = read_agent_info(o.encoder_agent);
    if (!info) return info.error();
    if (info->kind != "policy") return Error::bad_input(o.encoder_agent + ": not a model-free agent (kind " + info->kind + ")");
    std::vector<std::string> names;
    for (const auto* r : rules) names.push_back(r->name);
    if (names != info->rules) return Error::bad_input(o.encoder_agent + ": the agent was trained with other rules than these");
    acfg = info->config;
    agent = nets::PolicyNet(static_cast<int>(rules.size()), acfg.hidden, acfg.gnn_rounds, info->op_vocab);
    if (auto st = checkpoint::load(o.encoder_agent, agent, nullptr); !st.ok()) return st.error();
    encoder_source = o.encoder_agent;
  }
  nets::GraphEncoder encoder = agent->encoder;
  encoder->eval();
  const int64_t Z = acfg.hidden, N = static_cast<int64_t>(rules.size()), L = static_cast<int64_t>(acfg.env.max_locations);
  const std::string fp = wm::encoder_fingerprint(encoder);
  std::vector<std::string> rule_names, model_names;
  for (const auto* r : rules) rule_names.push_back(r->name);
  for (const auto& m : o.models) model_names.push_back(m.name);

  // Data: reuse what the file holds (same encoder and rules), top up with new random episodes.
  WorldModelSummary sum;
  wm::DataSet data;
  data.header = {{"z_dim", Z}, {"num_xfers", N}, {"max_locations", L}, {"encoder", fp}, {"rules", rule_names}, {"models", model_names},
                 {"env", to_yaml(acfg)}};
  const std::string data_path = o.data_path.empty() ? o.out + ".data" : o.data_path;
  if (std::filesystem::exists(data_path)) {
    auto d = wm::read_data(data_path);
    if (!d) return d.error();
    if (d->header.value("encoder", "") != fp || d->header.value("rules", std::vector<std::string>{}) != rule_names ||
        d->header.value("models", std::vector<std::string>{}) != model_names || d->header.value("z_dim", int64_t{-1}) != Z ||
        d->header.value("num_xfers", int64_t{-1}) != N)
      return Error::bad_input(data_path + ": rollouts of another encoder, rule set, model list or latent size; use another --data path");
    data.episodes = std::move(d->episodes);
    spdlog::info("reusing {} episodes from {}", data.episodes.size(), data_path);
  }
  std::mt19937_64 rng(o.seed + 0x5eed);
  auto shared = locked_cost_model(*o.cost);
  std::vector<std::unique_ptr<GraphEnv>> envs;
  for (const auto& m : o.models) envs.push_back(std::make_unique<GraphEnv>(m.graph, rules, *shared, acfg.env));
  std::optional<wm::RealActor> policy;
  if (!o.policy.empty() && static_cast<int64_t>(data.episodes.size()) < o.episodes) {
    auto a = wm::load_real_actor(o.policy, rules);
    if (!a) return a.error();
    if (wm::encoder_fingerprint(a->encoder()) != fp)
      return Error::bad_input(o.policy + ": the controller's world model used another graph encoder");
    policy.emplace(std::move(*a));
  }
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const wm::ChooseAction choose = [&](Observation& obs) -> Expected<Action> {
    if (!policy) return wm::random_action(obs, cfg.noop_share, rng);
    Action a = policy->choose(obs, false, rng);
    if (u01(rng) < cfg.policy_epsilon) a = wm::random_action(obs, cfg.noop_share, rng);
    policy->advance(a);
    return a;
  };
  const auto tc = std::chrono::steady_clock::now();
  double step_seconds = 0;
  if (o.on_phase && static_cast<int64_t>(data.episodes.size()) < o.episodes) o.on_phase("collecting real episodes");
  while (static_cast<int64_t>(data.episodes.size()) < o.episodes) {
    const size_t m = data.episodes.size() % o.models.size();
    double secs = 0;
    if (policy) policy->reset();
    auto e = wm::record_episode(*envs[m], encoder, choose, &secs);
    if (!e) return e.error();
    e->model = static_cast<int32_t>(m);
    step_seconds += secs;
    sum.real_steps += e->T;
    ++sum.collected;
    if (o.on_episode) {
      double ret = 0;
      for (float r : e->reward) ret += r;
      const auto& env = *envs[m];
      const double best = (env.initial_cost() - env.best_cost()) / std::max(env.initial_cost(), 1e-30);
      o.on_episode({static_cast<int64_t>(data.episodes.size()), static_cast<int64_t>(data.episodes.size()) + 1, e->T, ret, best});
    }
    data.episodes.push_back(std::move(*e));
  }
  sum.collect_seconds = seconds_since(tc);
  sum.real_step_ms = sum.real_steps ? 1e3 * step_seconds / static_cast<double>(sum.real_steps) : 0.0;
  if (sum.collected > 0)
    if (auto st = wm::write_data(data_path, data); !st.ok()) return st.error();
  sum.episodes = static_cast<int64_t>(data.episodes.size());
  sum.data_steps = data.steps();
  if (cfg.match_features)
    for (const auto& e : data.episodes)
      if (e.feat.size() != static_cast<size_t>(e.T) * wm::kMatchFeatures)
        return Error::bad_input(data_path + ": rollouts recorded before match features; model.match_features needs a new --data path");

  // Held-out split: a seeded shuffle of episode indices.
  std::vector<size_t> order(data.episodes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 split_rng(o.seed);
  std::shuffle(order.begin(), order.end(), split_rng);
  const size_t hold = std::min(order.size() - 1, static_cast<size_t>(std::ceil(cfg.holdout * static_cast<double>(order.size()))));
  std::vector<const wm::EpisodeData*> train, held;
  for (size_t k = 0; k < order.size(); ++k) (k < hold ? held : train).push_back(&data.episodes[order[k]]);
  if (held.empty()) held = train;
  double r2 = 0;
  int64_t rn = 0;
  for (const auto* e : train)
    for (auto r : e->reward) {
      r2 += static_cast<double>(r) * r;
      ++rn;
    }
  const double reward_std = std::max(1e-3, std::sqrt(r2 / std::max<int64_t>(rn, 1)));

  // The ensemble's members: initialised one after another from the seeded generator, trained on
  // the same episodes in their own orders. Member 0 is the one a real actor's LSTM uses.
  std::vector<wm::WorldModelNet> members;
  {
    // Per-dimension mean and std of z over the training episodes' states.
    auto sum_z = torch::zeros({Z}, torch::kDouble), sum_z2 = torch::zeros({Z}, torch::kDouble);
    int64_t count = 0;
    for (const auto* e : train) {
      auto z = torch::from_blob(const_cast<float*>(e->z.data()), {e->T + 1, Z}, torch::kFloat).to(torch::kDouble);
      sum_z += z.sum(0);
      sum_z2 += z.pow(2).sum(0);
      count += e->T + 1;
    }
    auto mean = sum_z / static_cast<double>(std::max<int64_t>(count, 1));
    auto var = (sum_z2 / static_cast<double>(std::max<int64_t>(count, 1)) - mean.pow(2)).clamp_min(0.0);
    // The match features' mean and std over the training episodes' rewrites (not NO-OP).
    torch::Tensor f_mean, f_std;
    if (cfg.match_features) {
      const int64_t F = wm::kMatchFeatures;
      auto s1 = torch::zeros({F}, torch::kDouble), s2 = torch::zeros({F}, torch::kDouble);
      int64_t n = 0;
      for (const auto* e : train)
        for (int32_t t = 0; t < e->T; ++t) {
          if (e->xfer[static_cast<size_t>(t)] >= N) continue;
          auto f = torch::from_blob(const_cast<float*>(e->feat.data()) + static_cast<int64_t>(t) * F, {F}, torch::kFloat).to(torch::kDouble);
          s1 += f;
          s2 += f.pow(2);
          ++n;
        }
      f_mean = s1 / static_cast<double>(std::max<int64_t>(n, 1));
      f_std = (s2 / static_cast<double>(std::max<int64_t>(n, 1)) - f_mean.pow(2)).clamp_min(0.0).sqrt();
    }
    for (int k = 0; k < cfg.ensemble; ++k) {
      members.emplace_back(static_cast<int>(Z), static_cast<int>(N), static_cast<int>(L), cfg.lstm_hidden, cfg.mixtures, cfg.log_sigma_min,
                           cfg.log_sigma_max, cfg.count_state, cfg.match_features ? wm::kMatchFeatures : 0);
      members.back()->set_normalization(mean.to(torch::kFloat), var.sqrt().to(torch::kFloat));
      if (cfg.match_features) members.back()->set_feature_normalization(f_mean.to(torch::kFloat), f_std.to(torch::kFloat));
    }
  }
  std::vector<torch::Tensor> all_params;
  for (auto& m : members)
    for (auto& p : m->parameters()) all_params.push_back(p);
  torch::optim::Adam opt(all_params, torch::optim::AdamOptions(cfg.learning_rate));  // per-parameter: K independent Adams
  const auto modules = wm::ensemble_modules(members, encoder);
  int start_epoch = 0;
  json meta_base = {{"kind", "world-model"}, {"config", to_yaml(cfg)}, {"agent_config", to_yaml(acfg)}, {"rules", rule_names},
                    {"models", model_names}, {"z_dim", Z}, {"encoder_source", encoder_source}, {"encoder", fp},
                    {"reward_std", reward_std}, {"data", data_path}, {"seed", o.seed}, {"ensemble", cfg.ensemble},
                    {"op_vocab", encoder->op_vocab}};
  WorldModelMetrics last;
  if (o.resume) {
    auto meta = checkpoint::read_meta(o.out);
    if (!meta) return meta.error().with_context("--resume");
    if (meta->value("kind", "") != "world-model" || meta->value("encoder", "") != fp)
      return Error::bad_input(o.out + ": not a world model of this encoder; cannot resume");
    if (meta->value("ensemble", 1) != cfg.ensemble)
      return Error::bad_input(o.out + ": a world model of another ensemble size; cannot resume");
    auto no_encoder = modules;
    no_encoder.pop_back();
    if (auto st = checkpoint::load(o.out, no_encoder, &opt); !st.ok()) return st.error();
    start_epoch = meta->value("epochs", 0);
    std::istringstream is(meta->value("rng", std::string{}));
    is >> rng;
    if (!is) return Error::bad_input(o.out + ": damaged RNG state in checkpoint");
    meta_base["reward_std"] = meta->value("reward_std", reward_std);
    last.train_loss = meta->value("metrics", json::object()).value("train_loss", 0.0);
  }
  const double rstd = meta_base["reward_std"].get<double>();
  std::ofstream log;
  RLFLOW_TRY_STATUS(checkpoint::open_log(log, o.log_path, o.resume, "epoch", start_epoch));
  // The checkpoint after `epochs` epochs: the members, Adam's state, both generators, and the
  // held-out metrics of member 0 then.
  auto save = [&](int epochs, const WorldModelMetrics& m) {
    json meta = meta_base;
    meta["epochs"] = epochs;
    std::ostringstream rs;
    rs << rng;
    meta["rng"] = rs.str();
    meta["metrics"] = {{"train_loss", m.train_loss}, {"heldout_nll", m.nll},         {"reward_mse", m.reward_mse},
                       {"done_accuracy", m.done_accuracy}, {"mask_accuracy", m.mask_accuracy}, {"count_mae", m.count_mae}};
    return checkpoint::save(o.out, modules, &opt, meta);
  };
  const auto tt = std::chrono::steady_clock::now();
  if (o.on_phase && start_epoch < cfg.epochs) o.on_phase("fitting");
  for (int epoch = start_epoch; epoch < cfg.epochs; ++epoch) {
    std::vector<std::vector<const wm::EpisodeData*>> orders;
    for (size_t k = 0; k < members.size(); ++k) {
      orders.push_back(train);
      std::shuffle(orders.back().begin(), orders.back().end(), rng);
    }
    double loss_sum = 0;
    int batches = 0;
    for (auto& m : members) m->train();
    for (size_t s = 0; s < train.size(); s += static_cast<size_t>(cfg.batch_episodes)) {
      const size_t e = std::min(train.size(), s + static_cast<size_t>(cfg.batch_episodes));
      opt.zero_grad();
      for (size_t k = 0; k < members.size(); ++k) {
        std::vector<const wm::EpisodeData*> chunk(orders[k].begin() + static_cast<int64_t>(s), orders[k].begin() + static_cast<int64_t>(e));
        auto l = wm::sequence_loss(members[k], wm::make_seq_batch(chunk, Z, N, L, members[k]->match_features), cfg, rstd);
        l.total.backward();
        torch::nn::utils::clip_grad_norm_(members[k]->parameters(), cfg.max_grad_norm);
        if (k == 0) loss_sum += l.total.item<double>();
      }
      opt.step();
      ++batches;
    }
    last = wm::evaluate_world_model(members[0], held, Z, N, L, cfg, rstd);
    last.epoch = epoch + 1;
    last.train_loss = batches ? loss_sum / batches : 0.0;
    last.seconds = seconds_since(t0);
    if (log)
      log << json{{"epoch", last.epoch},       {"train_loss", last.train_loss},       {"heldout_nll", last.nll},
                  {"reward_mse", last.reward_mse}, {"done_accuracy", last.done_accuracy}, {"mask_accuracy", last.mask_accuracy},
                  {"count_mae", last.count_mae}, {"seconds", last.seconds}}
                 .dump()
          << "\n"
          << std::flush;
    if (progress) progress(last);
    // Periodically, so that a run killed mid-training resumes from here rather than from nothing;
    // the last epoch's checkpoint is the one written below.
    if (last.epoch % cfg.checkpoint_every == 0 && last.epoch < cfg.epochs) RLFLOW_TRY_STATUS(save(last.epoch, last));
  }
  if (start_epoch >= cfg.epochs) {
    // Nothing left to train (a finished model given --resume): the held-out metrics of the model
    // as it is, on this run's held-out episodes, rather than none at all.
    const double train_loss = last.train_loss;
    last = wm::evaluate_world_model(members[0], held, Z, N, L, cfg, rstd);
    last.epoch = start_epoch;
    last.train_loss = train_loss;
    last.seconds = seconds_since(t0);
  }
  sum.train_seconds = seconds_since(tt);
  sum.last = last;
  RLFLOW_TRY_STATUS(save(std::max(cfg.epochs, start_epoch), last));
  return sum;
}

}  // namespace rlflow::rl
