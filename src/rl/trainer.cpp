// The PPO training loop over real environments: episodes are collected whole (several
// environments step together, one thread each, while one batched forward pass chooses all their
// actions), then PPO updates the network. Whole episodes per update make a checkpoint at an
// update boundary a complete state: a resumed run repeats an uninterrupted one exactly.
//
// Data-parallel across processes (world_size > 1, c10d): episode e of an update is collected by
// rank e mod world_size, each episode samples from its own generator (seeded by the run's seed and
// e), the ranks exchange their episodes' summaries, and PPO sums every minibatch's gradients over
// the ranks (ppo::Shard). Given the seed, the result is the single-process run's, up to
// floating-point summation order.
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "checkpoint.h"
#include "distributed.h"
#include "imitation.h"
#include "ppo.h"
#include "rlflow/rl/agent.h"
#include "rlflow/util/clock.h"

namespace rlflow::rl {

namespace {

using json = nlohmann::json;

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

// Episode e's own generator: what it samples depends only on the seed and e, not on which
// environments, threads or ranks share its batch.
std::mt19937_64 episode_rng(uint64_t seed, int64_t e) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(e),
                    static_cast<uint32_t>(static_cast<uint64_t>(e) >> 32), 0x65706973u};
  return std::mt19937_64(seq);
}

// One episode as every rank learns of it: index, model, steps, return, final and best improvement, step seconds.
constexpr int64_t kSummaryWidth = 7;

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream os;
  os << rng;
  return os.str();
}

// Runs the whole episodes numbered `episodes` (in that order), on up to cfg.num_envs environments at
// once; episode e plays model e mod (number of models) and samples from episode_rng(seed, e).
class Collector {
 public:
  Collector(const TrainOptions& o, const PpoConfig& cfg, cost::CostModel& model) : o_(o), cfg_(cfg), model_(model) {
    slots_.resize(static_cast<size_t>(cfg.num_envs));
  }

  // `done_before`: the run's episodes finished before these (what TrainOptions::on_episode counts from).
  Expected<std::vector<Episode>> run(nets::PolicyNet& net, const std::vector<int64_t>& episodes, uint64_t seed, int64_t done_before) {
    std::vector<Episode> done(episodes.size());
    int64_t finished = 0;
    struct Active {
      size_t slot;
      size_t pos;  // in `episodes`
      GraphEnv* env;
      Observation obs;
      Episode rec;
      std::unique_ptr<std::mt19937_64> rng;
    };
    std::vector<Active> active;
    size_t next = 0;
    auto start = [&](size_t slot) -> Status {
      const int64_t e = episodes[next];
      const size_t m = static_cast<size_t>(e % static_cast<int64_t>(o_.models.size()));
      auto& env = slots_[slot][m];
      if (!env) env = std::make_unique<GraphEnv>(o_.models[m].graph, o_.rules, model_, cfg_.env);
      auto obs = env->reset();
      if (!obs) return obs.error();
      Active a{slot, next++, env.get(), std::move(*obs), {}, std::make_unique<std::mt19937_64>(episode_rng(seed, e))};
      a.rec.model = m;
      active.push_back(std::move(a));
      return {};
    };
    for (size_t s = 0; s < slots_.size() && next < episodes.size(); ++s)
      if (auto st = start(s); !st.ok()) return st.error();
    const size_t L = cfg_.env.max_locations;
    while (!active.empty()) {
      std::vector<const Observation*> obs;
      std::vector<std::mt19937_64*> rngs;
      for (const auto& a : active) {
        obs.push_back(&a.obs);
        rngs.push_back(a.rng.get());
      }
      auto choices = ppo::act(net, obs, L, false, rngs);
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
          if (o_.on_episode)
            o_.on_episode({episodes[a.pos], done_before + ++finished, static_cast<int64_t>(a.rec.steps.size()), a.rec.ret,
                           a.rec.best_improvement});
          done[a.pos] = std::move(a.rec);
          freed.push_back(a.slot);
        } else {
          a.obs = std::move(st.observation);
          still.push_back(std::move(a));
        }
      }
      active = std::move(still);
      for (auto s : freed)
        if (next < episodes.size())
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

  std::unique_ptr<dist::Comm> comm;
  if (o.world_size > 1 || o.rank != 0) {
    auto c = dist::Comm::connect({o.world_size, o.rank, o.master, o.dist_timeout_s});
    if (!c) return c.error();
    comm = std::move(*c);
    spdlog::info("train-agent: rank {} of {} joined at {}", comm->rank(), comm->size(), o.master);
  }
  const int world = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  const bool writer = rank == 0;  // rank 0 alone writes the checkpoint and the log

