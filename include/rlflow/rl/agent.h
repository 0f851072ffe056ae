#pragma once
// Training the model-free agent (GNN encoder + hierarchical PPO) and running a trained one as a
// search strategy. No torch in this header.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/rl/config.h"
#include "rlflow/rules/rule.h"
#include "rlflow/search/optimizer.h"

namespace rlflow::rl {

struct TrainModel {
  std::string name;
  ir::Graph graph;
};

// One real training episode as it ends: for a progress line between the updates, which come
// only every episodes_per_update episodes.
struct EpisodeLog {
  int64_t episode = 0;        // its number in the run, from 0
  int64_t episodes_done = 0;  // episodes of the run finished, this one included (data-parallel: this rank's of the current update)
  int64_t steps = 0;          // environment steps it took
  double ret = 0;             // its return
  double best_improvement = 0;  // the best graph it met, as a fraction of the initial cost
};
using EpisodeProgress = std::function<void(const EpisodeLog&)>;
// A training run's stage as it starts (imitation, DAgger, PPO; collecting, fitting), for a
// progress line: short words, no trailing punctuation.
using PhaseProgress = std::function<void(const std::string& phase)>;

struct TrainOptions {
  std::vector<TrainModel> models;           // episodes cycle through them
  std::vector<const rules::Rule*> rules;    // the xfers, in order
  cost::CostModel* cost = nullptr;          // shared by the environments (locked)
  // Recorded in the checkpoint: the --target and the cost model it was trained under, so that an
  // agent used under another target says so.
  std::string target, cost_model;
  PpoConfig config;
  int64_t episodes = 200;                   // total, including those of a resumed run
  uint64_t seed = 0;
  std::string out;                          // checkpoint path (written atomically)
  bool resume = false;                      // continue from `out`
  std::string log_path;                     // JSONL, one line per update; empty: none
  // Data-parallel training over c10d (gloo): this process is rank `rank` of `world_size`. Rank 0
  // serves the rendezvous at `master` (ADDR:PORT) and alone writes the checkpoint and the log;
  // every rank must be given the same models, rules, config, seed and episodes.
  int world_size = 1;
  int rank = 0;
  std::string master = "127.0.0.1:29500";
  double dist_timeout_s = 300;              // rendezvous and each collective
  // Progress between updates (train_agent's own argument is called once per update). Empty: none.
  // Both run on the training thread; the library prints nothing itself.
  EpisodeProgress on_episode;
  PhaseProgress on_phase;                   // "imitation: greedy demonstrations", ..., "PPO"
};

struct UpdateLog {
  int64_t update = 0, episodes = 0, env_steps = 0;
  double mean_return = 0, mean_improvement = 0, best_improvement = 0;  // improvements are fractions
  double env_steps_per_s = 0, real_step_ms = 0, seconds = 0;
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0;
  int ppo_epochs = 0;
  std::map<std::string, double> best_by_model;
};
using TrainProgress = std::function<void(const UpdateLog&)>;

struct TrainSummary {
  int64_t updates = 0, episodes = 0, env_steps = 0;  // over all ranks
  int world_size = 1;
  double seconds = 0, env_seconds = 0;
  std::map<std::string, double> best_improvement;      // per model, over all training episodes
  std::map<std::string, int64_t> episodes_to_best;     // episode at which that best was first reached
  std::map<std::string, int64_t> env_steps_to_best;
  // Imitation before PPO (training.imitation_epochs > 0).
  int imitation_epochs = 0;
  double imitation_accuracy = 0;                     // demonstration steps the policy's argmax reproduces
  double imitation_first_loss = 0, imitation_last_loss = 0;
  int64_t imitation_env_steps = 0;                   // environment steps of the demonstrations (and DAgger rollouts)
  int64_t imitation_states = 0;                      // labelled states cloned in the end
  std::map<std::string, double> greedy_improvement;  // per model: the demonstrations' improvement
};

Expected<TrainSummary> train_agent(const TrainOptions& o, const TrainProgress& progress = {});

struct AgentInfo {
  std::string kind;  // policy (model-free) | dream-controller (model-based) | world-model
  PpoConfig config;
  std::vector<std::string> rules;
  std::vector<std::string> models;
  int op_vocab = 0;  // one-hot op slots of its encoder (src/rl/features.cpp)
  std::string target, cost_model;  // what it was trained under (empty: a checkpoint from before they were recorded)
  // The trained-under cost model's device_fingerprint (which table, profile or device priced the
  // rewards); empty before 2026-11-28.
  std::string cost_fingerprint;
  int64_t updates = 0, episodes = 0, env_steps = 0;
  uint64_t seed = 0;
};
Expected<AgentInfo> read_agent_info(const std::string& path);

// The agent `optimise --search rl` uses when none is named: $RLFLOW_AGENT, else the shipped
// configs/agents/zoo-h100.pt (next to the binary, then in the source tree it was built from),
// trained by scripts/train/train_shipped_agent. Defined in the core (src/pipeline/rl_module.cpp),
// which names it before the RL module is loaded.
std::string default_agent_path();

// `rlflow optimise --search rl`: a greedy rollout and `rollouts` sampled ones of the trained
// policy, then the optional policy-guided beam search; the best graph met on any of them wins. Rules are looked up by name in `lib`.
struct RlSearchOptions {
  std::string agent_path;  // empty: default_agent_path()
  int rollouts = 4;
  uint64_t seed = 0;
  // The --target the agent now serves (set by the pipeline, as the seed is): an agent trained under
  // another one still runs, and the registered strategy's warning says so. Empty: not checked.
  std::string target;
  // Policy-guided beam search after the rollouts (model-free agents): each depth expands the
  // `beam_branch` most likely rewrites of each of the `beam` cheapest states, costs the children,
  // keeps the `beam` cheapest; it stops after `beam_patience` depths in which its cheapest state
  // did not improve. 0: off.
  int beam = 0;
  int beam_branch = 8;
  int beam_patience = 2;
  // Then greedy descent from the best graph found, to a local optimum under single rewrites.
  bool polish = false;
  // Then greedy search from the input graph too; its graph is returned when the agent's is not
  // cheaper (a search::Portfolio: Report::phases says which member's graph was returned).
  bool never_below_greedy = false;
};
// The rules an agent or world model names, from `lib`; a missing or refuted one is an error
// naming `origin`.
Expected<std::vector<const rules::Rule*>> lookup_rules(const rules::RuleLibrary& lib, const std::vector<std::string>& names,
                                                       const std::string& origin);

Expected<std::unique_ptr<search::Optimizer>> make_rl_optimizer(const RlSearchOptions& o, const rules::RuleLibrary& lib,
                                                               cost::CostModel& model);

}  // namespace rlflow::rl
