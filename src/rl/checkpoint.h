#pragma once
// Internal to rl: agent checkpoints. One torch archive holding the network, the optimiser state,
// the global torch RNG state, and a JSON "meta" record (config, rule names, counters, our RNG),
// behind a header line with a 64-bit checksum of the archive that every read verifies.
#include <nlohmann/json.hpp>

#include <fstream>

#include "nets.h"
#include "rlflow/util/expected.h"

namespace rlflow::rl::checkpoint {

using Modules = std::vector<std::pair<std::string, torch::nn::Module*>>;

// Written to a temporary file and renamed into place, always with the checksum; a file whose
// checksum does not match is a bad-input error naming it. meta["kind"] says what it holds:
// "policy" (model-free agent), "dream-controller" (controller + encoder + world model), "world-model".
Status save(const std::string& path, const Modules& modules, const torch::optim::Optimizer* opt, const nlohmann::json& meta);
Expected<nlohmann::json> read_meta(const std::string& path);
// Loads the weights (and optimiser and torch RNG state when `opt` is given).
Status load(const std::string& path, const Modules& modules, torch::optim::Optimizer* opt);

// The op vocabulary (one-hot op slots, src/rl/features.cpp) the checkpoint's encoder was trained with:
// meta["op_vocab"], or kLegacyOpVocab for a checkpoint older than the record. One from a build that
// knows more ops than this one is a bad-input error.
Expected<int> op_vocab(const nlohmann::json& meta, const std::string& path);

// The model-free agent: one PolicyNet stored as "model"; its op vocabulary goes into the meta.
Status save(const std::string& path, nets::PolicyNet& net, const torch::optim::Optimizer* opt, const nlohmann::json& meta);
Status load(const std::string& path, nets::PolicyNet& net, torch::optim::Optimizer* opt);

// Opens a run's JSONL log for appending. A fresh run (resume false) starts it empty. A resumed run
// keeps only the lines the checkpoint covers, those whose `key` (the update or epoch number the
// line reports) is at most `upto`: lines that an interrupted run wrote after its last checkpoint
// are written again by the resumed run, and would otherwise appear twice. Lines that do not parse
// (a line cut short by a kill) go too. An empty path opens nothing.
Status open_log(std::ofstream& log, const std::string& path, bool resume, const std::string& key, int64_t upto);

}  // namespace rlflow::rl::checkpoint
