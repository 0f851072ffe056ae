// `rlflow train-agent` (the GNN + PPO agent on one or more models) and `rlflow train-world-model`
// (real rollouts and the MDN-RNN world model fitted to them).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "progress.h"
#include "rlflow/cli/app.h"
#include "rlflow/cost/factory.h"
#include "rlflow/ir/composites.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rl/agent.h"
#include "rlflow/rl/world_model.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/util/file_io.h"

namespace rlflow::cli {

using json = nlohmann::json;

namespace {

// What every training command loads: models, the rule library and its selection, a cost model.
struct Loaded {
  std::vector<rl::TrainModel> models;
  rules::RuleLibrary lib;
  std::vector<const rules::Rule*> rules;
  std::unique_ptr<cost::CostModel> cost;
};

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

// Same file: by inode when both exist, else by normalised absolute path.
bool same_path(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  const auto ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  if (ec) return false;
  const auto cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return !ec && ca == cb;
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
Status check_outputs(const TrainCommonOptions& o, const std::vector<std::string>& read, const std::string& log_path,
                     const DataFile* data = nullptr) {
  std::vector<std::string> inputs;
  for (const auto& m : o.models)
    for (auto& f : onnxio::model_files(m)) inputs.push_back(std::move(f));
  if (!o.config.empty()) inputs.push_back(o.config);
  for (const auto& p : read)
    if (!p.empty()) inputs.push_back(p);
  inputs.push_back(o.rules_file.empty() ? rules::default_library_path() : o.rules_file);
  const std::string log_role = o.log.empty() ? "the log (default --log)" : "--log";
  RLFLOW_TRY_STATUS(check_output_path(o.out, inputs, "--out"));
  if (same_path(log_path, o.out)) return usage(log_role + " " + log_path + " is also --out; name different files");
  RLFLOW_TRY_STATUS(check_output_path(log_path, inputs, log_role));
  if (!data) return {};
  const std::string& data_path = data->path;
  const std::string data_role = data->flag.empty() ? "the rollout file (default --data)" : "--data";
  for (const auto& [other, role] : std::vector<std::pair<std::string, std::string>>{{o.out, "--out"}, {log_path, log_role}})
    if (same_path(data_path, other)) return usage(data_role + " " + data_path + " is also " + role + "; name different files");
  // An existing rollout file is read, and rewritten only when episodes are added: the folder need
  // not be writable then, but it must not be one of the inputs.
  if (!std::filesystem::exists(data_path)) return check_output_path(data_path, inputs, data_role);
  for (const auto& in : inputs)
    if (same_path(data_path, in)) return usage(data_role + " " + data_path + " is the input " + in + "; it would be overwritten");
  return {};
}

Expected<Loaded> load_inputs(const TrainCommonOptions& o) {
  Loaded l;
  exec::Executor ex;
  auto target = pipeline::find_target(o.target);
  if (!target) return target.error();
  for (const auto& path : o.models) {
    auto graph = load_model(path, o.input_shapes, ex);
    if (!graph) return graph.error();
    // The agent trains on the graphs `optimise` searches: at the same --opset (auto: the target's), with the
    // composite chains that opset fuses already fused.
    auto opset = pipeline::choose_output_opset(*graph, **target, o.opset);
    if (!opset) return opset.error();
    RLFLOW_TRY_STATUS(onnxio::set_output_opset(&*graph, opset->opset));
    l.models.push_back({path, ir::recognise_composites(*graph)});
  }
  const std::string rules_path = o.rules_file.empty() ? rules::default_library_path() : o.rules_file;
  auto lib = rules::load_library(rules_path);
  if (!lib) return lib.error();
  l.lib = std::move(*lib);
  l.rules = select_rules(l.lib, o.all_rules);
  if (l.rules.empty()) return Error::bad_input(rules_path + ": no verified rules to train with");
  cost::CostOptions co;
  // One meaning of --deterministic everywhere (cost::resolve_kind): a measuring backend is replaced by
  // the analytic model; recorded and ort are deterministic already and stay.
  co.kind = o.cost_model == "auto" ? target_cost_model(o.target) : o.cost_model;  // the cost optimise --target uses
  co.deterministic = o.deterministic;
  co.device_profile = o.device_profile;
  auto model = cost::make_cost_model(co);
  if (!model) return model.error();
  l.cost = std::move(*model);
  return l;
}

// --config for the agent commands. Without it, a model-free agent trains with the configuration that
// measures best (configs/agent/ppo-imitation.yaml: PPO alone learns to stop, see docs/rl.md); a dream
// controller with the built-in defaults (configs/agent/ppo.yaml), as the model-based studies did.
Expected<rl::PpoConfig> ppo_config(const TrainAgentOptions& o, bool model_free) {
  if (!o.common.config.empty()) return rl::load_ppo_config(o.common.config);
  if (model_free) return rl::load_ppo_config(find_shipped("configs/agent/ppo-imitation.yaml", "RLFLOW_AGENT_CONFIG"));
  return rl::PpoConfig{};
}

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Episodes per second in the current stage and the time left at that pace.
struct Pace {
  Clock::time_point start = Clock::now();
  int64_t base = -1;  // episodes done when the stage began (-1: not known yet)
  int64_t done = 0;
  Clock::time_point last = start;

  void begin() { *this = Pace{}; }
  // `episodes_done` counts the run's episodes, this one included (one episode finished just now).
  void episode(int64_t episodes_done) {
    if (base < 0) base = episodes_done - 1;
    done = episodes_done;
    last = Clock::now();
  }
  double rate() const {
    const double s = seconds_between(start, last);
    return base >= 0 && done > base && s > 0 ? static_cast<double>(done - base) / s : 0.0;
  }
  // ", 1.9 episodes/s, ~1m26s left", or "" before the first episode.
  std::string text(int64_t total) const {
    const double r = rate();
    if (r <= 0) return "";
    char buf[64];
    std::snprintf(buf, sizeof buf, r >= 10 ? ", %.0f episodes/s" : ", %.2g episodes/s", r);
    const double left = static_cast<double>(total - done) / r - seconds_between(last, Clock::now());
    return buf + (", ~" + format_duration(std::max(0.0, left)) + " left");
  }
};

// The returns of the last episodes: what "mean return" on the line averages.
class RecentReturns {
 public:
  void add(double r) {
    window_.push_back(r);
    if (window_.size() > kWindow) window_.pop_front();
  }
  // ", mean return 0.123 (last 20)", or "" before any.
  std::string text() const {
    if (window_.empty()) return "";
    double sum = 0;
    for (double r : window_) sum += r;
    char buf[64];
    std::snprintf(buf, sizeof buf, ", mean return %.3f (last %zu)", sum / static_cast<double>(window_.size()), window_.size());
    return buf;
  }

 private:
  static constexpr size_t kWindow = 20;
  std::deque<double> window_;
};

// train-agent's line: the stage (imitation's steps, then PPO's episodes).
struct AgentView {
  std::string phase = "preparing";
  Clock::time_point phase_start = Clock::now();
  int64_t total = 0;
  bool episodes_seen = false;
  Pace pace;
  RecentReturns returns;
  double best = 0;  // best improvement met so far, a fraction
  int64_t updates = 0;
};

std::string agent_line(const AgentView& v, double elapsed) {
  std::string text = "[train] ";
  if (!v.episodes_seen) {
    text += v.phase + "  " + format_duration(seconds_between(v.phase_start, Clock::now()));
    if (v.phase == "PPO") text += " (first episodes)";
    return text + "  total " + format_duration(elapsed);
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "episode %lld/%lld", static_cast<long long>(v.pace.done), static_cast<long long>(v.total));
  text += buf + v.returns.text();
  std::snprintf(buf, sizeof buf, ", best improvement %.2f%%", 100 * v.best);
  return text + buf + v.pace.text(v.total) + "  " + format_duration(elapsed);
}

// train-world-model's line: collecting real episodes, then fitting epochs.
struct WorldModelView {
  std::string phase = "preparing";
  int64_t total = 0;
  int epochs = 0;
  Pace pace;
  RecentReturns returns;
  bool epoch_seen = false;
  rl::WorldModelMetrics last;
  int first_epoch = -1;  // the epoch fitting began after (a resumed run starts later)
  Clock::time_point fit_start = Clock::now(), epoch_at = fit_start;
};

std::string world_model_line(const WorldModelView& v, double elapsed) {
  std::string text = "[world model] ";
  char buf[160];
  if (v.phase == "collecting real episodes" && v.pace.base >= 0) {
    std::snprintf(buf, sizeof buf, "real episode %lld/%lld", static_cast<long long>(v.pace.done), static_cast<long long>(v.total));
    return text + buf + v.returns.text() + v.pace.text(v.total) + "  " + format_duration(elapsed);
  }
  if (v.phase == "fitting" && v.epoch_seen) {
    std::snprintf(buf, sizeof buf, "epoch %d/%d, train loss %.4g, held-out NLL %.4g, mask accuracy %.4f", v.last.epoch, v.epochs,
                  v.last.train_loss, v.last.nll, v.last.mask_accuracy);
    text += buf;
    const int done = v.last.epoch - v.first_epoch;
    if (done > 0) {
      const double per_epoch = seconds_between(v.fit_start, v.epoch_at) / done;
      const double left = (v.epochs - v.last.epoch) * per_epoch - seconds_between(v.epoch_at, Clock::now());
      text += ", ~" + format_duration(std::max(0.0, left)) + " left";
    }
    return text + "  " + format_duration(elapsed);
  }
  if (v.phase == "fitting") text += "fitting, epoch 1/" + std::to_string(v.epochs);
  else text += v.phase;
  return text + "  " + format_duration(elapsed);
}

// The dream controller's line: one report per update (a batch of dream episodes).
struct DreamView {
  bool seen = false;
  rl::UpdateLog u;
  int64_t total = 0;
};

std::string dream_line(const DreamView& v, double elapsed) {
  if (!v.seen) return "[dream] loading the world model and the first batch  " + format_duration(elapsed);
  const auto& u = v.u;
  const double rate = u.seconds > 0 ? static_cast<double>(u.episodes) / u.seconds : 0.0;
  char buf[200];
  std::snprintf(buf, sizeof buf, "[dream] episode %lld/%lld, dream return %.3f, real improvement %.2f%%, %.0f episodes/s",
                static_cast<long long>(u.episodes), static_cast<long long>(v.total), u.mean_return, 100 * u.best_improvement, rate);
  std::string text = buf;
  if (rate > 0) text += ", ~" + format_duration(static_cast<double>(v.total - u.episodes) / rate) + " left";
  return text + "  " + format_duration(elapsed);
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

int train_in_dream(const GlobalOptions& g, const TrainAgentOptions& o, Loaded& in) {
  const TrainCommonOptions& c = o.common;
  rl::DreamTrainOptions d;
  auto cfg = ppo_config(o, /*model_free=*/false);
  if (!cfg) return report_error(g, cfg.error());
  d.config = *cfg;
  d.world_model = o.world_model;
  d.models = std::move(in.models);
  d.library = &in.lib;
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
  d.log_path = c.log.empty() ? c.out + ".jsonl" : c.log;
  DreamView view;
  view.total = c.episodes;
  ProgressLine line(progress_wanted(g.json), [&view](double elapsed) { return dream_line(view, elapsed); });
  rl::TrainProgress progress;
  if (line.enabled())
    progress = [&](const rl::UpdateLog& u) {
      line.update([&] {
        view.seen = true;
        view.u = u;
      });
    };
  auto sum = rl::train_dream_agent(d, progress);
  line.finish();
  if (!sum) return report_error(g, sum.error());
  if (g.json) {
    std::cout << json_text(json{{"ok", true}, {"agent", c.out}, {"log", d.log_path}, {"world_model", o.world_model}, {"temperature", o.temperature},
                      {"updates", sum->updates}, {"dream_episodes", sum->dream_episodes}, {"dream_steps", sum->dream_steps},
                      {"dream_step_ms", sum->dream_step_ms}, {"seconds", sum->seconds}, {"dream_score", sum->dream_score},
                      {"dream_score_raw", sum->dream_score_raw}, {"ensemble", sum->ensemble},
                      {"uncertainty_penalty", o.uncertainty_penalty}, {"disagreement", sum->disagreement},
                      {"real_score", sum->real_score}, {"real_improvement", sum->real_improvement},
                      {"real_eval_steps", sum->real_eval_steps}, {"dream_greedy_score", sum->dream_greedy_score},
                      {"dream_greedy_improvement", sum->dream_greedy_improvement}, {"dream_trace", traces(sum->dream_trace)},
                      {"real_trace", traces(sum->real_trace)}})
              << std::endl;
    return kOk;
  }
  std::printf("rlflow train-agent (dream, temperature %g) -> %s\n", o.temperature, c.out.c_str());
  std::printf("%lld updates, %lld dream episodes, %lld dream steps (%.4f ms each) in %.1fs; dream score %.3f\n",
              static_cast<long long>(sum->updates), static_cast<long long>(sum->dream_episodes), static_cast<long long>(sum->dream_steps),
              sum->dream_step_ms, sum->seconds, sum->dream_score);
  if (sum->ensemble > 1)
    std::printf("ensemble of %d world models: unpenalised dream score %.3f, mean reward disagreement %.4f, penalty %g\n", sum->ensemble,
                sum->dream_score_raw, sum->disagreement, o.uncertainty_penalty);
  for (const auto& [name, imp] : sum->real_improvement)
    std::printf("  %-40s greedy rollout: real improvement %6.2f%%, dream's prediction %6.2f%%\n", name.c_str(), 100 * imp,
                100 * sum->dream_greedy_improvement.at(name));
  std::printf("real env steps spent on evaluation: %lld\n", static_cast<long long>(sum->real_eval_steps));
  return kOk;
}

}  // namespace

int cmd_train_world_model(const GlobalOptions& g, const TrainWorldModelOptions& o) {
  const TrainCommonOptions& c = o.common;
  if (auto st = check_numbers(c); !st.ok()) return report_error(g, st.error());
  const DataFile data{o.data, o.data.empty() ? c.out + ".data" : o.data};
  if (auto st = check_outputs(c, {o.encoder_agent, o.policy}, c.log.empty() ? c.out + ".jsonl" : c.log, &data); !st.ok())
    return report_error(g, st.error());
  auto in = load_inputs(c);
  if (!in) return report_error(g, in.error());
  rl::WorldModelTrainOptions w;
  if (!c.config.empty()) {
    auto cfg = rl::load_world_model_config(c.config);
    if (!cfg) return report_error(g, cfg.error());
    w.config = *cfg;
  }
  w.models = std::move(in->models);
  w.rules = in->rules;
  w.cost = in->cost.get();
  w.encoder_agent = o.encoder_agent;
  w.policy = o.policy;
  if (!o.encoder_agent.empty()) {
    // The encoder agent fixes the rules (its xfers), whatever --rules/--all-rules say.
    auto info = rl::read_agent_info(o.encoder_agent);
    if (!info) return report_error(g, info.error());
    auto rules = rl::lookup_rules(in->lib, info->rules, o.encoder_agent);
    if (!rules) return report_error(g, rules.error());
    w.rules = std::move(*rules);
  }
  w.episodes = c.episodes;
  w.seed = c.seed;
  w.out = c.out;
  w.data_path = o.data;
  w.resume = c.resume;
  w.log_path = c.log.empty() ? c.out + ".jsonl" : c.log;
  WorldModelView view;
  view.total = w.episodes;
  view.epochs = w.config.epochs;
  ProgressLine line(progress_wanted(g.json), [&view](double elapsed) { return world_model_line(view, elapsed); });
  std::function<void(const rl::WorldModelMetrics&)> progress;
  if (line.enabled()) {
    w.on_phase = [&](const std::string& phase) {
      line.update([&] {
        view.phase = phase;
        view.pace.begin();
        view.fit_start = Clock::now();
      });
    };
    w.on_episode = [&](const rl::EpisodeLog& e) {
      line.update([&] {
        view.pace.episode(e.episodes_done);
        view.returns.add(e.ret);
      });
    };
    progress = [&](const rl::WorldModelMetrics& m) {
      line.update([&] {
        if (view.first_epoch < 0) view.first_epoch = m.epoch - 1;
        view.epoch_seen = true;
        view.last = m;
        view.epoch_at = Clock::now();
      });
    };
  }
  auto sum = rl::train_world_model(w, progress);
  line.finish();
  if (!sum) return report_error(g, sum.error());
  const auto& m = sum->last;
  if (g.json) {
    std::cout << json_text(json{{"ok", true}, {"world_model", c.out}, {"log", w.log_path}, {"episodes", sum->episodes}, {"collected", sum->collected},
                      {"real_steps", sum->real_steps}, {"data_steps", sum->data_steps}, {"real_step_ms", sum->real_step_ms}, {"collect_seconds", sum->collect_seconds},
                      {"train_seconds", sum->train_seconds}, {"epochs", m.epoch}, {"heldout_nll", m.nll}, {"reward_mse", m.reward_mse},
                      {"done_accuracy", m.done_accuracy}, {"mask_accuracy", m.mask_accuracy}, {"count_mae", m.count_mae},
                      {"encoder", o.encoder_agent.empty() ? "random" : o.encoder_agent}})
              << std::endl;
    return kOk;
  }
  std::printf("rlflow train-world-model -> %s  (encoder: %s)\n", c.out.c_str(), o.encoder_agent.empty() ? "random, frozen" : o.encoder_agent.c_str());
  std::printf("data: %lld episodes, %lld real steps (%lld new by the %s, %lld real steps, %.2f ms per step, %.1fs)\n",
              static_cast<long long>(sum->episodes), static_cast<long long>(sum->data_steps), static_cast<long long>(sum->collected),
              o.policy.empty() ? "random agent" : "policy", static_cast<long long>(sum->real_steps), sum->real_step_ms, sum->collect_seconds);
  std::printf("held-out after %d epochs (%.1fs): NLL %.3f, reward MSE %.4f, done accuracy %.4f, mask accuracy %.4f, count MAE %.3f\n", m.epoch,
              sum->train_seconds, m.nll, m.reward_mse, m.done_accuracy, m.mask_accuracy, m.count_mae);
  std::printf("log: %s\n", w.log_path.c_str());
  return kOk;
}

int cmd_train_agent(const GlobalOptions& g, const TrainAgentOptions& o) {
  const TrainCommonOptions& c = o.common;
  if (!o.world_model.empty() && o.world_size > 1)
    return report_error(g, Error::unsupported("--world-size > 1 trains the model-free agent; the dream controller "
                                              "(--world-model) trains in one process"));
  if (auto st = check_numbers(o); !st.ok()) return report_error(g, st.error());
  // Only rank 0 writes the checkpoint and the log.
  if (o.rank == 0)
    if (auto st = check_outputs(c, {o.world_model}, c.log.empty() ? c.out + ".jsonl" : c.log); !st.ok())
      return report_error(g, st.error());
  auto in = load_inputs(c);
  if (!in) return report_error(g, in.error());
  if (!o.world_model.empty()) return train_in_dream(g, o, *in);
  rl::TrainOptions t;
  auto cfg = ppo_config(o, /*model_free=*/true);
  if (!cfg) return report_error(g, cfg.error());
  t.config = *cfg;
  if (o.imitation_epochs >= 0) t.config.imitation_epochs = o.imitation_epochs;
  if (o.dagger_rounds >= 0) t.config.dagger_rounds = o.dagger_rounds;
  t.models = std::move(in->models);
  t.rules = in->rules;
  auto& model = in->cost;
  t.cost = model.get();
  t.target = c.target;
  t.cost_model = model->name();
  t.episodes = c.episodes;
  t.seed = c.seed;
  t.out = c.out;
  t.resume = c.resume;
  t.log_path = c.log.empty() ? c.out + ".jsonl" : c.log;
  t.world_size = o.world_size;
  t.rank = o.rank;
  t.master = o.master;
  spdlog::info("training on {} model(s), {} rules, cost model {}", t.models.size(), t.rules.size(), model->name());
  AgentView view;
  view.total = c.episodes;
  ProgressLine line(progress_wanted(g.json) && o.rank == 0, [&view](double elapsed) { return agent_line(view, elapsed); });
  rl::TrainProgress progress;
  if (line.enabled()) {
    t.on_phase = [&](const std::string& phase) {
      line.update([&] {
        view.phase = phase;
        view.phase_start = Clock::now();
        view.pace.begin();
      });
    };
    t.on_episode = [&](const rl::EpisodeLog& e) {
      line.update([&] {
        view.episodes_seen = true;
        view.pace.episode(e.episodes_done);
        view.returns.add(e.ret);
        view.best = std::max(view.best, e.best_improvement);
      });
    };
    // After each update: the episode count over every rank, and the best improvement so far
    // (a resumed run's included).
    progress = [&](const rl::UpdateLog& u) {
      line.update([&] {
        view.updates = u.update;
        view.best = std::max(view.best, u.best_improvement);
        if (view.episodes_seen && u.episodes > view.pace.done) {  // data-parallel: the other ranks' episodes
          view.pace.done = u.episodes;
          view.pace.last = Clock::now();
        }
      });
    };
  }
  auto sum = rl::train_agent(t, progress);
  line.finish();
  if (!sum) return report_error(g, sum.error());
  const double step_ms = sum->env_steps ? 1e3 * sum->env_seconds / static_cast<double>(sum->env_steps) : 0.0;
  if (g.json) {
    std::cout << json_text(json{{"ok", true},
                      {"agent", c.out},
                      {"log", t.log_path},
                      {"cost_model", model->name()},
                      {"rules", t.rules.size()},
                      {"world_size", sum->world_size},
                      {"rank", t.rank},
                      {"updates", sum->updates},
                      {"episodes", sum->episodes},
                      {"env_steps", sum->env_steps},
                      {"seconds", sum->seconds},
                      {"real_step_ms", step_ms},
                      {"best_improvement", sum->best_improvement},
                      {"episodes_to_best", sum->episodes_to_best},
                      {"env_steps_to_best", sum->env_steps_to_best},
                      {"imitation", sum->imitation_epochs == 0 ? json(nullptr)
                                                               : json{{"epochs", sum->imitation_epochs},
                                                                      {"accuracy", sum->imitation_accuracy},
                                                                      {"first_loss", sum->imitation_first_loss},
                                                                      {"last_loss", sum->imitation_last_loss},
                                                                      {"env_steps", sum->imitation_env_steps},
                                                                      {"states", sum->imitation_states},
                                                                      {"dagger_rounds", t.config.dagger_rounds},
                                                                      {"greedy_improvement", sum->greedy_improvement}}}})
              << std::endl;
    return kOk;
  }
  std::printf("rlflow train-agent -> %s  (%zu rules, cost model %s%s)\n", c.out.c_str(), t.rules.size(), model->name().c_str(),
              sum->world_size > 1 ? (", rank " + std::to_string(t.rank) + " of " + std::to_string(sum->world_size)).c_str() : "");
  std::printf("%lld updates, %lld episodes, %lld env steps in %.1fs (real env step %.2f ms)\n", static_cast<long long>(sum->updates),
              static_cast<long long>(sum->episodes), static_cast<long long>(sum->env_steps), sum->seconds, step_ms);
  for (const auto& [name, best] : sum->best_improvement)
    std::printf("  %-40s best improvement %6.2f%% (first at episode %lld, env step %lld)\n", name.c_str(), 100 * best,
                static_cast<long long>(sum->episodes_to_best.at(name)), static_cast<long long>(sum->env_steps_to_best.at(name)));
  if (sum->imitation_epochs > 0)
    std::printf("imitation of greedy: %d epochs, loss %.3f -> %.3f, argmax reproduces %.1f%% of %lld demonstration steps\n",
                sum->imitation_epochs, sum->imitation_first_loss, sum->imitation_last_loss, 100 * sum->imitation_accuracy,
                static_cast<long long>(sum->imitation_env_steps));
  std::printf("log: %s\n", t.log_path.c_str());
  return kOk;
}

}  // namespace rlflow::cli
