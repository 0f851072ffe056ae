#pragma once
// What every command does before its own work: read a model at the sizes the user asked for,
// refuse a run that cannot fit in memory, pick the rules and the cost a target is judged by.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rlflow/exec/executor.h"
#include "rlflow/ir/graph.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/rule.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

// "name:1,3,224,224" -> {name, shape}; several allowed.
Expected<std::map<std::string, ir::Shape>> parse_input_shapes(const std::vector<std::string>& specs);

// The memory a command may plan to use when --memory-limit is not given, MiB: 3/4 of what this
// process can have (physical RAM, or its cgroup's limit when that is lower).
int64_t default_memory_limit_mb();
// Refuses (exit 3, naming the largest tensor) a graph whose run would need more than `limit_mb`
// (0: the default) by ir::estimate_run_memory, before anything is allocated.
inline constexpr int64_t kNoMemoryCheck = -1;
Status check_memory(const ir::Graph& g, int64_t limit_mb);

// Imports an ONNX model with --input-shape specs, folding with `ex`, and checks that running it fits
// in `memory_limit_mb` (0: the default; kNoMemoryCheck for commands that never run the graph).
Expected<ir::Graph> load_model(const std::string& path, const std::vector<std::string>& shapes, const exec::Executor& ex,
                               onnxio::ImportStats* stats = nullptr, int64_t memory_limit_mb = 0,
                               const std::map<std::string, int64_t>& fixed_dims = {}, bool keep_static_dims = false);

// --fix NAME=SIZE specs: symbols specialised for good.
Expected<std::map<std::string, int64_t>> parse_fixed_dims(const std::vector<std::string>& specs);

// The rules a search may use: the default set's proved rules, or (all_rules) every rule that is
// proved or numerically verified. Refuted and unverified rules never.
std::vector<const rules::Rule*> select_rules(const rules::RuleLibrary& lib, bool all_rules);

// The cost model a deployment target is judged by: ort -> ort (the analytic onnxruntime CPU profile),
// h100 -> recorded (replayed H100 timings), gpu -> cudnn (this machine's GPU). One mapping for
// optimise and the trainers, so an agent trains on the cost it is judged on.
std::string target_cost_model(const std::string& target);

}  // namespace rlflow::pipeline
