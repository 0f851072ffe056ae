#include "dream.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>

#include "checkpoint.h"
#include "rollout_optimizer.h"
#include "rlflow/rl/world_model.h"
#include "rlflow/util/clock.h"
#include "world_model_data.h"

namespace rlflow::rl::wm {

DreamBatch::DreamBatch(std::vector<WorldModelNet> members, EnvConfig env, double reward_std, double tau, double penalty, uint64_t seed)
    : members_(std::move(members)), env_(std::move(env)), reward_std_(reward_std), tau_(tau), penalty_(penalty), pick_(seed) {}

Observation DreamBatch::observe(int64_t row, const float* mask_prob, const float* log_count) const {
  Observation o;
  const auto& net = members_[0];
  const int64_t N = net->num_xfers, Z = net->z_dim, H = net->hidden;
  o.latent.resize(static_cast<size_t>(Z + H));
  const float* z = z_.data_ptr<float>() + row * Z;
  const float* h = h_[0].data_ptr<float>() + row * H;
  std::copy(z, z + Z, o.latent.begin());
  std::copy(h, h + H, o.latent.begin() + Z);
  o.xfer_mask.assign(static_cast<size_t>(N + 1), 0);
  o.location_valid.resize(static_cast<size_t>(N));
  for (int64_t x = 0; x < N; ++x) {
    if (mask_prob[x] <= 0.5f) continue;
    const double count = std::round(std::expm1(static_cast<double>(log_count[x])));
    const size_t k = static_cast<size_t>(std::clamp(count, 1.0, static_cast<double>(env_.max_locations)));
    o.xfer_mask[static_cast<size_t>(x)] = 1;
    o.location_valid[static_cast<size_t>(x)].assign(k, 1);
  }
  o.xfer_mask[static_cast<size_t>(N)] = 1;
  return o;
}

std::vector<Observation> DreamBatch::reset(const std::vector<DreamStart>& starts) {
  torch::NoGradGuard ng;
  const auto& net = members_[0];
  const int64_t E = static_cast<int64_t>(starts.size()), N = net->num_xfers, Z = net->z_dim;
  z_ = torch::empty({E, Z});
  counts_ = torch::zeros({E, N});
  h_.clear();
  c_.clear();
  for (auto& m : members_) {
    auto state = m->initial(E);
    h_.push_back(state.h);
    c_.push_back(state.c);
  }
  t_.assign(static_cast<size_t>(E), 0);
  matches_.assign(static_cast<size_t>(E), {});
  for (int64_t e = 0; e < E; ++e) {
    const auto& s = starts[static_cast<size_t>(e)];
    if (net->match_features > 0) {
      // Each list as long as the start's count (the real state's matches).
      matches_[static_cast<size_t>(e)] = s.matches;
      matches_[static_cast<size_t>(e)].resize(s.count.size());
      std::vector<uint16_t> c(s.count.size());
      for (size_t x = 0; x < c.size(); ++x) c[x] = s.xfer_mask[x] ? s.count[x] : 0;
      MatchRow mid{};
      mid[kMatchFeatures] = 0.5f;
      fit_matches(matches_[static_cast<size_t>(e)], mid, c);
    }
    std::copy(s.z.begin(), s.z.end(), z_[e].data_ptr<float>());
    float* c = counts_[e].data_ptr<float>();
    for (size_t x = 0; x < s.count.size(); ++x) c[x] = s.xfer_mask[x] ? static_cast<float>(s.count[x]) : 0.f;
  }
  z_ = net->normalize(z_).contiguous();  // starts hold encoder output (members share the data's normalisation)
  std::vector<Observation> out;
  for (int64_t e = 0; e < E; ++e) {
    const auto& s = starts[static_cast<size_t>(e)];
    std::vector<float> mp(static_cast<size_t>(N)), lc(static_cast<size_t>(N));
    for (size_t x = 0; x < mp.size(); ++x) {
      mp[x] = s.xfer_mask[x] ? 1.f : 0.f;
      lc[x] = static_cast<float>(std::log1p(static_cast<double>(s.count[x])));
    }
    out.push_back(observe(e, mp.data(), lc.data()));
  }
  return out;
}

std::vector<Step> DreamBatch::step(const std::vector<size_t>& which, const std::vector<Action>& actions) {
  torch::NoGradGuard ng;
  const int64_t B = static_cast<int64_t>(which.size()), N = members_[0]->num_xfers;
  const size_t K = members_.size();
  std::vector<int64_t> rows(which.begin(), which.end()), xs, ls;
  for (const auto& a : actions) {
    xs.push_back(a.xfer);
    ls.push_back(static_cast<int64_t>(a.location));
  }
  auto idx = torch::tensor(rows, torch::kInt64);
  auto z = z_.index_select(0, idx);
  auto counts = counts_.index_select(0, idx);
  auto xt = torch::tensor(xs, torch::kInt64), lt = torch::tensor(ls, torch::kInt64);
  const int F = members_[0]->match_features;
  torch::Tensor feats;
  std::vector<MatchRow> taken;
  if (F > 0) {
    feats = torch::zeros({B, F});
    for (int64_t b = 0; b < B; ++b) {
      taken.push_back(take_match(matches_[which[static_cast<size_t>(b)]], actions[static_cast<size_t>(b)]));
      std::copy(taken.back().begin(), taken.back().begin() + F, feats[b].data_ptr<float>());
    }
  }
  std::vector<torch::Tensor> z_next, mask_prob, log_count, reward, done_logit;
  for (size_t k = 0; k < K; ++k) {
    auto& net = members_[k];
    WorldModelNetImpl::State s{h_[k].index_select(0, idx), c_[k].index_select(0, idx)};
    auto [next, heads] = net->step(z, net->action_input(xt, lt, feats), s, counts);
    z_next.push_back(mdn_sample(heads.logit_pi, heads.mu, heads.log_sigma, tau_));
    h_[k].index_copy_(0, idx, next.h);
    c_[k].index_copy_(0, idx, next.c);
    mask_prob.push_back(torch::sigmoid(heads.mask_logit));
    log_count.push_back(heads.log_count);
    reward.push_back(heads.reward);
    done_logit.push_back(heads.done_logit);
  }
  torch::Tensor zn, mp_t, lc_t, rw_t, rsd_t, dl_t;
  if (K == 1) {
    zn = z_next[0];
    mp_t = mask_prob[0];
    lc_t = log_count[0];
    rw_t = reward[0];
    dl_t = done_logit[0];
  } else {
    // Each row's next state from a member drawn at random; the heads' mean over members.
    std::vector<int64_t> pick(static_cast<size_t>(B));
    std::uniform_int_distribution<int64_t> member(0, static_cast<int64_t>(K) - 1);
    for (auto& m : pick) m = member(pick_);
    auto all = torch::stack(z_next, 0);  // [K, B, Z]
    auto sel = torch::tensor(pick, torch::kInt64).view({1, B, 1}).expand({1, B, all.size(2)});
    zn = all.gather(0, sel).squeeze(0);
    mp_t = torch::stack(mask_prob, 0).mean(0);
    lc_t = torch::stack(log_count, 0).mean(0);
    auto rs = torch::stack(reward, 0);
    rw_t = rs.mean(0);
    rsd_t = (rs - rw_t).pow(2).mean(0).sqrt().contiguous();  // population std over members
    dl_t = torch::stack(done_logit, 0).mean(0);
  }
  z_.index_copy_(0, idx, zn);
  if (members_[0]->count_state) {
    // The carried counts: c + the members' mean change, rounded; the mask is c >= 1.
    auto next = members_[0]->next_counts(counts, lc_t);
    counts_.index_copy_(0, idx, next);
    if (F > 0) {
      auto nc = next.contiguous();
      for (int64_t b = 0; b < B; ++b) {
        const float* row = nc.data_ptr<float>() + b * N;
        std::vector<uint16_t> c(static_cast<size_t>(N));
        for (int64_t x = 0; x < N; ++x) c[static_cast<size_t>(x)] = static_cast<uint16_t>(row[x]);
        fit_matches(matches_[which[static_cast<size_t>(b)]], taken[static_cast<size_t>(b)], c);
      }
    }
    mp_t = (next >= 1).to(torch::kFloat);
    lc_t = torch::log1p(next);
  }
  // One contiguous read of each head; rows are read through pointers (no tensor op per row).
  mp_t = mp_t.contiguous();
  lc_t = lc_t.contiguous();
  rw_t = rw_t.contiguous();
  dl_t = dl_t.contiguous();
  const float *mp = mp_t.data_ptr<float>(), *lc = lc_t.data_ptr<float>(), *rw = rw_t.data_ptr<float>(), *dl = dl_t.data_ptr<float>();
  const float* sd = rsd_t.defined() ? rsd_t.data_ptr<float>() : nullptr;
  std::vector<Step> out(static_cast<size_t>(B));
  raw_.assign(static_cast<size_t>(B), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    auto& st = out[static_cast<size_t>(b)];
    const size_t e = which[static_cast<size_t>(b)];
    const bool noop = actions[static_cast<size_t>(b)].xfer == N;
    ++t_[e];
    st.observation = observe(static_cast<int64_t>(e), mp + b * N, lc + b * N);
    bool any = false;
    for (int64_t x = 0; x < N; ++x) any = any || st.observation.xfer_mask[static_cast<size_t>(x)];
    const double spread = sd ? static_cast<double>(sd[b]) * reward_std_ : 0.0;
    raw_[static_cast<size_t>(b)] = noop ? 0.0 : static_cast<double>(rw[b]) * reward_std_;
    st.reward = noop ? 0.0 : raw_[static_cast<size_t>(b)] - penalty_ * spread;
    if (!noop && sd) {
      disagreement_sum_ += spread;
      ++disagreement_n_;
    }
    st.done = noop || dl[b] > 0.f || t_[e] >= env_.max_steps || !any;
  }
  return out;
}

DreamEnv::DreamEnv(std::vector<WorldModelNet> members, EnvConfig env, double reward_std, double tau, DreamStart start, double penalty)
    : batch_(std::move(members), env, reward_std, tau, penalty), env_(std::move(env)), start_(std::move(start)) {}

Expected<Observation> DreamEnv::reset() {
  last_ = batch_.reset({start_})[0];
  return last_;
}

Expected<Step> DreamEnv::step(const Action& a) {
  if (!last_.valid(a.xfer, a.location)) return Error::internal("invalid action in the dream: masked out");
  auto s = std::move(batch_.step({0}, {a})[0]);
  last_ = s.observation;
  return s;
}

void RealActor::reset() {
  state_ = net_->initial(1);
  fresh_ = true;
  pending_ = false;
}

Action RealActor::choose(Observation& o, bool greedy, std::mt19937_64& rng) {
  torch::NoGradGuard ng;
  if (!state_.h.defined()) reset();
  z_ = net_->normalize(encode(enc_, {o.graph.get()}));
  if (net_->count_state) {
    std::vector<uint8_t> mask;
    std::vector<uint16_t> count;
    state_masks(o, mask, count);
    counts_ = torch::tensor(std::vector<float>(count.begin(), count.end())).unsqueeze(0);
    if (net_->match_features > 0) {
      if (fresh_) rows_ = match_rows(o);
      else if (pending_) fit_matches(rows_, taken_, count);
      fresh_ = pending_ = false;
    }
  }
  auto lat = torch::cat({z_, state_.h}, 1).contiguous();
  o.latent.assign(lat.data_ptr<float>(), lat.data_ptr<float>() + lat.numel());
  return act(ctrl_, {&o}, greedy, rng)[0].action;
}

void RealActor::advance(const Action& a) {
  torch::NoGradGuard ng;
  torch::Tensor feats;
  if (net_->match_features > 0) {
    taken_ = take_match(rows_, a);
    pending_ = true;
    feats = torch::from_blob(taken_.data(), {1, net_->match_features}, torch::kFloat).clone();
  }
  state_ = net_->step(z_, net_->action_input(torch::tensor({static_cast<int64_t>(a.xfer)}, torch::kInt64),
                                             torch::tensor({static_cast<int64_t>(a.location)}, torch::kInt64), feats),
                      state_, counts_)
               .first;
}

Expected<RealRollout> real_rollout(RealActor& actor, GraphEnv& env, bool greedy, std::mt19937_64& rng) {
  auto first = env.reset();
  if (!first) return first.error();
  Observation obs = std::move(*first);
  actor.reset();
  RealRollout r;
  r.initial_cost = env.initial_cost();
  for (;;) {
    const Action a = actor.choose(obs, greedy, rng);
    auto st = env.step(a);
    if (!st) return st.error();
    ++r.steps;
    r.trace.push_back({st->info.rule, a.location, st->reward});
    actor.advance(a);
    if (st->done) break;
    obs = std::move(st->observation);
  }
  r.best_cost = env.best_cost();
  return r;
}

}  // namespace rlflow::rl::wm

