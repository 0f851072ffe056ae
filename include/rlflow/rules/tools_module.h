#pragma once
// The rule tools as a loadable module (util/module.h): the numeric verifier, the Z3 prover and the
// rule generator, which only `rlflow rules verify` and `rlflow rules generate` use. The binary loads
// librlflow_rules_tools.so for them; programs that link rlflow_rules_tools hand its table over.
#include <optional>
#include <string>
#include <vector>

#include "rlflow/rules/generator.h"
#include "rlflow/rules/prover.h"
#include "rlflow/rules/verify.h"
#include "rlflow/util/expected.h"

namespace rlflow::rules {

struct ToolsModule {
  // Bumped whenever this table or a type it passes changes: a module built from other sources is refused.
  static constexpr int kAbi = 1;
  int abi = kAbi;
  // verify_numerically and prove_rule_isolated with their default trials, tolerance and grace.
  RuleCheck (*verify_numerically)(const Rule& r) = nullptr;
  ProofResult (*prove_rule_isolated)(const Rule& r, const ProofOptions& opts) = nullptr;
  std::optional<gen::World> (*world)(const std::string& name) = nullptr;  // conv, matmul
  gen::GeneratorResult (*generate)(const gen::GeneratorOptions& o) = nullptr;
  size_t (*mark_default_set)(std::vector<Rule>* rules, const std::vector<ir::Graph>& graphs) = nullptr;
  void (*merge_generated)(RuleLibrary* lib, std::vector<Rule> rules, const GeneratorInfo& info) = nullptr;
};

// The module, loaded once: the table given to use_tools_module, else $RLFLOW_RULES_TOOLS_MODULE,
// else librlflow_rules_tools.so beside the running binary; an error names what needed it.
Expected<const ToolsModule*> tools_module(const std::string& needed_for);
void use_tools_module(const ToolsModule* module);

// The table itself, in rlflow_rules_tools (src/rules/tools_table.cpp).
const ToolsModule& tools_table();

}  // namespace rlflow::rules
