#pragma once
// What the commands do before their own work, in one function: import the models (for the
// trainers, as `optimise` searches them: at the target's opset, composite chains fused), load the
// rule library and select its rules, and build the cost model, where `auto` means the target's.
// optimise (its rules and cost, after its own import), cost (its model and cost model) and the
// trainers (all three) call setup(), so each part has one meaning in every command.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlflow/cost/cost_model.h"
#include "rlflow/cost/factory.h"
#include "rlflow/ir/graph.h"
#include "rlflow/rules/rule.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

struct SetupOptions {
  // Models, imported in order with these --input-shape specs (the default memory check applies).
  std::vector<std::string> models;
  std::vector<std::string> input_shapes;
  // Set: each model is moved to this --opset (kOpsetAuto: the target's; pipeline/target.h) and its
  // composite chains fused, the graphs `optimise` searches (the trainers learn on them). Unset: as imported.
  std::optional<int64_t> search_opset;

  // The rule library (rules_file, empty: the shipped one) and the rules select_rules picks from it.
  bool load_rules = false;
  std::string rules_file;
  bool all_rules = false;
  // Non-empty: no usable rule is an error, "<path>: no verified rules to <rules_needed_for>".
  std::string rules_needed_for;

  // The cost model, built when `build_cost` is set.
  bool build_cost = false;
  // Where the result will run (a target name; checked before anything is read). Non-empty: cost.kind
  // "auto" is that target's cost model (target_cost_model), as optimise --target prices it. Empty:
  // "auto" keeps the factory's meaning (cudnn where a GPU is usable, else cpu).
  std::string target;
  cost::CostOptions cost;
};

struct SetupModel {
  std::string path;
  ir::Graph graph;
};

struct Setup {
  std::vector<SetupModel> models;
  rules::RuleLibrary library;
  std::vector<const rules::Rule*> rules;  // point into `library`
  std::string rules_path;                 // the library read
  std::unique_ptr<cost::CostModel> cost;
  std::string cost_kind;                  // what cost.kind resolved to (cost::resolve_kind)
};

// The parts in order: models, rules, cost. The first error stops it.
Expected<Setup> setup(const SetupOptions& o);

}  // namespace rlflow::pipeline