namespace rlflow::rl {

namespace {

using json = nlohmann::json;

struct LoadedWorldModel {
  json meta;
  WorldModelConfig cfg;
  PpoConfig agent_cfg;
  std::vector<const rules::Rule*> rules;
  nets::GraphEncoder encoder{nullptr};
  wm::WorldModelNet net{nullptr};          // member 0
  std::vector<wm::WorldModelNet> members;  // the ensemble, members[0] == net
};

// The checkpoint's rules (by name) as rule pointers.
using RulesFor = std::function<Expected<std::vector<const rules::Rule*>>(const std::vector<std::string>&)>;

RulesFor from_library(const rules::RuleLibrary& lib, const std::string& path) {
  return [&lib, path](const std::vector<std::string>& names) { return lookup_rules(lib, names, path); };
}

Expected<LoadedWorldModel> load_world_model(const std::string& path, const RulesFor& rules_for) {
  LoadedWorldModel w;
  auto meta = checkpoint::read_meta(path);
  if (!meta) return meta.error();
  w.meta = *meta;
  const std::string kind = meta->value("kind", "");
  if (kind != "world-model" && kind != "dream-controller") return Error::bad_input(path + ": not a world model (kind " + kind + ")");
  const std::string cfg_text = meta->value(kind == "world-model" ? "config" : "world_model_config", "");
  auto cfg = parse_world_model_config(cfg_text, path);
  if (!cfg) return cfg.error();
  w.cfg = *cfg;
  if (cfg_text.find("count_state") == std::string::npos) w.cfg.count_state = false;  // written before count_state existed
  auto acfg = parse_ppo_config(meta->value("agent_config", ""), path);
  if (!acfg) return acfg.error();
  w.agent_cfg = *acfg;
  auto rules = rules_for(meta->value("rules", std::vector<std::string>{}));
  if (!rules) return rules.error();
  w.rules = std::move(*rules);
  const int N = static_cast<int>(w.rules.size()), Z = meta->value("z_dim", 0);
  auto vocab = checkpoint::op_vocab(*meta, path);
  if (!vocab) return vocab.error();
  w.encoder = nets::GraphEncoder(node_feature_dim(*vocab), edge_feature_dim(), global_feature_dim(), w.agent_cfg.hidden,
                                 w.agent_cfg.gnn_rounds);
  // A dream controller keeps member 0 only (what its real actor needs); a world model keeps them all.
  const int K = kind == "world-model" ? std::max(1, meta->value("ensemble", 1)) : 1;
  for (int k = 0; k < K; ++k)
    w.members.emplace_back(Z, N, static_cast<int>(w.agent_cfg.env.max_locations), w.cfg.lstm_hidden, w.cfg.mixtures, w.cfg.log_sigma_min,
                           w.cfg.log_sigma_max, w.cfg.count_state, w.cfg.match_features ? wm::kMatchFeatures : 0);
  w.net = w.members[0];
  if (auto st = checkpoint::load(path, wm::ensemble_modules(w.members, w.encoder), nullptr); !st.ok()) return st.error();
  w.encoder->eval();
  return w;
}

// The controller of a dream-controller checkpoint (and its PPO settings).
Expected<std::pair<wm::ControllerNet, PpoConfig>> load_controller(const std::string& path, const LoadedWorldModel& w) {
  if (w.meta.value("kind", "") != "dream-controller") return Error::bad_input(path + ": not a dream controller");
  auto cfg = parse_ppo_config(w.meta.value("config", ""), path);
  if (!cfg) return cfg.error();
  const int N = static_cast<int>(w.rules.size()), Z = w.meta.value("z_dim", 0);
  wm::ControllerNet ctrl(Z + w.cfg.lstm_hidden, N, cfg->hidden, static_cast<int>(cfg->env.max_locations));
  if (auto st = checkpoint::load(path, {{"controller", ctrl.get()}}, nullptr); !st.ok()) return st.error();
  return std::make_pair(ctrl, *cfg);
}

// Steps every environment of `batch`, from its reset observations `obs`, until each is done, with
// the controller's actions (greedy or sampled) chosen for all active environments at once.
// on_step(e, observation acted on, choice, step, unpenalised reward) sees every step. Returns the
// seconds spent in DreamBatch::step.
template <class OnStep>
double run_dream(wm::DreamBatch& batch, std::vector<Observation> obs, wm::ControllerNet& ctrl, bool greedy, std::mt19937_64& rng,
                 OnStep&& on_step) {
  std::vector<size_t> active(obs.size());
  std::iota(active.begin(), active.end(), size_t{0});
  double seconds = 0;
  while (!active.empty()) {
    std::vector<const Observation*> op;
    for (auto e : active) op.push_back(&obs[e]);
    auto choices = wm::act(ctrl, op, greedy, rng);
    std::vector<Action> acts;
    for (const auto& c : choices) acts.push_back(c.action);
    const auto ts = std::chrono::steady_clock::now();
    auto out = batch.step(active, acts);
    seconds += seconds_since(ts);
    std::vector<size_t> still;
    for (size_t k = 0; k < active.size(); ++k) {
      const size_t e = active[k];
      on_step(e, obs[e], choices[k], out[k], batch.raw_rewards()[k]);
      if (!out[k].done) {
        obs[e] = std::move(out[k].observation);
        still.push_back(e);
      }
    }
    active = std::move(still);
  }
  return seconds;
}

}  // namespace

Expected<DreamSummary> train_dream_agent(const DreamTrainOptions& o, const TrainProgress& progress) {
  if (!o.library || !o.cost) return Error::internal("train_dream_agent: no rule library or cost model");
  if (o.models.empty()) return Error::bad_input("train-agent --world-model: no --model to start dreams from");
  if (o.temperature <= 0) return Error{ErrorCode::kUsage, "--temperature must be positive"};
  if (o.batch < 1) return Error{ErrorCode::kUsage, "--dream-batch must be >= 1"};
  if (o.uncertainty_penalty < 0) return Error{ErrorCode::kUsage, "--uncertainty-penalty must be >= 0"};
  torch::set_num_threads(o.config.torch_threads);
  torch::manual_seed(o.seed);
  auto w = load_world_model(o.world_model, from_library(*o.library, o.world_model));
  if (!w) return w.error();
  if (w->meta.value("kind", "") != "world-model") return Error::bad_input(o.world_model + ": not a world model");
  PpoConfig cfg = o.config;
  cfg.env = w->agent_cfg.env;  // the dream simulates the environment the data came from
  const int N = static_cast<int>(w->rules.size()), Z = w->meta.value("z_dim", 0);
  const double reward_std = w->meta.value("reward_std", 1.0);
  if (o.uncertainty_penalty > 0 && w->members.size() < 2)
    return Error::bad_input("--uncertainty-penalty needs an ensemble world model (model.ensemble >= 2 in its config); " + o.world_model +
                            " has one member");
  auto shared = locked_cost_model(*o.cost);
  // Real initial states (one real reset per model): dreams start where real episodes start.
  std::vector<std::unique_ptr<GraphEnv>> real;
  std::vector<wm::DreamStart> starts;
  for (const auto& m : o.models) {
    real.push_back(std::make_unique<GraphEnv>(m.graph, w->rules, *shared, cfg.env));
    auto obs = real.back()->reset();
    if (!obs) return obs.error();
    wm::DreamStart s;
    auto z = wm::encode(w->encoder, {obs->graph.get()}).contiguous();
    s.z.assign(z.data_ptr<float>(), z.data_ptr<float>() + z.numel());
    s.xfer_mask = obs->xfer_mask;
    std::vector<uint8_t> mask;
    wm::state_masks(*obs, mask, s.count);
    s.matches = wm::match_rows(*obs);
    starts.push_back(std::move(s));
  }
  wm::ControllerNet ctrl(Z + w->cfg.lstm_hidden, N, cfg.hidden, static_cast<int>(cfg.env.max_locations));
  torch::optim::Adam opt(ctrl->parameters(), torch::optim::AdamOptions(cfg.learning_rate));
  std::mt19937_64 rng(o.seed);
  std::ofstream log;  // a dream run never resumes: its log starts empty
  RLFLOW_TRY_STATUS(checkpoint::open_log(log, o.log_path, false, "update", 0));
  DreamSummary sum;
  sum.ensemble = static_cast<int>(w->members.size());
  const auto t0 = std::chrono::steady_clock::now();
  // A whole update's episodes step as one batch.
  const int per_update = o.batch;
  wm::RealActor actor(ctrl, w->encoder, w->net);  // shares the modules being trained
  auto evaluate_real = [&]() -> Status {
    double total = 0;
    for (size_t m = 0; m < real.size(); ++m) {
      auto r = wm::real_rollout(actor, *real[m], true, rng);
      if (!r) return r.error();
      sum.real_eval_steps += r->steps;
      const double imp = (r->initial_cost - r->best_cost) / std::max(r->initial_cost, 1e-30);
      sum.real_improvement[o.models[m].name] = imp;
      sum.real_trace[o.models[m].name] = std::move(r->trace);
      total += imp;
    }
    sum.real_score = 100 * total / static_cast<double>(real.size());
    return {};
  };
  while (sum.dream_episodes < o.episodes) {
    const int64_t E = std::min<int64_t>(per_update, o.episodes - sum.dream_episodes);
    wm::DreamBatch batch(w->members, cfg.env, reward_std, o.temperature, o.uncertainty_penalty,
                         o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(sum.updates));
    std::vector<wm::DreamStart> st;
    for (int64_t e = 0; e < E; ++e) st.push_back(starts[static_cast<size_t>((sum.dream_episodes + e) % static_cast<int64_t>(starts.size()))]);
    auto obs = batch.reset(st);
    std::vector<std::vector<ppo::Transition>> eps(static_cast<size_t>(E));
    const auto td = std::chrono::steady_clock::now();
    double returns = 0, raw_returns = 0;
    int64_t steps = 0;
    const double step_seconds = run_dream(batch, std::move(obs), ctrl, false, rng,
                                          [&](size_t e, const Observation& seen, const ppo::Choice& c, const Step& step, double raw) {
                                            auto tr = ppo::make_transition(seen, c);
                                            tr.reward = static_cast<float>(step.reward);
                                            tr.done = step.done;
                                            returns += step.reward;
                                            raw_returns += raw;
                                            ++steps;
                                            eps[e].push_back(std::move(tr));
                                          });
    const double t_collect = seconds_since(td);
    std::vector<ppo::Transition> data;
    for (auto& e : eps)
      for (auto& t : e) data.push_back(std::move(t));
    ppo::compute_advantages(data, cfg);
    auto us = ppo::update([&](const std::vector<const ppo::Transition*>& mb) { return wm::evaluate(ctrl, mb); }, ctrl->parameters(), opt,
                          data, cfg, rng);
    ++sum.updates;
    sum.dream_episodes += E;
    sum.dream_steps += steps;
    sum.dream_seconds += step_seconds;
    sum.dream_score = returns / static_cast<double>(E);
    sum.dream_score_raw = raw_returns / static_cast<double>(E);
    sum.disagreement = batch.mean_disagreement();
    const bool last = sum.dream_episodes >= o.episodes;
    if ((o.eval_every > 0 && sum.updates % o.eval_every == 0) || last)
      if (auto s = evaluate_real(); !s.ok()) return s.error();
    UpdateLog u;
    u.update = sum.updates;
    u.episodes = sum.dream_episodes;
    u.env_steps = sum.dream_steps;
    u.mean_return = sum.dream_score;
    u.best_improvement = sum.real_score / 100;
    u.best_by_model = sum.real_improvement;
    u.env_steps_per_s = t_collect > 0 ? static_cast<double>(steps) / t_collect : 0.0;
    u.seconds = seconds_since(t0);
    ppo::record(us, u);
    if (log)
      log << json{{"update", u.update}, {"episodes", u.episodes}, {"dream_steps", u.env_steps}, {"mean_return", u.mean_return},
                  {"dream_score", u.mean_return}, {"dream_score_raw", sum.dream_score_raw}, {"disagreement", sum.disagreement},
                  {"real_score", sum.real_score}, {"best_improvement", u.best_improvement},
                  {"best_by_model", u.best_by_model}, {"env_steps_per_s", u.env_steps_per_s},
                  {"dream_step_ms", steps ? 1e3 * step_seconds / static_cast<double>(steps) : 0.0}, {"policy_loss", u.policy_loss},
                  {"value_loss", u.value_loss}, {"entropy", u.entropy}, {"approx_kl", u.approx_kl}, {"clip_fraction", u.clip_fraction},
                  {"ppo_epochs", u.ppo_epochs}, {"seconds", u.seconds}}
                 .dump()
          << "\n"
          << std::flush;
    if (progress) progress(u);
  }
  // The dream's prediction of the real evaluation: the same greedy controller from the same real
  // initial states, rewards unpenalised.
  {
    wm::DreamBatch batch(w->members, cfg.env, reward_std, o.temperature, 0, o.seed ^ 0xD8EAull);
    std::vector<double> total(starts.size(), 0.0), best(starts.size(), 0.0);  // best: the real score's best-state rule
    std::vector<std::vector<TraceStep>> trace(starts.size());
    run_dream(batch, batch.reset(starts), ctrl, true, rng, [&](size_t e, const Observation&, const ppo::Choice& c, const Step&, double raw) {
      total[e] += raw;
      best[e] = std::max(best[e], total[e]);
      const bool noop = c.action.xfer == N;
      trace[e].push_back({noop ? std::string() : w->rules[static_cast<size_t>(c.action.xfer)]->name, c.action.location, raw});
    });
    double mean = 0;
    for (size_t m = 0; m < starts.size(); ++m) {
      const double imp = best[m] / cfg.env.reward_scale;
      sum.dream_greedy_improvement[o.models[m].name] = imp;
      sum.dream_trace[o.models[m].name] = std::move(trace[m]);
      mean += imp;
    }
    sum.dream_greedy_score = 100 * mean / static_cast<double>(starts.size());
  }
  sum.seconds = seconds_since(t0);
  sum.dream_step_ms = sum.dream_steps ? 1e3 * sum.dream_seconds / static_cast<double>(sum.dream_steps) : 0.0;
  std::vector<std::string> rule_names;
  for (const auto* r : w->rules) rule_names.push_back(r->name);
  json meta = {{"kind", "dream-controller"}, {"config", to_yaml(cfg)}, {"agent_config", to_yaml(w->agent_cfg)},
               {"world_model_config", to_yaml(w->cfg)}, {"rules", rule_names}, {"z_dim", Z}, {"temperature", o.temperature},
               {"seed", o.seed}, {"world_model", o.world_model}, {"reward_std", reward_std}, {"target", o.target}, {"cost_model", o.cost_model},
               {"cost_fingerprint", o.cost ? o.cost->device_fingerprint() : std::string{}},
               {"counters", {{"update", sum.updates}, {"episodes", sum.dream_episodes}, {"env_steps", sum.dream_steps}}},
               {"real_score", sum.real_score}, {"dream_score", sum.dream_score}, {"dream_score_raw", sum.dream_score_raw},
               {"ensemble", sum.ensemble}, {"uncertainty_penalty", o.uncertainty_penalty}, {"op_vocab", w->encoder->op_vocab}};
  if (auto s = checkpoint::save(o.out, {{"controller", ctrl.get()}, {"encoder", w->encoder.get()}, {"world_model", w->net.get()}}, &opt, meta);
      !s.ok())
    return s.error();
  return sum;
}

// Used by rl_search for "dream-controller" agents.
Expected<std::unique_ptr<RolloutOptimizer>> make_dream_optimizer(const RlSearchOptions& o, const rules::RuleLibrary& lib,
                                                                  cost::CostModel& model);

namespace {

class DreamControllerOptimizer : public RolloutOptimizer {
 public:
  DreamControllerOptimizer(const LoadedWorldModel& w, wm::ControllerNet ctrl, const PpoConfig& cfg, cost::CostModel& model, RlSearchOptions o)
      : RolloutOptimizer(w.rules, model, cfg.env, std::move(o), cfg.torch_threads), actor_(std::move(ctrl), w.encoder, w.net) {}

