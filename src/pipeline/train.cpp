// `train-agent` (the GNN + PPO agent on one or more models, or a controller in a world model's dream)
// and `train-world-model` (real rollouts and the MDN-RNN world model fitted to them) as library calls
// (include/rlflow/pipeline/train.h): the checks of every number and path, before any work, and the
// reports. The training itself is the RL module's (src/rl/train_commands.cpp, loaded on demand).
#include "rlflow/pipeline/train.h"

#include <cmath>
#include <filesystem>

#include "rlflow/onnx/model_io.h"
#include "rlflow/pipeline/rl_module.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/util/file_io.h"

namespace rlflow::pipeline {

using json = nlohmann::json;

namespace {

Error usage(const std::string& message) { return Error{ErrorCode::kUsage, message}; }

// Numbers the parser accepts but training cannot use: refused before anything is loaded.
Status check_numbers(const TrainCommonOptions& o) {
  if (o.models.empty()) return usage("at least one --model is needed");
  if (o.episodes < 1) return usage("--episodes must be >= 1");
  return {};
}

Status check_numbers(const TrainAgentOptions& o) {
  RLFLOW_TRY_STATUS(check_numbers(o.common));
  if (o.dream_batch < 1) return usage("--dream-batch must be >= 1");
  if (o.eval_every < 0) return usage("--eval-every must be >= 0 (0: evaluate only at the end)");
  if (!std::isfinite(o.temperature) || o.temperature <= 0) return usage("--temperature must be a finite number > 0");
  if (!std::isfinite(o.uncertainty_penalty) || o.uncertainty_penalty < 0)
    return usage("--uncertainty-penalty must be a finite number >= 0");
  if (o.imitation_epochs < -1) return usage("--imitation-epochs must be >= 0 (or -1: the config's value)");
  if (o.dagger_rounds < -1) return usage("--dagger-rounds must be >= 0 (or -1: the config's value)");
  return {};
}

// What a training command writes, checked before any work: each output against every file the
// command reads and against the other outputs, so that no input is overwritten and no output
// clobbers another. --out is read as well by --resume (the checkpoint is continued and rewritten
// in place), and the world model's data file is read and topped up by design: neither is a clash.
// `read` names the files the command reads besides the models, the config and the rules; `data`,
// when given, is the rollout file (its flag value, which may be empty, and the path it resolves to).
struct DataFile {
  const std::string& flag;
  std::string path;
};
Status check_outputs(const TrainCommonOptions& o, const std::vector<std::string>& read, const DataFile* data = nullptr) {
  const std::string log_path = o.log_path();
  std::vector<std::string> inputs;
  for (const auto& m : o.models)
    for (auto& f : onnxio::model_files(m)) inputs.push_back(std::move(f));
  if (!o.config.empty()) inputs.push_back(o.config);
  for (const auto& p : read)
    if (!p.empty()) inputs.push_back(p);
  inputs.push_back(o.rules_file.empty() ? rules::default_library_path() : o.rules_file);
  const std::string log_role = o.log.empty() ? "the log (default --log)" : "--log";
  RLFLOW_TRY_STATUS(check_output_path(o.out, inputs, "--out"));
  if (same_file(log_path, o.out)) return usage(log_role + " " + log_path + " is also --out; name different files");
  RLFLOW_TRY_STATUS(check_output_path(log_path, inputs, log_role));
  if (!data) return {};
  const std::string& data_path = data->path;
  const std::string data_role = data->flag.empty() ? "the rollout file (default --data)" : "--data";
  for (const auto& [other, role] : std::vector<std::pair<std::string, std::string>>{{o.out, "--out"}, {log_path, log_role}})
    if (same_file(data_path, other)) return usage(data_role + " " + data_path + " is also " + role + "; name different files");
  // An existing rollout file is read, and rewritten only when episodes are added: the folder need
  // not be writable then, but it must not be one of the inputs.
  if (!std::filesystem::exists(data_path)) return check_output_path(data_path, inputs, data_role);
  for (const auto& in : inputs)
    if (same_file(data_path, in)) return usage(data_role + " " + data_path + " is the input " + in + "; it would be overwritten");
  return {};
}

// Per model, the greedy rollout's steps as [rule, location, reward] ("" rule: NO-OP).
json traces(const std::map<std::string, std::vector<rl::TraceStep>>& t) {
  json out = json::object();
  for (const auto& [name, steps] : t) {
    json a = json::array();
    for (const auto& s : steps) a.push_back(json::array({s.rule, s.location, s.reward}));
    out[name] = a;
  }
  return out;
}

}  // namespace

Expected<TrainAgentReport> train_agent(const TrainAgentOptions& o, const TrainAgentHooks& hooks) {
  if (!o.world_model.empty() && o.world_size > 1)
    return Error::unsupported("--world-size > 1 trains the model-free agent; the dream controller (--world-model) trains in one process");
  RLFLOW_TRY_STATUS(check_numbers(o));
  // Only rank 0 writes the checkpoint and the log.
  if (o.rank == 0) RLFLOW_TRY_STATUS(check_outputs(o.common, {o.world_model}));
  auto module = rl_module("train-agent");
  if (!module) return module.error();
  return (*module)->train_agent(o, hooks);
}

json TrainAgentReport::to_json() const {
  if (dream) {
    const auto& s = *dream;
    return json{{"ok", true},
                {"agent", agent},
                {"log", log},
                {"world_model", world_model},
                {"temperature", temperature},
                {"updates", s.updates},
                {"dream_episodes", s.dream_episodes},
                {"dream_steps", s.dream_steps},
                {"dream_step_ms", s.dream_step_ms},
                {"seconds", s.seconds},
                {"dream_score", s.dream_score},
                {"dream_score_raw", s.dream_score_raw},
                {"ensemble", s.ensemble},
                {"uncertainty_penalty", uncertainty_penalty},
                {"disagreement", s.disagreement},
                {"real_score", s.real_score},
                {"real_improvement", s.real_improvement},
                {"real_eval_steps", s.real_eval_steps},
                {"dream_greedy_score", s.dream_greedy_score},
                {"dream_greedy_improvement", s.dream_greedy_improvement},
                {"dream_trace", traces(s.dream_trace)},
                {"real_trace", traces(s.real_trace)}};
  }
  if (!trained) return json{{"ok", true}, {"agent", agent}, {"log", log}};
  const auto& s = *trained;
  const double step_ms = s.env_steps ? 1e3 * s.env_seconds / static_cast<double>(s.env_steps) : 0.0;
  return json{{"ok", true},
              {"agent", agent},
              {"log", log},
              {"cost_model", cost_model},
              {"rules", rules},
              {"world_size", s.world_size},
              {"rank", rank},
              {"updates", s.updates},
              {"episodes", s.episodes},
              {"env_steps", s.env_steps},
              {"seconds", s.seconds},
              {"real_step_ms", step_ms},
              {"best_improvement", s.best_improvement},
              {"episodes_to_best", s.episodes_to_best},
              {"env_steps_to_best", s.env_steps_to_best},
              {"imitation", s.imitation_epochs == 0 ? json(nullptr)
                                                    : json{{"epochs", s.imitation_epochs},
                                                           {"accuracy", s.imitation_accuracy},
                                                           {"first_loss", s.imitation_first_loss},
                                                           {"last_loss", s.imitation_last_loss},
                                                           {"env_steps", s.imitation_env_steps},
                                                           {"states", s.imitation_states},
                                                           {"dagger_rounds", dagger_rounds},
                                                           {"greedy_improvement", s.greedy_improvement}}}};
}

void TrainAgentReport::print(std::FILE* out) const {
  if (dream) {
    const auto& s = *dream;
    std::fprintf(out, "rlflow train-agent (dream, temperature %g) -> %s\n", temperature, agent.c_str());
    std::fprintf(out, "%lld updates, %lld dream episodes, %lld dream steps (%.4f ms each) in %.1fs; dream score %.3f\n",
                 static_cast<long long>(s.updates), static_cast<long long>(s.dream_episodes), static_cast<long long>(s.dream_steps),
                 s.dream_step_ms, s.seconds, s.dream_score);
    if (s.ensemble > 1)
      std::fprintf(out, "ensemble of %d world models: unpenalised dream score %.3f, mean reward disagreement %.4f, penalty %g\n", s.ensemble,
                   s.dream_score_raw, s.disagreement, uncertainty_penalty);
    for (const auto& [name, imp] : s.real_improvement)
      std::fprintf(out, "  %-40s greedy rollout: real improvement %6.2f%%, dream's prediction %6.2f%%\n", name.c_str(), 100 * imp,
                   100 * s.dream_greedy_improvement.at(name));
    std::fprintf(out, "real env steps spent on evaluation: %lld\n", static_cast<long long>(s.real_eval_steps));
    return;
  }
  if (!trained) return;
  const auto& s = *trained;
  const double step_ms = s.env_steps ? 1e3 * s.env_seconds / static_cast<double>(s.env_steps) : 0.0;
  const std::string ranks = s.world_size > 1 ? ", rank " + std::to_string(rank) + " of " + std::to_string(s.world_size) : "";
  std::fprintf(out, "rlflow train-agent -> %s  (%zu rules, cost model %s%s)\n", agent.c_str(), rules, cost_model.c_str(), ranks.c_str());
  std::fprintf(out, "%lld updates, %lld episodes, %lld env steps in %.1fs (real env step %.2f ms)\n", static_cast<long long>(s.updates),
               static_cast<long long>(s.episodes), static_cast<long long>(s.env_steps), s.seconds, step_ms);
  for (const auto& [name, best] : s.best_improvement)
    std::fprintf(out, "  %-40s best improvement %6.2f%% (first at episode %lld, env step %lld)\n", name.c_str(), 100 * best,
                 static_cast<long long>(s.episodes_to_best.at(name)), static_cast<long long>(s.env_steps_to_best.at(name)));
  if (s.imitation_epochs > 0)
    std::fprintf(out, "imitation of greedy: %d epochs, loss %.3f -> %.3f, argmax reproduces %.1f%% of %lld demonstration steps\n",
                 s.imitation_epochs, s.imitation_first_loss, s.imitation_last_loss, 100 * s.imitation_accuracy,
                 static_cast<long long>(s.imitation_env_steps));
  std::fprintf(out, "log: %s\n", log.c_str());
}

Expected<TrainWorldModelReport> train_world_model(const TrainWorldModelOptions& o, const TrainWorldModelHooks& hooks) {
  const TrainCommonOptions& c = o.common;
  RLFLOW_TRY_STATUS(check_numbers(c));
  const DataFile data{o.data, o.data.empty() ? c.out + ".data" : o.data};
  RLFLOW_TRY_STATUS(check_outputs(c, {o.encoder_agent, o.policy}, &data));
  auto module = rl_module("train-world-model");
  if (!module) return module.error();
  return (*module)->train_world_model(o, hooks);
}

json TrainWorldModelReport::to_json() const {
  const auto& s = summary;
  const auto& m = s.last;
  return json{{"ok", true},
              {"world_model", world_model},
              {"log", log},
              {"episodes", s.episodes},
              {"collected", s.collected},
              {"real_steps", s.real_steps},
              {"data_steps", s.data_steps},
              {"real_step_ms", s.real_step_ms},
              {"collect_seconds", s.collect_seconds},
              {"train_seconds", s.train_seconds},
              {"epochs", m.epoch},
              {"heldout_nll", m.nll},
              {"reward_mse", m.reward_mse},
              {"done_accuracy", m.done_accuracy},
              {"mask_accuracy", m.mask_accuracy},
              {"count_mae", m.count_mae},
              {"encoder", encoder_agent.empty() ? "random" : encoder_agent}};
}

void TrainWorldModelReport::print(std::FILE* out) const {
  const auto& s = summary;
  const auto& m = s.last;
  std::fprintf(out, "rlflow train-world-model -> %s  (encoder: %s)\n", world_model.c_str(),
               encoder_agent.empty() ? "random, frozen" : encoder_agent.c_str());
  std::fprintf(out, "data: %lld episodes, %lld real steps (%lld new by the %s, %lld real steps, %.2f ms per step, %.1fs)\n",
               static_cast<long long>(s.episodes), static_cast<long long>(s.data_steps), static_cast<long long>(s.collected),
               by_policy ? "policy" : "random agent", static_cast<long long>(s.real_steps), s.real_step_ms, s.collect_seconds);
  std::fprintf(out, "held-out after %d epochs (%.1fs): NLL %.3f, reward MSE %.4f, done accuracy %.4f, mask accuracy %.4f, count MAE %.3f\n",
               m.epoch, s.train_seconds, m.nll, m.reward_mse, m.done_accuracy, m.mask_accuracy, m.count_mae);
  std::fprintf(out, "log: %s\n", log.c_str());
}

}  // namespace rlflow::pipeline
