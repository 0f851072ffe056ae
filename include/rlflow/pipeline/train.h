#pragma once
// `rlflow train-agent` and `rlflow train-world-model` as library calls: check the options and every
// path before any work, set up the models (as `optimise` searches them), the rules and the target's
// cost (pipeline/setup.h), train (rl/agent.h, rl/world_model.h), and return a typed report that
// prints itself as text or JSON. Nothing here prints; progress comes through the hooks.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/cost/factory.h"
#include "rlflow/pipeline/target.h"
#include "rlflow/rl/agent.h"
#include "rlflow/rl/world_model.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

// What both trainers take: the models, the rules, the cost the agent will be judged by, and where
// the result goes. Every default lives here; the CLI binds its flags to these fields.
struct TrainCommonOptions {
  std::vector<std::string> models;
  std::vector<std::string> input_shapes;
  std::string config;  // the command's own settings file; empty: its built-in defaults
  std::string out;
  std::string log;     // empty: OUT.jsonl
  int64_t episodes = 200;
  uint64_t seed = 0;
  bool resume = false;
  std::string rules_file;  // empty: the shipped library
  bool all_rules = false;
  std::string target = "ort";  // where the agent's graphs will run: the cost it trains on (as optimise --target)
  // kind "auto": the target's cost model. Of the rest, deterministic and device_profile have flags.
  cost::CostOptions cost;
  int64_t opset = kOpsetAuto;  // train on the graphs `optimise --opset` searches (composites of that opset fused)

  std::string log_path() const { return log.empty() ? out + ".jsonl" : log; }
};

// `train-agent`.
struct TrainAgentOptions {
  TrainCommonOptions common;  // config: PPO hyperparameters (configs/agent/*.yaml)
  int imitation_epochs = -1;  // >= 0 overrides training.imitation_epochs of the config
  int dagger_rounds = -1;     // >= 0 overrides training.dagger_rounds
  // data-parallel training (c10d)
  int world_size = 1;
  int rank = 0;
  std::string master = "127.0.0.1:29500";
  // model-based: train the controller in this world model's dream
  std::string world_model;
  double temperature = 1.0;
  double uncertainty_penalty = 0;
  int dream_batch = 64;
  int eval_every = 10;
};

// Progress for a line on a terminal; every hook may be empty and runs on the training thread.
struct TrainAgentHooks {
  rl::PhaseProgress phase;      // model-free: imitation, DAgger, PPO
  rl::EpisodeProgress episode;  // model-free: each real episode as it ends
  rl::TrainProgress update;     // after each PPO update (model-free and dream)
};

struct TrainAgentReport {
  std::string agent, log;  // the checkpoint and the JSONL log written
  // model-free (rl::train_agent)
  std::string cost_model;  // CostModel::name() of the cost trained on
  size_t rules = 0;
  int rank = 0;
  int dagger_rounds = 0;  // as configured (the config, or --dagger-rounds)
  std::optional<rl::TrainSummary> trained;
  // model-based (--world-model: rl::train_dream_agent)
  std::string world_model;
  double temperature = 1, uncertainty_penalty = 0;
  std::optional<rl::DreamSummary> dream;

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

// Errors carry their exit class; a refused path or number is refused before anything is loaded.
Expected<TrainAgentReport> train_agent(const TrainAgentOptions& o, const TrainAgentHooks& hooks = {});

// `train-world-model`.
struct TrainWorldModelOptions {
  TrainCommonOptions common;  // config: world-model settings (configs/world_model.yaml)
  std::string encoder_agent;  // model-free agent whose frozen encoder and xfers are used
  std::string policy;         // dream controller that collects the new episodes
  std::string data;           // rollout file; empty: OUT.data
};

struct TrainWorldModelHooks {
  // Once, just before training: its options as resolved (the config's epochs, for a progress line).
  std::function<void(const rl::WorldModelTrainOptions&)> start;
  rl::PhaseProgress phase;      // collecting real episodes, fitting
  rl::EpisodeProgress episode;  // each new real episode
  std::function<void(const rl::WorldModelMetrics&)> epoch;  // after each fitting epoch
};

struct TrainWorldModelReport {
  std::string world_model, log;
  std::string encoder_agent;  // empty: a random, frozen encoder
  bool by_policy = false;     // the new episodes came from a dream controller (--policy), not the random agent
  rl::WorldModelSummary summary;

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

Expected<TrainWorldModelReport> train_world_model(const TrainWorldModelOptions& o, const TrainWorldModelHooks& hooks = {});

}  // namespace rlflow::pipeline
