#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
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

// Why a match or a rewrite was refused. Matching counts the refusals of complete placements (a
// pattern that does not fit at all is not counted); apply reports its own.
enum class Rejection : uint8_t {
  kNone = 0,
  kNotMatched,     // the pattern does not fit there (kinds, wiring, parameters; a stale replayed match)
  kParamsDiffer,   // a parameter computed from the bindings differs from the graph's
  kCondition,      // a rule condition does not hold
  kSymmetry,       // symmetric pattern nodes in the other order (the same match, counted once)
  kEscapingValue,  // an interior value is a graph output or is read outside the match
  kCycle,          // a path leaves the match and re-enters it: the result would have a cycle
  kUnbound,        // a target input, output or condition refers to an unbound variable
  kShapeConflict,  // the target's types do not infer, or differ from the values it replaces
  kTargetParams,   // the target's parameters cannot be computed
  kNotFloat,       // the rule computes (not only moves values) and the match computes in an integer or
                   // bool type: rules are proved over the reals, which integer arithmetic does not follow
  kQuantized,      // a matched node reads or feeds a quantization op (ir::quantization_boundary)
};
inline constexpr size_t kNumRejections = 12;
std::string_view rejection_name(Rejection r);
using RejectionCounts = std::array<int64_t, kNumRejections>;

// L, the matches kept per rule and graph: the RL agents' location mask size (DESIGN.md), and what
// every search considers, so that a search and an agent see the same locations.
inline constexpr size_t kDefaultMaxMatches = 200;

struct MatchOptions {
  size_t max_matches = kDefaultMaxMatches;
  RejectionCounts* rejections = nullptr;  // when set, refused complete placements are counted here
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
  std::vector<bool> quantized;                       // ir::quantization_boundary: left as it is
};

// The matcher's compiled form of r's source pattern (what RuleLibrary::reindex stores in r.compiled).
std::shared_ptr<const CompiledPattern> compile_pattern(const Rule& r);

// All applicable matches of one rule, read-only, in a deterministic (topological) order, capped.
std::vector<Match> find_matches(const ir::Graph& g, const Rule& r, const MatchOptions& opts = {});
std::vector<Match> find_matches(const GraphIndex& index, const Rule& r, const MatchOptions& opts = {});

// Re-checks a (possibly replayed) match against the graph and returns its bindings. The index
// form reuses an index the caller already holds; *why (when given) says why a match is refused.
Expected<Bindings> check_match(const ir::Graph& g, const Rule& r, const Match& m);
Expected<Bindings> check_match(const GraphIndex& index, const Rule& r, const Match& m, Rejection* why = nullptr);

// Builds the rewritten graph. Rejects matches whose interior values escape, results with a
// cycle, and shape conflicts; shapes of new nodes are inferred. The index form does not re-index
// the graph (search expands many matches of one graph).
Expected<ir::Graph> apply(const ir::Graph& g, const Rule& r, const Match& m);
Expected<ir::Graph> apply(const GraphIndex& index, const Rule& r, const Match& m, Rejection* why = nullptr);

// Working storage for apply_into, reused from one rewrite to the next.
struct ApplyScratch {
  std::vector<ir::Node> targets;
  std::vector<std::pair<ir::ValueRef, ir::ValueRef>> redirect;
  std::vector<ir::GraphOutput> outputs;
  ir::TopoWork topo;
  std::vector<int32_t> order;
  std::vector<char> live;
  std::vector<ir::NodeId> remap;
};

// The same rewrite as apply, written into `out` in place: out's nodes are overwritten by
// copy-assignment, so a search that rewrites one graph many times into the same `out` reuses
// their storage instead of allocating a graph per candidate. On error `out` is unspecified.
Status apply_into(const GraphIndex& index, const Rule& r, const Match& m, ir::Graph& out, ApplyScratch& scratch,
                  Rejection* why = nullptr);

}  // namespace rlflow::rules
