// The PPO training loop over real environments: episodes are collected whole (several
// environments step together, one thread each, while one batched forward pass chooses all their
// actions), then PPO updates the network. Whole episodes per update make a checkpoint at an
// update boundary a complete state: a resumed run repeats an uninterrupted one exactly.
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "checkpoint.h"
#include "imitation.h"
#include "ppo.h"
#include "rlflow/rl/agent.h"

namespace rlflow::rl {

namespace {

using json = nlohmann::json;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Episode {
  size_t model = 0;
  std::vector<ppo::Transition> steps;
  double ret = 0, final_improvement = 0, best_improvement = 0, step_seconds = 0;
};

struct Counters {
  int64_t update = 0, episodes = 0, env_steps = 0;
  double env_seconds = 0;
  std::map<std::string, double> best;
  std::map<std::string, int64_t> best_episode, best_steps;
};

json counters_json(const Counters& c) {
  return {{"update", c.update}, {"episodes", c.episodes}, {"env_steps", c.env_steps}, {"env_seconds", c.env_seconds},
          {"best_improvement", c.best}, {"episodes_to_best", c.best_episode}, {"env_steps_to_best", c.best_steps}};
}

void counters_from(const json& j, Counters& c) {
  c.update = j.value("update", int64_t{0});
  c.episodes = j.value("episodes", int64_t{0});
  c.env_steps = j.value("env_steps", int64_t{0});
  c.env_seconds = j.value("env_seconds", 0.0);
  c.best = j.value("best_improvement", std::map<std::string, double>{});
  c.best_episode = j.value("episodes_to_best", std::map<std::string, int64_t>{});
  c.best_steps = j.value("env_steps_to_best", std::map<std::string, int64_t>{});
}

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream os;
  os << rng;
  return os.str();
}

// Runs `count` whole episodes, numbered from `first`, on up to cfg.num_envs environments at once.
class Collector {
 public:
  Collector(const TrainOptions& o, const PpoConfig& cfg, cost::CostModel& model) : o_(o), cfg_(cfg), model_(model) {
    slots_.resize(static_cast<size_t>(cfg.num_envs));
  }

  Expected<std::vector<Episode>> run(nets::PolicyNet& net, int64_t first, int64_t count, std::mt19937_64& rng) {
    std::vector<Episode> done(static_cast<size_t>(count));
    struct Active {
      size_t slot;
      int64_t ep;
      GraphEnv* env;
      Observation obs;
      Episode rec;
    };
    std::vector<Active> active;
    int64_t next = first;
    auto start = [&](size_t slot) -> Status {
      const size_t m = static_cast<size_t>(next % static_cast<int64_t>(o_.models.size()));
      auto& env = slots_[slot][m];
      if (!env) env = std::make_unique<GraphEnv>(o_.models[m].graph, o_.rules, model_, cfg_.env);
      auto obs = env->reset();
      if (!obs) return obs.error();
      Active a{slot, next++, env.get(), std::move(*obs), {}};
      a.rec.model = m;
      active.push_back(std::move(a));
      return {};
    };
    for (size_t s = 0; s < slots_.size() && next < first + count; ++s)
      if (auto st = start(s); !st.ok()) return st.error();
    const size_t L = cfg_.env.max_locations;
    while (!active.empty()) {
      std::vector<const Observation*> obs;
      for (const auto& a : active) obs.push_back(&a.obs);
      auto choices = ppo::act(net, obs, L, false, rng);
      std::vector<Expected<Step>> results(active.size(), Error::internal("not stepped"));
      auto step_one = [&](size_t k) { results[k] = active[k].env->step(choices[k].action); };
      if (active.size() == 1) {
        step_one(0);
      } else {
        std::vector<std::thread> threads;
        for (size_t k = 0; k < active.size(); ++k) threads.emplace_back(step_one, k);
        for (auto& t : threads) t.join();
      }
      std::vector<Active> still;
      std::vector<size_t> freed;
      for (size_t k = 0; k < active.size(); ++k) {
        auto& a = active[k];
        if (!results[k]) return results[k].error();
        auto& st = *results[k];
        auto tr = ppo::make_transition(a.obs, choices[k]);
        tr.reward = static_cast<float>(st.reward);
        tr.done = st.done;
        a.rec.steps.push_back(std::move(tr));
        a.rec.ret += st.reward;
        a.rec.step_seconds += st.info.seconds;
        if (st.done) {
          a.rec.final_improvement = st.info.improvement;
          a.rec.best_improvement = (a.env->initial_cost() - a.env->best_cost()) / std::max(a.env->initial_cost(), 1e-30);
          done[static_cast<size_t>(a.ep - first)] = std::move(a.rec);
          freed.push_back(a.slot);
        } else {
          a.obs = std::move(st.observation);
          still.push_back(std::move(a));
        }
      }
      active = std::move(still);
      for (auto s : freed)
        if (next < first + count)
          if (auto st = start(s); !st.ok()) return st.error();
      std::sort(active.begin(), active.end(), [](const Active& x, const Active& y) { return x.slot < y.slot; });
    }
    return done;
  }

