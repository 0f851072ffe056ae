#pragma once
// Internal to rl: agent checkpoints. One torch archive holding the network, the optimiser state,
// the global torch RNG state, and a JSON "meta" record (config, rule names, counters, our RNG).
#include <nlohmann/json.hpp>

#include "nets.h"
#include "rlflow/util/expected.h"

namespace rlflow::rl::checkpoint {

using Modules = std::vector<std::pair<std::string, torch::nn::Module*>>;

// Written to a temporary file and renamed into place. meta["kind"] says what it holds:
// "policy" (model-free agent), "dream-controller" (controller + encoder + world model), "world-model".
Status save(const std::string& path, const Modules& modules, const torch::optim::Optimizer* opt, const nlohmann::json& meta);
Expected<nlohmann::json> read_meta(const std::string& path);
// Loads the weights (and optimiser and torch RNG state when `opt` is given).
Status load(const std::string& path, const Modules& modules, torch::optim::Optimizer* opt);

// The model-free agent: one PolicyNet stored as "model".
Status save(const std::string& path, nets::PolicyNet& net, const torch::optim::Optimizer* opt, const nlohmann::json& meta);
Status load(const std::string& path, nets::PolicyNet& net, torch::optim::Optimizer* opt);

}  // namespace rlflow::rl::checkpoint
