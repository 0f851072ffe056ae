#include "imitation.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <spdlog/spdlog.h>

#include "rlflow/search/optimizer.h"

namespace rlflow::rl::imitation {

namespace {

// The action of `obs` that applies `m`: its rule's xfer and the location with the same nodes.
std::optional<Action> find_action(const Observation& obs, const std::vector<const rules::Rule*>& rules, const rules::Match& m) {
  for (size_t x = 0; x < rules.size(); ++x) {
    if (rules[x]->name != m.rule || x >= obs.locations.size()) continue;
    for (size_t l = 0; l < obs.locations[x].size(); ++l)
      if (obs.locations[x][l].nodes == m.nodes && obs.valid(static_cast<int>(x), static_cast<int>(l)))
        return Action{static_cast<int>(x), static_cast<int>(l)};
  }
  return std::nullopt;
}

}  // namespace

Expected<Demonstrations> greedy_demonstrations(const std::vector<TrainModel>& models, const std::vector<const rules::Rule*>& rules,
                                               cost::CostModel& model, const PpoConfig& cfg) {
  Demonstrations d;
  auto greedy = search::make_optimizer("greedy", rules, model);
  if (!greedy) return greedy.error();
  for (const auto& tm : models) {
    search::Limits lim;
    lim.budget = cfg.env.max_steps;
    auto res = (*greedy)->run(tm.graph, lim);
    if (!res) return res.error().with_context("greedy demonstration on " + tm.name);
    GraphEnv env(tm.graph, rules, model, cfg.env);
    auto obs = env.reset();
    if (!obs) return obs.error();
    std::vector<ppo::Transition> episode;
    bool done = false;
    for (const auto& m : res->steps) {
      auto a = find_action(*obs, rules, m);
      if (!a) {
        spdlog::warn("imitation: {}: greedy step {} ({}) is beyond the environment's {} locations; the demonstration ends there",
                     tm.name, episode.size() + 1, m.rule, cfg.env.max_locations);
        break;
      }
      ppo::Choice c{*a, 0.f, 0.f};
      auto tr = ppo::make_transition(*obs, c);
      auto st = env.step(*a);
      if (!st) return st.error();
      ++d.env_steps;
      tr.reward = static_cast<float>(st->reward);
      tr.done = st->done;
      episode.push_back(std::move(tr));
      if (st->done) {
        done = true;
        break;
      }
      obs = std::move(st->observation);
    }
    if (!done) {
      // Greedy stopped: no single rewrite improves the cost. The expert's last action is NO-OP.
      ppo::Choice c{Action{static_cast<int>(rules.size()), 0}, 0.f, 0.f};
      auto tr = ppo::make_transition(*obs, c);
      auto st = env.step(c.action);
      if (!st) return st.error();
      ++d.env_steps;
      tr.reward = static_cast<float>(st->reward);
      tr.done = true;
      episode.push_back(std::move(tr));
    }
    // Discounted returns of the demonstration: the value head's targets.
    double ret = 0;
    for (size_t i = episode.size(); i-- > 0;) {
      ret = episode[i].reward + cfg.gamma * ret;
      episode[i].ret = static_cast<float>(ret);
    }
    d.improvement.push_back((env.initial_cost() - env.best_cost()) / std::max(env.initial_cost(), 1e-30));
    for (auto& t : episode) d.steps.push_back(std::move(t));
  }
  return d;
}

Expected<int64_t> dagger_round(nets::PolicyNet& net, Demonstrations& demos, const std::vector<TrainModel>& models,
                               const std::vector<const rules::Rule*>& rules, cost::CostModel& model, const PpoConfig& cfg,
                               std::mt19937_64& rng) {
  auto greedy = search::make_optimizer("greedy", rules, model);
  if (!greedy) return greedy.error();
  const auto noop = static_cast<int>(rules.size());
  int64_t added = 0;
  for (const auto& tm : models) {
    GraphEnv env(tm.graph, rules, model, cfg.env);
    auto obs = env.reset();
    if (!obs) return obs.error();
    for (int t = 0; t < cfg.env.max_steps; ++t) {
      search::Limits one;
      one.budget = 1;
      one.max_locations = cfg.env.max_locations;
      auto best = (*greedy)->run(env.graph(), one);
      if (!best) return best.error().with_context("dagger label on " + tm.name);
      std::optional<Action> expert = best->steps.empty() ? std::optional<Action>(Action{noop, 0})
                                                         : find_action(*obs, rules, best->steps.front());
      if (expert) {
        auto tr = ppo::make_transition(*obs, ppo::Choice{*expert, 0.f, 0.f});
        tr.ret = std::numeric_limits<float>::quiet_NaN();
        demos.steps.push_back(std::move(tr));
        ++added;
      }
      auto choice = ppo::act(net, {&*obs}, cfg.env.max_locations, true, rng);
      auto st = env.step(choice[0].action);
      if (!st) return st.error();
      ++demos.env_steps;
      if (st->done) break;
      obs = std::move(st->observation);
    }
  }
  return added;
}

Stats behaviour_cloning(nets::PolicyNet& net, torch::optim::Optimizer& opt, const Demonstrations& demos, const PpoConfig& cfg,
                        int epochs, std::mt19937_64& rng) {
  Stats s;
  const size_t T = demos.steps.size();
  if (T == 0 || epochs <= 0) return s;
  const size_t L = std::max<size_t>(cfg.env.max_locations, 1);
  std::vector<size_t> order(T);
  std::iota(order.begin(), order.end(), size_t{0});
  for (int e = 0; e < epochs; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    double sum = 0;
    size_t n = 0;
    for (size_t start = 0; start < T; start += static_cast<size_t>(cfg.minibatch)) {
      const size_t end = std::min(T, start + static_cast<size_t>(cfg.minibatch));
      std::vector<const ppo::Transition*> mb;
      std::vector<float> ret;
      for (size_t k = start; k < end; ++k) {
        mb.push_back(&demos.steps[order[k]]);
        ret.push_back(demos.steps[order[k]].ret);
      }
      auto ev = ppo::evaluate(net, mb, L);
      auto nll = -ev.logp.mean();
      // The value is fitted where the return is known (the expert's own trajectories).
      auto target = torch::tensor(ret);
      auto known = torch::isfinite(target);
      auto loss = nll;
      if (known.any().item<bool>())
        loss = loss + cfg.value_coef * (ev.value.masked_select(known) - target.masked_select(known)).pow(2).mean();
      opt.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(net->parameters(), cfg.max_grad_norm);
      opt.step();
      sum += nll.item<double>() * static_cast<double>(mb.size());
      n += mb.size();
    }
    if (e == 0) s.first_loss = sum / static_cast<double>(n);
    s.last_loss = sum / static_cast<double>(n);
    ++s.epochs;
  }
  // How much of the demonstrations the fitted policy reproduces with its argmax (ppo::act with
  // greedy = true: the most likely xfer, then its most likely location).
  size_t hit = 0;
  {
    torch::NoGradGuard ng;
    for (size_t start = 0; start < T; start += static_cast<size_t>(cfg.minibatch)) {
      const size_t end = std::min(T, start + static_cast<size_t>(cfg.minibatch));
      std::vector<const ppo::Transition*> mb;
      for (size_t k = start; k < end; ++k) mb.push_back(&demos.steps[k]);
      auto ev = ppo::evaluate(net, mb, L);
      auto xbest = ev.xfer_logp.argmax(1), lbest = ev.location_logp.argmax(1);
      for (size_t k = 0; k < mb.size(); ++k) {
        const auto i = static_cast<int64_t>(k);
        const bool noop = mb[k]->xfer >= net->num_xfers;
        if (xbest[i].item<int64_t>() == mb[k]->xfer && (noop || lbest[i].item<int64_t>() == mb[k]->location)) ++hit;
      }
    }
  }
  s.accuracy = static_cast<double>(hit) / static_cast<double>(T);
  return s;
}

}  // namespace rlflow::rl::imitation