 private:
  const TrainOptions& o_;
  const PpoConfig& cfg_;
  cost::CostModel& model_;
  std::vector<std::map<size_t, std::unique_ptr<GraphEnv>>> slots_;
};

}  // namespace

Expected<TrainSummary> train_agent(const TrainOptions& o, const TrainProgress& progress) {
  if (o.models.empty()) return Error::bad_input("train-agent: no model to train on");
  if (o.rules.empty()) return Error::bad_input("train-agent: no rules");
  if (!o.cost) return Error::internal("train-agent: no cost model");
  if (o.out.empty()) return Error::bad_input("train-agent: no output path (--out)");
  PpoConfig cfg = o.config;
  std::vector<std::string> rule_names, model_names;
  for (const auto* r : o.rules) rule_names.push_back(r->name);
  for (const auto& m : o.models) model_names.push_back(m.name);

  Counters c;
  std::mt19937_64 rng(o.seed);
  json resumed;
  if (o.resume) {
    auto meta = checkpoint::read_meta(o.out);
    if (!meta) return meta.error().with_context("--resume");
    resumed = *meta;
    if (resumed.value("rules", std::vector<std::string>{}) != rule_names)
      return Error::bad_input(o.out + ": the checkpoint was trained with other rules; cannot resume");
    auto saved = parse_ppo_config(resumed.value("config", ""), o.out);
    if (!saved) return saved.error();
    if (to_yaml(*saved) != to_yaml(cfg)) spdlog::warn("--resume: continuing with the checkpoint's config, not the one given");
    cfg = *saved;
  }
  torch::set_num_threads(cfg.torch_threads);
  torch::manual_seed(o.seed);
  nets::PolicyNet net(static_cast<int>(o.rules.size()), cfg.hidden, cfg.gnn_rounds);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(cfg.learning_rate));
  if (o.resume) {
    if (auto st = checkpoint::load(o.out, net, &opt); !st.ok()) return st.error();
    counters_from(resumed.value("counters", json::object()), c);
    std::istringstream is(resumed.value("rng", std::string{}));
    is >> rng;
    if (!is) return Error::bad_input(o.out + ": damaged RNG state in checkpoint");
    spdlog::info("resuming {} at update {}, episode {}", o.out, c.update, c.episodes);
  }
  auto meta = [&]() {
    return json{{"config", to_yaml(cfg)}, {"rules", rule_names}, {"models", model_names}, {"seed", o.seed},
                {"counters", counters_json(c)}, {"rng", rng_state(rng)}};
  };

  std::ofstream log;
  if (!o.log_path.empty()) {
    log.open(o.log_path, std::ios::app);
    if (!log) return Error::bad_input(o.log_path + ": cannot open the training log");
  }
  auto shared = locked_cost_model(*o.cost);
  Collector collector(o, cfg, *shared);
  const auto t0 = std::chrono::steady_clock::now();
  TrainSummary sum;
  if (cfg.imitation_epochs > 0 && c.update == 0) {
    auto demos = imitation::greedy_demonstrations(o.models, o.rules, *shared, cfg);
    if (!demos) return demos.error().with_context("imitation");
    auto st = imitation::behaviour_cloning(net, opt, *demos, cfg, cfg.imitation_epochs, rng);
    for (int round = 0; round < cfg.dagger_rounds; ++round) {
      auto added = imitation::dagger_round(net, *demos, o.models, o.rules, *shared, cfg, rng);
      if (!added) return added.error().with_context("imitation (DAgger)");
      st = imitation::behaviour_cloning(net, opt, *demos, cfg, cfg.imitation_epochs, rng);
      spdlog::info("DAgger round {}: {} states labelled by greedy, argmax reproduces {:.1f}% of {}", round + 1, *added,
                   100 * st.accuracy, demos->steps.size());
    }
    sum.imitation_states = static_cast<int64_t>(demos->steps.size());
    sum.imitation_epochs = st.epochs;
    sum.imitation_accuracy = st.accuracy;
    sum.imitation_first_loss = st.first_loss;
    sum.imitation_last_loss = st.last_loss;
    sum.imitation_env_steps = demos->env_steps;
    for (size_t m = 0; m < o.models.size(); ++m) sum.greedy_improvement[model_names[m]] = demos->improvement[m];
    spdlog::info("imitation: {} demonstration steps from greedy, {} epochs, loss {:.3f} -> {:.3f}, argmax reproduces {:.1f}%",
                 demos->steps.size(), st.epochs, st.first_loss, st.last_loss, 100 * st.accuracy);
  }
  while (c.episodes < o.episodes) {
    const auto tu = std::chrono::steady_clock::now();
    const int64_t count = std::min<int64_t>(cfg.episodes_per_update, o.episodes - c.episodes);
    auto eps = collector.run(net, c.episodes, count, rng);
    if (!eps) return eps.error();
    const double t_collect = since(tu);
    std::vector<ppo::Transition> data;
    UpdateLog u;
    double step_seconds = 0;
    int64_t steps = 0;
    for (size_t k = 0; k < eps->size(); ++k) {
      auto& e = (*eps)[k];
      const auto& name = model_names[e.model];
      steps += static_cast<int64_t>(e.steps.size());
      step_seconds += e.step_seconds;
      u.mean_return += e.ret / static_cast<double>(eps->size());
      u.mean_improvement += e.final_improvement / static_cast<double>(eps->size());
      const int64_t ep_index = c.episodes + static_cast<int64_t>(k) + 1;
      if (!c.best.count(name) || e.best_improvement > c.best[name] + 1e-12) {
        c.best[name] = e.best_improvement;
        c.best_episode[name] = ep_index;
        c.best_steps[name] = c.env_steps + steps;
      }
      for (auto& t : e.steps) data.push_back(std::move(t));
    }
    ppo::compute_advantages(data, cfg);
    auto st = ppo::update(net, opt, data, cfg, rng);
    ++c.update;
    c.episodes += count;
    c.env_steps += steps;
    c.env_seconds += step_seconds;

    u.update = c.update;
    u.episodes = c.episodes;
    u.env_steps = c.env_steps;
    for (const auto& [k, v] : c.best) u.best_improvement = std::max(u.best_improvement, v);
    u.best_by_model = c.best;
    u.env_steps_per_s = t_collect > 0 ? static_cast<double>(steps) / t_collect : 0.0;
    u.real_step_ms = steps ? 1e3 * step_seconds / static_cast<double>(steps) : 0.0;
    u.seconds = since(t0);
    ppo::record(st, u);
    if (log) {
      log << json{{"update", u.update}, {"episodes", u.episodes}, {"env_steps", u.env_steps}, {"mean_return", u.mean_return},
                  {"mean_improvement", u.mean_improvement}, {"best_improvement", u.best_improvement},
                  {"best_by_model", u.best_by_model}, {"env_steps_per_s", u.env_steps_per_s}, {"real_step_ms", u.real_step_ms},
                  {"policy_loss", u.policy_loss}, {"value_loss", u.value_loss}, {"entropy", u.entropy},
                  {"approx_kl", u.approx_kl}, {"clip_fraction", u.clip_fraction}, {"ppo_epochs", u.ppo_epochs},
                  {"seconds", u.seconds}}
                 .dump()
          << "\n";
      log.flush();
    }
    if (progress) progress(u);
    if (c.update % cfg.checkpoint_every == 0 || c.episodes >= o.episodes)
      if (auto s = checkpoint::save(o.out, net, &opt, meta()); !s.ok()) return s.error();
  }
  sum.updates = c.update;
  sum.episodes = c.episodes;
  sum.env_steps = c.env_steps;
  sum.env_seconds = c.env_seconds;
  sum.seconds = since(t0);
  sum.best_improvement = c.best;
  sum.episodes_to_best = c.best_episode;
  sum.env_steps_to_best = c.best_steps;
  return sum;
}

Expected<AgentInfo> read_agent_info(const std::string& path) {
  auto meta = checkpoint::read_meta(path);
  if (!meta) return meta.error();
  AgentInfo info;
  info.kind = meta->value("kind", "policy");
  auto cfg = parse_ppo_config(meta->value(info.kind == "world-model" ? "agent_config" : "config", ""), path);
  if (!cfg) return cfg.error();
  info.config = *cfg;
  info.rules = meta->value("rules", std::vector<std::string>{});
  info.models = meta->value("models", std::vector<std::string>{});
  info.seed = meta->value("seed", uint64_t{0});
  Counters c;
  counters_from(meta->value("counters", json::object()), c);
  info.updates = c.update;
  info.episodes = c.episodes;
  info.env_steps = c.env_steps;
  return info;
}

}  // namespace rlflow::rl
