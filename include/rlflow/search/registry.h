#pragma once
// Search strategies by name, in one registry, as cost backends are (cost/factory.h): greedy, taso
// and exhaustive are built in; a strategy that lives in a module above search (the trained agent,
// `rl`: pipeline/rl_module.h) is registered with register_strategy, since search cannot include it.
// --search's allowed values, its help and the unknown-strategy error all read the registry.
#include <any>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/rules/rule.h"
#include "rlflow/search/optimizer.h"

namespace rlflow::search {

// What a strategy is built from. The rules (not this list: the drivers copy it), the library and the
// cost model must outlive the optimizer made from them.
struct StrategyInputs {
  std::vector<const rules::Rule*> rules;        // the rules selected for the search
  const rules::RuleLibrary* library = nullptr;  // where they come from: a strategy that names its own rules looks them up here
  cost::CostModel* model = nullptr;
  SearchOptions options;
  // A registered strategy's own options, of the type its module documents (rl: rl::RlSearchOptions).
  // Empty: that strategy's defaults.
  std::any settings;
};

// A strategy made, and what its caller reports of it.
struct BuiltStrategy {
  std::unique_ptr<Optimizer> optimizer;
  size_t rules = 0;     // the rules it searches with (an agent: those its checkpoint names)
  std::string warning;  // to log and report, e.g. an agent trained under another target than the one it now serves
};

struct Strategy {
  std::string name;  // the --search spelling
  std::string help;  // one phrase for --help
  // false: the strategy brings its own rules (an agent's checkpoint names them), so an empty
  // selection is no error.
  bool needs_rules = true;
  // Limits::budget counts Report::agent_actions rather than graphs expanded (for progress lines).
  bool budget_counts_actions = false;
  // Files it reads besides the model and the rules (an agent's checkpoint), for the check that no
  // output overwrites an input. May be empty.
  std::function<std::vector<std::string>(const std::any& settings)> reads;
  std::function<Expected<BuiltStrategy>(const StrategyInputs&)> make;
};

// Adds a strategy, or replaces the registered one of the same name; a built-in name is refused.
// Registration is an explicit call, never a static initialiser (the linker drops an object file of
// a static library that nothing references, and its initialiser with it).
Status register_strategy(Strategy s);
// The strategy of that name (built in or registered), or nullptr.
const Strategy* find_strategy(const std::string& name);
// Every name: the built-in ones (greedy, taso, exhaustive), then the registered ones in the order
// they registered.
std::vector<std::string> strategy_names();
// "greedy (...), taso (...), exhaustive (...), rl (...)": every strategy with its help, for --help.
std::string strategy_help();
// The strategy `name` made from `in`; an unknown name is a usage error that lists every strategy.
Expected<BuiltStrategy> make_strategy(const std::string& name, const StrategyInputs& in);

}  // namespace rlflow::search