 protected:
  Status rollout(GraphEnv& env, bool greedy, std::mt19937_64& rng, search::Report& report) override {
    auto ro = wm::real_rollout(actor_, env, greedy, rng);
    if (!ro) return ro.error();
    report.agent_actions += ro->steps;
    // NO-OP and refused steps leave the rule empty; every applied one is observed, as the reset was.
    const auto applied = std::count_if(ro->trace.begin(), ro->trace.end(), [](const auto& t) { return !t.rule.empty(); });
    report.generated += applied;
    report.expanded += 1 + applied;
    return {};
  }

 private:
  wm::RealActor actor_;
};

}  // namespace

Expected<std::unique_ptr<RolloutOptimizer>> make_dream_optimizer(const RlSearchOptions& o, const rules::RuleLibrary& lib,
                                                                 cost::CostModel& model) {
  auto w = load_world_model(o.agent_path, from_library(lib, o.agent_path));
  if (!w) return w.error();
  auto c = load_controller(o.agent_path, *w);
  if (!c) return c.error();
  return std::unique_ptr<RolloutOptimizer>(std::make_unique<DreamControllerOptimizer>(*w, c->first, c->second, model, o));
}

namespace wm {

Expected<RealActor> load_real_actor(const std::string& path, const std::vector<const rules::Rule*>& rules) {
  auto w = load_world_model(path, [&](const std::vector<std::string>& names) -> Expected<std::vector<const rules::Rule*>> {
    bool same = names.size() == rules.size();
    for (size_t i = 0; same && i < names.size(); ++i) same = names[i] == rules[i]->name;
    if (!same) return Error::bad_input(path + ": the controller was trained with other rules than these");
    return rules;
  });
  if (!w) return w.error();
  auto c = load_controller(path, *w);
  if (!c) return c.error();
  return RealActor(c->first, w->encoder, w->net);
}

}  // namespace wm

}  // namespace rlflow::rl
