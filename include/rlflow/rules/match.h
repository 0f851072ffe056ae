#pragma once
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"
#include "rlflow/rules/rule.h"

namespace rlflow::rules {

// Where a rule applies: the rule and the graph node matched by each source pattern node (in
// pattern order). A value: it can be stored, logged and replayed against the same graph.
struct Match {
  std::string rule;
  std::vector<ir::NodeId> nodes;
  bool operator==(const Match&) const = default;
  std::string str() const;
};

struct MatchOptions {
  size_t max_matches = 200;  // the RL agents' location mask size
};

// What matching needs to know about a graph beyond its nodes; build it once per graph when
// matching many rules against it.
struct GraphIndex {
  explicit GraphIndex(const ir::Graph& g);
  const ir::Graph& graph;
  std::vector<std::vector<ir::Use>> uses;            // consumers of each node
  std::vector<std::vector<ir::NodeId>> by_kind;      // nodes of each op kind, in order
  std::vector<std::vector<int32_t>> output_indices;  // which outputs of each node are graph outputs
  std::vector<bool> constant;                        // ir::constant_nodes: folds at export
};

// All applicable matches of one rule, read-only, in a deterministic (topological) order, capped.
std::vector<Match> find_matches(const ir::Graph& g, const Rule& r, const MatchOptions& opts = {});
std::vector<Match> find_matches(const GraphIndex& index, const Rule& r, const MatchOptions& opts = {});

// Re-checks a (possibly replayed) match against the graph and returns its bindings.
Expected<Bindings> check_match(const ir::Graph& g, const Rule& r, const Match& m);

// Builds the rewritten graph. Rejects matches whose interior values escape, results with a
// cycle, and shape conflicts; shapes of new nodes are inferred.
Expected<ir::Graph> apply(const ir::Graph& g, const Rule& r, const Match& m);

}  // namespace rlflow::rules
