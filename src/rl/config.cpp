#include "rlflow/rl/config.h"
#include "rlflow/util/file_io.h"
#include "yaml_fields.h"

namespace rlflow::rl {

namespace {

// One table drives parsing and printing, so the two cannot drift apart.
template <class F>
void visit_fields(PpoConfig& c, F&& f) {
  f("env.max_locations", c.env.max_locations);
  f("env.max_steps", c.env.max_steps);
  f("env.reward", c.env.reward);
  f("env.reward_scale", c.env.reward_scale);
  f("network.hidden", c.hidden);
  f("network.gnn_rounds", c.gnn_rounds);
  f("ppo.learning_rate", c.learning_rate);
  f("ppo.gamma", c.gamma);
  f("ppo.gae_lambda", c.gae_lambda);
  f("ppo.clip", c.clip);
  f("ppo.value_coef", c.value_coef);
  f("ppo.entropy_coef", c.entropy_coef);
  f("ppo.max_grad_norm", c.max_grad_norm);
  f("ppo.epochs", c.epochs);
  f("ppo.minibatch", c.minibatch);
  f("ppo.target_kl", c.target_kl);
  f("ppo.normalize_advantages", c.normalize_advantages);
  f("training.episodes_per_update", c.episodes_per_update);
  f("training.num_envs", c.num_envs);
  f("training.checkpoint_every", c.checkpoint_every);
  f("training.torch_threads", c.torch_threads);
  f("training.imitation_epochs", c.imitation_epochs);
  f("training.dagger_rounds", c.dagger_rounds);
}

}  // namespace

Expected<PpoConfig> parse_ppo_config(const std::string& text, const std::string& origin) {
  auto parsed = yaml_fields::parse<PpoConfig>(text, origin, [](PpoConfig& c, auto&& f) { visit_fields(c, f); });
  if (!parsed) return parsed.error();
  const PpoConfig& c = *parsed;
  if (c.env.reward != "dense" && c.env.reward != "final") return Error::bad_input(origin + ": env.reward must be dense or final");
  if (c.env.max_locations < 1 || c.env.max_steps < 1 || c.hidden < 4 || c.gnn_rounds < 1 || c.epochs < 1 ||
      c.minibatch < 1 || c.episodes_per_update < 1 || c.num_envs < 1 || c.checkpoint_every < 1 || c.torch_threads < 1 || c.imitation_epochs < 0 || c.dagger_rounds < 0)
    return Error::bad_input(origin + ": sizes and counts must be positive");
  if (c.gamma < 0 || c.gamma > 1 || c.gae_lambda < 0 || c.gae_lambda > 1 || c.clip <= 0 || c.learning_rate <= 0)
    return Error::bad_input(origin + ": gamma and gae_lambda must be in [0, 1], clip and learning_rate positive");
  return c;
}

Expected<PpoConfig> load_ppo_config(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  return parse_ppo_config(*text, path);
}

std::string to_yaml(const PpoConfig& in) {
  return yaml_fields::print(in, [](PpoConfig& c, auto&& f) { visit_fields(c, f); });
}

}  // namespace rlflow::rl
