// `rlflow train-agent` (the GNN + PPO agent on one or more models) and `rlflow train-world-model`
// (real rollouts and the MDN-RNN world model fitted to them): their flags, bound to the library's
// options (include/rlflow/pipeline/train.h), a progress line on a terminal, the report on stdout,
// and the error as an exit code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <iostream>
#include <memory>

#include "commands.h"
#include "flags.h"
#include "progress.h"
#include "rlflow/cli/app.h"
#include "rlflow/cost/factory.h"

namespace rlflow::cli {

namespace {

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

// train-agent's line: the model-free agent's stages and episodes, or the dream controller's
// updates (--world-model). Only rank 0 of a data-parallel run draws it. Its hooks feed the line and
// must not outlive it.
class TrainAgentProgress {
 public:
  TrainAgentProgress(const pipeline::TrainAgentOptions& o, bool wanted)
      : dream_(!o.world_model.empty()),
        line_(wanted && (dream_ || o.rank == 0),
              [this](double elapsed) { return dream_ ? dream_line(dream_view_, elapsed) : agent_line(agent_view_, elapsed); }) {
    line_.update([&] { agent_view_.total = dream_view_.total = o.common.episodes; });
  }
  pipeline::TrainAgentHooks hooks();  // empty when the line is not drawn
  void finish() { line_.finish(); }

 private:
  const bool dream_;
  AgentView agent_view_;
  DreamView dream_view_;
  ProgressLine line_;  // after the views: it draws from them until it is gone
};

pipeline::TrainAgentHooks TrainAgentProgress::hooks() {
  pipeline::TrainAgentHooks h;
  if (!line_.enabled()) return h;
  if (dream_) {
    h.update = [this](const rl::UpdateLog& u) {
      line_.update([&] {
        dream_view_.seen = true;
        dream_view_.u = u;
      });
    };
    return h;
  }
  AgentView& view = agent_view_;
  h.phase = [this, &view](const std::string& phase) {
    line_.update([&] {
      view.phase = phase;
      view.phase_start = Clock::now();
      view.pace.begin();
    });
  };
  h.episode = [this, &view](const rl::EpisodeLog& e) {
    line_.update([&] {
      view.episodes_seen = true;
      view.pace.episode(e.episodes_done);
      view.returns.add(e.ret);
      view.best = std::max(view.best, e.best_improvement);
    });
  };
  // After each update: the episode count over every rank, and the best improvement so far (a
  // resumed run's included).
  h.update = [this, &view](const rl::UpdateLog& u) {
    line_.update([&] {
      view.updates = u.update;
      view.best = std::max(view.best, u.best_improvement);
      if (view.episodes_seen && u.episodes > view.pace.done) {  // data-parallel: the other ranks' episodes
        view.pace.done = u.episodes;
        view.pace.last = Clock::now();
      }
    });
  };
  return h;
}

// train-world-model's line: collecting real episodes, then fitting epochs.
class TrainWorldModelProgress {
 public:
  TrainWorldModelProgress(const pipeline::TrainWorldModelOptions& o, bool wanted)
      : line_(wanted, [this](double elapsed) { return world_model_line(view_, elapsed); }) {
    line_.update([&] { view_.total = o.common.episodes; });
  }
  pipeline::TrainWorldModelHooks hooks();  // empty when the line is not drawn
  void finish() { line_.finish(); }

