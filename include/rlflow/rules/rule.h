#pragma once
// A substitution (TASO's model): a source pattern graph and a target pattern graph over shared
// variables, parameter constraints, and a mapping of source outputs to target outputs.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"
#include "rlflow/rules/expr.h"

namespace rlflow::rules {

// One op in a pattern. Inputs name a tensor variable ("x") or another node's output ("c" or "c:1").
struct PatternNode {
  std::string id;
  ir::OpKind kind = ir::OpKind::kRelu;
  std::vector<std::string> inputs;
  // Source: each listed field must equal the expression (a variable binds on first use); fields
  // not listed match anything. Target: the field values; unlisted fields come from `like`.
  std::map<std::string, Expr> params;
  std::string like;  // target only: copy the parameters of this source node first
};

struct Pattern {
  std::vector<PatternNode> nodes;
  int index_of(const std::string& id) const;
};

struct TensorVar {
  bool constant = false;  // must be a weight (its value is known before run time)
  bool positive = false;  // test data must be positive (e.g. a variance under a square root)
};

// cmp is one of eq, ne, lt, le; both sides evaluate to integer vectors.
struct Condition {
  std::string cmp;
  Expr lhs, rhs;
};

// Concrete values for the variables, used to build a test graph for numeric verification.
struct Instance {
  std::map<std::string, ir::Shape> shapes;                  // tensor variable -> shape
  std::map<std::string, std::vector<int64_t>> ints;         // $param -> value
  std::map<std::string, double> reals;
  std::map<std::string, std::map<std::string, Expr>> node_params;  // fixes source fields left open
};

enum class VerifyStatus { kUnverified, kNumeric, kProved, kRefuted };
std::string_view status_name(VerifyStatus s);
std::optional<VerifyStatus> status_from_name(std::string_view s);

// The matcher's form of a rule's source pattern (rules/match.cpp): parsed references and the
// search order. Built once when a library is loaded or re-indexed and shared by copies of the rule.
struct CompiledPattern;

struct Rule {
  std::string name;
  std::string provenance = "hand-written";  // or "generated"
  std::string description;
  Pattern source, target;
  std::vector<std::pair<std::string, std::string>> outputs;  // source value -> target value
  std::map<std::string, TensorVar> vars;
  std::vector<Condition> conditions;
  std::string condition_note;  // why the conditions are needed (e.g. only true for some shapes)
  std::vector<std::vector<std::string>> symmetric;  // interchangeable source nodes: matched in id order
  std::vector<Instance> instances;
  VerifyStatus status = VerifyStatus::kUnverified;
  bool in_default_set = true;
  // The last proof attempt recorded by `rules verify --prove --write`: the outcome ("proved", "not
  // proved", "timeout", "error"; empty when never attempted) and, unless proved, the solver's reason.
  std::string proof_outcome, proof_reason;
  // Set by RuleLibrary::reindex (and so by loading). A rule whose patterns are edited afterwards
  // must be re-indexed; one that never was is compiled on each use.
  std::shared_ptr<const CompiledPattern> compiled;

  // Root op kind: the kind of the last source node (rules are indexed by it).
  ir::OpKind root_kind() const { return source.nodes.back().kind; }
};

// Totals of the last `rlflow rules generate` run, kept in the rule file ("generator").
struct GeneratorInfo {
  int depth = 0;
  double seconds = 0;
  std::string command;
  std::vector<std::pair<std::string, int64_t>> totals;  // stage -> count, in pipeline order
  bool empty() const { return totals.empty(); }
};

struct RuleLibrary {
  int version = 1;
  std::vector<Rule> rules;
  GeneratorInfo generator;
  // Index by root op kind: rule indices whose root is that kind.
  std::vector<std::vector<int>> by_root;

  // Rebuilds by_root and compiles every rule's source pattern for the matcher.
  void reindex();
  const Rule* find(const std::string& name) const;
  int index_of(const std::string& name) const;
};

// Field names each op kind exposes to patterns, and conversion of typed params to/from fields.
struct Fields {
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, double> reals;
};
Fields params_to_fields(ir::OpKind kind, const ir::OpParams& p);
Expected<ir::OpParams> params_from_fields(ir::OpKind kind, const Fields& f);
bool is_real_field(ir::OpKind kind, const std::string& field);
bool is_known_field(ir::OpKind kind, const std::string& field);
// Sensible values for every field (unit strides, no padding, ...) for building test graphs.
Fields default_fields(ir::OpKind kind, int64_t spatial_rank);

// Checks a rule for internal consistency: every target variable is bound by the source, ids and
// references resolve, fields exist. The error names the rule.
Status validate_rule(const Rule& r);

}  // namespace rlflow::rules
