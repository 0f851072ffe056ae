// The trainers' work inside the RL module (include/rlflow/pipeline/rl_module.h): the models, rules
// and cost set up as `optimise` does, then training (rl/agent.h, rl/world_model.h), into the typed
// reports of include/rlflow/pipeline/train.h. pipeline::train_agent and train_world_model checked
// the options and every path before they came here.
#include <spdlog/spdlog.h>

#include "rlflow/pipeline/setup.h"
#include "rlflow/rl/module.h"
#include "rlflow/util/file_io.h"

namespace rlflow::rl {

using pipeline::Setup;
using pipeline::SetupOptions;
using pipeline::TrainAgentHooks;
using pipeline::TrainAgentOptions;
using pipeline::TrainAgentReport;
using pipeline::TrainCommonOptions;
using pipeline::TrainWorldModelHooks;
using pipeline::TrainWorldModelOptions;
using pipeline::TrainWorldModelReport;

namespace {

// The trainers' setup: the models as `optimise` searches them (at its --opset, composites fused), the
// selected rules, and the target's cost (the agent trains on the cost it is judged by).
Expected<Setup> load_inputs(const TrainCommonOptions& o) {
  SetupOptions so;
  so.models = o.models;
  so.input_shapes = o.input_shapes;
  so.search_opset = o.opset;
  so.load_rules = true;
  so.rules_file = o.rules_file;
  so.all_rules = o.all_rules;
  so.rules_needed_for = "train with";
  so.build_cost = true;
  so.target = o.target;
  so.cost = o.cost;
  return pipeline::setup(so);
}

std::vector<TrainModel> train_models(Setup& in) {
  std::vector<TrainModel> out;
  for (auto& m : in.models) out.push_back({m.path, std::move(m.graph)});
  return out;
}

// --config for the agent commands. Without it, a model-free agent trains with the configuration that
// measures best (configs/agent/ppo-imitation.yaml: PPO alone learns to stop, see docs/rl.md); a dream
// controller with the built-in defaults (configs/agent/ppo.yaml), as the model-based studies did.
Expected<PpoConfig> ppo_config(const TrainAgentOptions& o, bool model_free) {
  if (!o.common.config.empty()) return load_ppo_config(o.common.config);
  if (model_free) return load_ppo_config(find_shipped("configs/agent/ppo-imitation.yaml", "RLFLOW_AGENT_CONFIG"));
  return PpoConfig{};
}

Expected<TrainAgentReport> train_in_dream(const TrainAgentOptions& o, Setup& in, const TrainAgentHooks& hooks) {
  const TrainCommonOptions& c = o.common;
  DreamTrainOptions d;
  auto cfg = ppo_config(o, /*model_free=*/false);
  if (!cfg) return cfg.error();
  d.config = *cfg;
  d.world_model = o.world_model;
  d.models = train_models(in);
  d.library = &in.library;
  d.cost = in.cost.get();
  d.target = c.target;
  d.cost_model = in.cost->name();
  d.episodes = c.episodes;
  d.temperature = o.temperature;
  d.uncertainty_penalty = o.uncertainty_penalty;
  d.batch = o.dream_batch;
  d.eval_every = o.eval_every;
  d.seed = c.seed;
  d.out = c.out;
  d.log_path = c.log_path();
  auto sum = train_dream_agent(d, hooks.update);
  if (!sum) return sum.error();
  TrainAgentReport r;
  r.agent = c.out;
  r.log = d.log_path;
  r.cost_model = d.cost_model;
  r.world_model = o.world_model;
  r.temperature = o.temperature;
  r.uncertainty_penalty = o.uncertainty_penalty;
  r.dream = std::move(*sum);
  return r;
}

}  // namespace

Expected<TrainAgentReport> run_train_agent(const TrainAgentOptions& o, const TrainAgentHooks& hooks) {
  const TrainCommonOptions& c = o.common;
  auto in = load_inputs(c);
  if (!in) return in.error();
  if (!o.world_model.empty()) return train_in_dream(o, *in, hooks);
  TrainOptions t;
  auto cfg = ppo_config(o, /*model_free=*/true);
  if (!cfg) return cfg.error();
  t.config = *cfg;
  if (o.imitation_epochs >= 0) t.config.imitation_epochs = o.imitation_epochs;
  if (o.dagger_rounds >= 0) t.config.dagger_rounds = o.dagger_rounds;
  t.models = train_models(*in);
  t.rules = in->rules;
  t.cost = in->cost.get();
  t.target = c.target;
  t.cost_model = in->cost->name();
  t.episodes = c.episodes;
  t.seed = c.seed;
  t.out = c.out;
  t.resume = c.resume;
  t.log_path = c.log_path();
  t.world_size = o.world_size;
  t.rank = o.rank;
  t.master = o.master;
  t.on_phase = hooks.phase;
  t.on_episode = hooks.episode;
  spdlog::info("training on {} model(s), {} rules, cost model {}", t.models.size(), t.rules.size(), t.cost_model);
  auto sum = train_agent(t, hooks.update);
  if (!sum) return sum.error();
  TrainAgentReport r;
  r.agent = c.out;
  r.log = t.log_path;
  r.cost_model = t.cost_model;
  r.rules = t.rules.size();
  r.rank = t.rank;
  r.dagger_rounds = t.config.dagger_rounds;
  r.trained = std::move(*sum);
  return r;
}

Expected<TrainWorldModelReport> run_train_world_model(const TrainWorldModelOptions& o, const TrainWorldModelHooks& hooks) {
  const TrainCommonOptions& c = o.common;
  auto in = load_inputs(c);
  if (!in) return in.error();
  WorldModelTrainOptions w;
  if (!c.config.empty()) {
    auto cfg = load_world_model_config(c.config);
    if (!cfg) return cfg.error();
    w.config = *cfg;
  }
  w.models = train_models(*in);
  w.rules = in->rules;
  w.cost = in->cost.get();
  w.encoder_agent = o.encoder_agent;
  w.policy = o.policy;
  if (!o.encoder_agent.empty()) {
    // The encoder agent fixes the rules (its xfers), whatever --rules/--all-rules say.
    auto info = read_agent_info(o.encoder_agent);
    if (!info) return info.error();
    auto rules = lookup_rules(in->library, info->rules, o.encoder_agent);
    if (!rules) return rules.error();
    w.rules = std::move(*rules);
  }
  w.episodes = c.episodes;
  w.seed = c.seed;
  w.out = c.out;
  w.data_path = o.data;
  w.resume = c.resume;
  w.log_path = c.log_path();
  w.on_phase = hooks.phase;
  w.on_episode = hooks.episode;
  if (hooks.start) hooks.start(w);
  auto sum = train_world_model(w, hooks.epoch);
  if (!sum) return sum.error();
  TrainWorldModelReport r;
  r.world_model = c.out;
  r.log = w.log_path;
  r.encoder_agent = o.encoder_agent;
  r.by_policy = !o.policy.empty();
  r.summary = std::move(*sum);
  return r;
}

}  // namespace rlflow::rl