 private:
  WorldModelView view_;
  ProgressLine line_;  // after the view: it draws from it until it is gone
};

pipeline::TrainWorldModelHooks TrainWorldModelProgress::hooks() {
  pipeline::TrainWorldModelHooks h;
  if (!line_.enabled()) return h;
  h.start = [this](const rl::WorldModelTrainOptions& w) { line_.update([&] { view_.epochs = w.config.epochs; }); };
  h.phase = [this](const std::string& phase) {
    line_.update([&] {
      view_.phase = phase;
      view_.pace.begin();
      view_.fit_start = Clock::now();
    });
  };
  h.episode = [this](const rl::EpisodeLog& e) {
    line_.update([&] {
      view_.pace.episode(e.episodes_done);
      view_.returns.add(e.ret);
    });
  };
  h.epoch = [this](const rl::WorldModelMetrics& m) {
    line_.update([&] {
      if (view_.first_epoch < 0) view_.first_epoch = m.epoch - 1;
      view_.epoch_seen = true;
      view_.last = m;
      view_.epoch_at = Clock::now();
    });
  };
  return h;
}

// The flags both trainers share, with one meaning: the rules and the cost the agent is judged by.
void add_train_common_flags(CLI::App* c, pipeline::TrainCommonOptions& t, const std::string& uses) {
  c->add_option("--rules", t.rules_file, "Rule file (default: the shipped configs/rules/default.json)");
  c->add_flag("--all-rules", t.all_rules, "Every verified rule as an xfer (numerically verified ones included), not just the proved default set");
  c->add_option("--target", t.target, "Where the optimised models will run; " + uses + " the cost optimise --target uses: ort, h100 or gpu")
      ->check(CLI::IsMember(pipeline::target_names()))->capture_default_str();
  c->add_option("--cost-model", t.cost.kind, cost::cost_model_help("the --target's: ort -> ort, h100 -> recorded, gpu -> cudnn"))
      ->check(CLI::IsMember(cost::cost_model_kinds()))->capture_default_str();
  c->add_flag("--deterministic", t.cost.deterministic,
              "Exactly reproducible: a measured cost model (cpu, cudnn, auto, ort-measured) gives way to the analytic one (recorded "
              "and ort are deterministic already)");
  c->add_option("--device-profile", t.cost.device_profile, "Analytic device profile (configs/devices/NAME.yaml)");
  c->add_option("--input-shape", t.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  add_opset_option(c, t.opset,
                   "Train on the graphs `optimise --opset` searches (auto, keep or N; default auto: the target's opset): each model as "
                   "written at that opset, with the composite chains it fuses (LayerNorm 17, Gelu 20, RMSNorm, rotary 23) fused");
}

}  // namespace

int cmd_train_agent(const GlobalOptions& g, const pipeline::TrainAgentOptions& o) {
  TrainAgentProgress progress(o, progress_wanted(g.json));
  auto report = pipeline::train_agent(o, progress.hooks());
  progress.finish();
  return print_report(g, report);
}

int cmd_train_world_model(const GlobalOptions& g, const pipeline::TrainWorldModelOptions& o) {
  TrainWorldModelProgress progress(o, progress_wanted(g.json));
  auto report = pipeline::train_world_model(o, progress.hooks());
  progress.finish();
  return print_report(g, report);
}

void declare_train_agent(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<pipeline::TrainAgentOptions>();
  auto& train = *o;
  auto* c_train = app.add_subcommand("train-agent", "Train the GNN + PPO agent on models (one agent for all of them)");
  c_train->add_option("--model", train.common.models, "ONNX model to train on (repeatable)")->required();
  c_train->add_option("--config", train.common.config,
                      "Agent hyperparameters (YAML; default: configs/agent/ppo-imitation.yaml, behaviour cloning on greedy's "
                      "trajectories and one DAgger round before PPO; with --world-model, the values in configs/agent/ppo.yaml)");
  c_train->add_option("--out", train.common.out, "Agent checkpoint to write (and to --resume from)")->required();
  c_train->add_option("--log", train.common.log, "JSONL training log, one line per update (default: OUT.jsonl)");
  c_train->add_option("--episodes", train.common.episodes, "Episodes in all, counting those before a --resume")->check(kAtLeastOne)->capture_default_str();
  c_train->add_option("--seed", train.common.seed, "Seed of the network, sampling and minibatches")->check(kNonNegative)->capture_default_str();
  c_train->add_option("--imitation-epochs", train.imitation_epochs,
                      "Behaviour-cloning epochs on greedy search's trajectories before PPO (overrides training.imitation_epochs; 0: none)");
  c_train->add_option("--dagger-rounds", train.dagger_rounds,
                      "DAgger rounds after cloning: the policy's own states labelled by greedy (overrides training.dagger_rounds)");
  c_train->add_option("--world-size", train.world_size,
                      "Data-parallel training over this many processes (libtorch c10d, gloo); start one per rank, or use "
                      "scripts/train/train_ranks")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  c_train->add_option("--rank", train.rank, "This process's rank, 0..world-size-1; rank 0 writes --out and --log")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  c_train->add_option("--master", train.master, "ADDR:PORT where rank 0 serves the rendezvous store")->capture_default_str();
  c_train->add_flag("--resume", train.common.resume, "Continue from the checkpoint at --out");
  add_train_common_flags(c_train, train.common, "the agent trains on");
  c_train->add_option("--world-model", train.world_model, "Train the controller inside this world model's dream (train-world-model --out)");
  c_train->add_option("--temperature", train.temperature, "Dream temperature: mixture logits / T, Gaussian noise x sqrt(T)")->capture_default_str();
  c_train->add_option("--uncertainty-penalty", train.uncertainty_penalty,
                      "With an ensemble --world-model: dream reward = members' mean - this x their std (MOPO); 0: none")
      ->capture_default_str();
  c_train->add_option("--dream-batch", train.dream_batch, "Dream episodes stepped together (and per PPO update) with --world-model")
      ->capture_default_str();
  c_train->add_option("--eval-every", train.eval_every,
                      "With --world-model: PPO updates between greedy rollouts in the real environment (0: only at the end)")
      ->capture_default_str();
  c_train->add_flag("--json", g.json, "Print one JSON document");
  out.push_back({c_train, [&g, o] { return cmd_train_agent(g, *o); }});
}

void declare_train_world_model(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<pipeline::TrainWorldModelOptions>();
  auto& wmo = *o;
  auto* c_wm = app.add_subcommand("train-world-model", "Collect real rollouts and fit the MDN-RNN world model");
  c_wm->add_option("--model", wmo.common.models, "ONNX model to collect rollouts on (repeatable)")->required();
  c_wm->add_option("--out", wmo.common.out, "World model checkpoint to write (and to --resume from)")->required();
  c_wm->add_option("--episodes", wmo.common.episodes, "Real episodes in the data set (reused from --data, topped up)")->check(kAtLeastOne)->capture_default_str();
  c_wm->add_option("--config", wmo.common.config, "World-model settings (YAML; default: the values in configs/world_model.yaml)");
  c_wm->add_option("--data", wmo.data, "Rollout file, reused by later runs (default: OUT.data)");
  c_wm->add_option("--agent", wmo.encoder_agent, "Take the (frozen) graph encoder and the xfers from this model-free agent");
  c_wm->add_option("--policy", wmo.policy,
                   "Collect the new episodes with this dream controller (train-agent --world-model --out) instead of the random agent");
  c_wm->add_option("--log", wmo.common.log, "JSONL log, one line per epoch (default: OUT.jsonl)");
  c_wm->add_option("--seed", wmo.common.seed, "Seed of the data agent, the split and the network")->check(kNonNegative)->capture_default_str();
  c_wm->add_flag("--resume", wmo.common.resume, "Continue training the world model at --out");
  add_train_common_flags(c_wm, wmo.common, "the rollouts use");
  c_wm->add_flag("--json", g.json, "Print one JSON document");
  out.push_back({c_wm, [&g, o] { return cmd_train_world_model(g, *o); }});
}

}  // namespace rlflow::cli