  Counters c;
  std::mt19937_64 rng(o.seed);
  json resumed;
  int op_vocab = op_vocab_size();  // a resumed agent keeps the vocabulary it was trained with
  if (o.resume) {
    auto meta = checkpoint::read_meta(o.out);
    if (!meta) return meta.error().with_context("--resume");
    resumed = *meta;
    if (resumed.value("rules", std::vector<std::string>{}) != rule_names)
      return Error::bad_input(o.out + ": the checkpoint was trained with other rules; cannot resume");
    // The rewards so far were under the checkpoint's target and cost: resuming under another would
    // mix two objectives in one agent.
    const std::string was = resumed.value("target", ""), cost_was = resumed.value("cost_model", "");
    if ((!was.empty() && was != o.target) || (!cost_was.empty() && cost_was != o.cost_model))
      return Error{ErrorCode::kUsage, o.out + ": the checkpoint was trained under --target " + was + " (" + cost_was +
                                          " cost); cannot resume under --target " + o.target + " (" + o.cost_model + " cost)"};
    auto saved = parse_ppo_config(resumed.value("config", ""), o.out);
    if (!saved) return saved.error();
    if (to_yaml(*saved) != to_yaml(cfg)) spdlog::warn("--resume: continuing with the checkpoint's config, not the one given");
    cfg = *saved;
    auto vocab = checkpoint::op_vocab(resumed, o.out);
    if (!vocab) return vocab.error();
    op_vocab = *vocab;
  }
  torch::set_num_threads(cfg.torch_threads);
  auto net = [&] {
    // torch's generator is process-wide: seeding and initialising are one step even when several
    // trainers share a process (the ranks of a test).
    static std::mutex init;
    std::lock_guard<std::mutex> lock(init);
    torch::manual_seed(o.seed);
    return nets::PolicyNet(static_cast<int>(o.rules.size()), cfg.hidden, cfg.gnn_rounds, op_vocab);
  }();
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(cfg.learning_rate));
  if (o.resume) {
    if (auto st = checkpoint::load(o.out, net, &opt); !st.ok()) return st.error();
    counters_from(resumed.value("counters", json::object()), c);
    std::istringstream is(resumed.value("rng", std::string{}));
    is >> rng;
    if (!is) return Error::bad_input(o.out + ": damaged RNG state in checkpoint");
    spdlog::info("resuming {} at update {}, episode {}", o.out, c.update, c.episodes);
  }
  if (comm) RLFLOW_TRY_STATUS(dist::broadcast_params(*comm, net->parameters()));
  auto meta = [&]() {
    return json{{"config", to_yaml(cfg)}, {"rules", rule_names}, {"models", model_names}, {"seed", o.seed},
                {"counters", counters_json(c)}, {"rng", rng_state(rng)}, {"target", o.target}, {"cost_model", o.cost_model},
                {"cost_fingerprint", o.cost ? o.cost->device_fingerprint() : std::string{}}};
  };

  std::ofstream log;
  if (writer) RLFLOW_TRY_STATUS(checkpoint::open_log(log, o.log_path, o.resume, "update", c.update));
  auto shared = locked_cost_model(*o.cost);
  Collector collector(o, cfg, *shared);
  const auto t0 = std::chrono::steady_clock::now();
  TrainSummary sum;
  sum.world_size = world;
  auto phase = [&](const std::string& name) {
    if (o.on_phase) o.on_phase(name);
  };
  if (cfg.imitation_epochs > 0 && c.update == 0) {
    // Every rank clones the same demonstrations the same way (deterministic under a deterministic
    // cost); the broadcast after it keeps the ranks equal if a measured cost made them differ.
    phase("imitation: greedy demonstrations");
    auto demos = imitation::greedy_demonstrations(o.models, o.rules, *shared, cfg);
    if (!demos) return demos.error().with_context("imitation");
    phase("imitation: behaviour cloning, " + std::to_string(cfg.imitation_epochs) + " epochs");
    auto st = imitation::behaviour_cloning(net, opt, *demos, cfg, cfg.imitation_epochs, rng);
    for (int round = 0; round < cfg.dagger_rounds; ++round) {
      phase("imitation: DAgger round " + std::to_string(round + 1) + "/" + std::to_string(cfg.dagger_rounds));
      auto added = imitation::dagger_round(net, *demos, o.models, o.rules, *shared, cfg, rng);
      if (!added) return added.error().with_context("imitation (DAgger)");
      st = imitation::behaviour_cloning(net, opt, *demos, cfg, cfg.imitation_epochs, rng);
      spdlog::info("DAgger round {}: {} states labelled by greedy, argmax reproduces {:.1f}% of {}", round + 1, *added,
                   100 * st.accuracy, demos->steps.size());
    }
    if (comm) RLFLOW_TRY_STATUS(dist::broadcast_params(*comm, net->parameters()));
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
  phase("PPO");
  while (c.episodes < o.episodes) {
    const auto tu = std::chrono::steady_clock::now();
    const int64_t count = std::min<int64_t>(cfg.episodes_per_update, o.episodes - c.episodes);
    std::vector<int64_t> mine;  // this rank's episodes of the update
    for (int64_t e = c.episodes; e < c.episodes + count; ++e)
      if (e % world == rank) mine.push_back(e);
    auto eps = collector.run(net, mine, o.seed, c.episodes);
    if (!eps) return eps.error();
    // Every rank learns every episode's summary, in episode order.
    auto rows = torch::zeros({static_cast<int64_t>(mine.size()), kSummaryWidth}, torch::kFloat64);
    auto row = rows.accessor<double, 2>();
    for (size_t k = 0; k < mine.size(); ++k) {
      const auto& e = (*eps)[k];
      const double vals[kSummaryWidth] = {static_cast<double>(mine[k]), static_cast<double>(e.model),
                                          static_cast<double>(e.steps.size()), e.ret, e.final_improvement,
                                          e.best_improvement, e.step_seconds};
      for (int64_t j = 0; j < kSummaryWidth; ++j) row[static_cast<int64_t>(k)][j] = vals[j];
    }
    torch::Tensor all = rows;
    if (comm) {
      auto gathered = comm->allgather_rows(rows);
      if (!gathered) return gathered.error();
      all = gathered->index_select(0, std::get<1>(gathered->select(1, 0).sort()));  // rank order -> episode order
    }
    const double t_collect = seconds_since(tu);
    auto acc = all.accessor<double, 2>();
    std::vector<ppo::Transition> data;
    ppo::Shard shard;
    shard.comm = comm.get();
    UpdateLog u;
    double step_seconds = 0;
    int64_t steps = 0;
    size_t own = 0;
    for (int64_t k = 0; k < all.size(0); ++k) {
      const auto ep = static_cast<int64_t>(acc[k][0]);
      const auto& name = model_names[static_cast<size_t>(acc[k][1])];
      const auto n = static_cast<int64_t>(acc[k][2]);
      if (own < mine.size() && mine[own] == ep) {  // ours: its transitions sit at [steps, steps + n) of the update
        for (int64_t i = 0; i < n; ++i) shard.global_index.push_back(steps + i);
        for (auto& t : (*eps)[own].steps) data.push_back(std::move(t));
        ++own;
      }
      steps += n;
      step_seconds += acc[k][6];
      u.mean_return += acc[k][3] / static_cast<double>(count);
      u.mean_improvement += acc[k][4] / static_cast<double>(count);
      const double best = acc[k][5];
      if (!c.best.count(name) || best > c.best[name] + 1e-12) {
        c.best[name] = best;
        c.best_episode[name] = ep + 1;
        c.best_steps[name] = c.env_steps + steps;
      }
    }
    shard.global_size = steps;
    ppo::compute_advantages(data, cfg);  // whole episodes: no advantage crosses from one rank's episodes to another's
    auto st = ppo::update(net, opt, data, cfg, rng, &shard);
    if (!st) return st.error();
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
    u.seconds = seconds_since(t0);
    ppo::record(*st, u);
    if (log.is_open()) {
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
    if (progress && writer) progress(u);
    if (writer && (c.update % cfg.checkpoint_every == 0 || c.episodes >= o.episodes))
      if (auto s = checkpoint::save(o.out, net, &opt, meta()); !s.ok()) return s.error();
  }
  sum.updates = c.update;
  sum.episodes = c.episodes;
  sum.env_steps = c.env_steps;
  sum.env_seconds = c.env_seconds;
  sum.seconds = seconds_since(t0);
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
  info.target = meta->value("target", "");
  info.cost_model = meta->value("cost_model", "");
  info.cost_fingerprint = meta->value("cost_fingerprint", "");
  auto vocab = checkpoint::op_vocab(*meta, path);
  if (!vocab) return vocab.error();
  info.op_vocab = *vocab;
  info.seed = meta->value("seed", uint64_t{0});
  Counters c;
  counters_from(meta->value("counters", json::object()), c);
  info.updates = c.update;
  info.episodes = c.episodes;
  info.env_steps = c.env_steps;
  return info;
}

}  // namespace rlflow::rl
