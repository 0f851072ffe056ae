#include "rlflow/rules/rule.h"

#include "rlflow/rules/match.h"
#include "rlflow/rules/prover.h"

#include <set>

namespace rlflow::rules {

int Pattern::index_of(const std::string& id) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].id == id) return static_cast<int>(i);
  return -1;
}

std::string_view status_name(VerifyStatus s) {
  switch (s) {
    case VerifyStatus::kUnverified: return "unverified";
    case VerifyStatus::kNumeric: return "numerically verified only";
    case VerifyStatus::kProved: return "proved";
    case VerifyStatus::kRefuted: return "refuted";
  }
  return "?";
}

std::optional<VerifyStatus> status_from_name(std::string_view s) {
  for (auto v : {VerifyStatus::kUnverified, VerifyStatus::kNumeric, VerifyStatus::kProved, VerifyStatus::kRefuted})
    if (status_name(v) == s) return v;
  return std::nullopt;
}

// Declared with the prover (prover.h) and defined here, in the core: `rules verify` reports proofs
// without the rule tools module.
std::string_view outcome_name(ProofOutcome o) {
  switch (o) {
    case ProofOutcome::kProved: return "proved";
    case ProofOutcome::kNotProved: return "not proved";
    case ProofOutcome::kTimeout: return "timeout";
    case ProofOutcome::kError: return "error";
    case ProofOutcome::kDisproved: return "disproved";
  }
  return "?";
}

VerifyStatus combined_status(bool numeric_ok, const ProofResult* proof) {
  if (!numeric_ok || (proof && proof->outcome == ProofOutcome::kDisproved)) return VerifyStatus::kRefuted;
  return proof && proof->proved() ? VerifyStatus::kProved : VerifyStatus::kNumeric;
}

void RuleLibrary::reindex() {
  for (auto& r : rules) r.compiled = compile_pattern(r);
  by_root.assign(ir::kNumOpKinds, {});
  for (size_t i = 0; i < rules.size(); ++i)
    if (!rules[i].source.nodes.empty()) by_root[static_cast<size_t>(rules[i].root_kind())].push_back(static_cast<int>(i));
}

int RuleLibrary::index_of(const std::string& name) const {
  for (size_t i = 0; i < rules.size(); ++i)
    if (rules[i].name == name) return static_cast<int>(i);
  return -1;
}

const Rule* RuleLibrary::find(const std::string& name) const {
  int i = index_of(name);
  return i < 0 ? nullptr : &rules[static_cast<size_t>(i)];
}

namespace {

// "c" -> (c, 0); "c:1" -> (c, 1)
std::pair<std::string, int> split_ref(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos) return {s, 0};
  return {s.substr(0, colon), std::stoi(s.substr(colon + 1))};
}

bool is_param_var(const std::string& v) { return !v.empty() && v[0] == '$'; }

}  // namespace

Status validate_rule(const Rule& r) {
  auto bad = [&](const std::string& why) { return Error::bad_input("rule '" + r.name + "': " + why); };
  if (r.name.empty()) return Error::bad_input("a rule has no name");
  if (r.source.nodes.empty()) return bad("empty source pattern");
  if (r.outputs.empty()) return bad("no outputs mapped");
  std::set<std::string> tensor_vars, param_vars;
  std::set<std::string> src_ids, tgt_ids;
  auto check_expr_vars = [&](const Expr& e, bool source, const std::string& where) -> Status {
    if (e.kind == Expr::Kind::kCall && !is_known_function(e.name)) return bad(where + ": unknown function '" + e.name + "'");
    for (const auto& a : e.args) {
      if (a.kind == Expr::Kind::kCall && !is_known_function(a.name)) return bad(where + ": unknown function '" + a.name + "'");
    }
    std::vector<std::string> vars;
    e.collect_vars(&vars);
    for (const auto& v : vars) {
      if (is_param_var(v)) {
        if (source) param_vars.insert(v);
        else if (!param_vars.count(v)) return bad(where + " uses " + v + ", which the source never binds");
      } else if (!tensor_vars.count(v)) {
        return bad(where + " refers to tensor '" + v + "', which the source never binds");
      }
    }
    return {};
  };
  // Source: tensor variables bind at inputs; parameters bind in params.
  for (const auto& n : r.source.nodes) {
    if (!src_ids.insert(n.id).second) return bad("source node id '" + n.id + "' is used twice");
    if (ir::is_source(n.kind) && n.kind != ir::OpKind::kConstant) return bad("source node '" + n.id + "' has a source op kind");
    for (const auto& in : n.inputs) {
      auto [id, k] = split_ref(in);
      if (src_ids.count(id)) {
        if (id == n.id) return bad("source node '" + n.id + "' reads itself");
        continue;
      }
      if (r.source.index_of(id) >= 0) return bad("source node '" + n.id + "' reads '" + id + "' before it is defined");
      tensor_vars.insert(id);
    }
    for (const auto& [field, e] : n.params) {
      if (!is_known_field(n.kind, field)) return bad("source node '" + n.id + "': " + std::string(ir::op_name(n.kind)) + " has no field '" + field + "'");
      // Variables in source params bind; tensor names used in calls must be bound by inputs.
      std::vector<std::string> vars;
      e.collect_vars(&vars);
      for (const auto& v : vars)
        if (is_param_var(v)) param_vars.insert(v);
    }
    if (!n.like.empty()) return bad("source node '" + n.id + "' cannot use 'like'");
  }
  for (const auto& [v, spec] : r.vars)
    if (!tensor_vars.count(v)) return bad("variable '" + v + "' is declared but never read by the source");
  for (const auto& n : r.source.nodes)
    for (const auto& [field, e] : n.params) RLFLOW_TRY_STATUS(check_expr_vars(e, true, "source node '" + n.id + "' field " + field));
  for (const auto& n : r.target.nodes) {
    if (!tgt_ids.insert(n.id).second) return bad("target node id '" + n.id + "' is used twice");
    if (n.kind == ir::OpKind::kInput || n.kind == ir::OpKind::kWeight || n.kind == ir::OpKind::kOpaque)
      return bad("target node '" + n.id + "' has an op kind a rule cannot create");
    for (const auto& in : n.inputs) {
      auto [id, k] = split_ref(in);
      if (tgt_ids.count(id) && id != n.id) continue;
      if (!tensor_vars.count(id)) return bad("target node '" + n.id + "' reads '" + in + "', which is neither a source variable nor an earlier target node");
    }
    if (!n.like.empty()) {
      int s = r.source.index_of(n.like);
      if (s < 0) return bad("target node '" + n.id + "' is like '" + n.like + "', which is not a source node");
      if (r.source.nodes[static_cast<size_t>(s)].kind != n.kind) return bad("target node '" + n.id + "' is like a node of another kind");
    }
    for (const auto& [field, e] : n.params) {
      if (!is_known_field(n.kind, field)) return bad("target node '" + n.id + "': " + std::string(ir::op_name(n.kind)) + " has no field '" + field + "'");
      RLFLOW_TRY_STATUS(check_expr_vars(e, false, "target node '" + n.id + "' field " + field));
    }
  }
  for (const auto& c : r.conditions) {
    if (c.cmp != "eq" && c.cmp != "ne" && c.cmp != "lt" && c.cmp != "le") return bad("unknown comparison '" + c.cmp + "'");
    RLFLOW_TRY_STATUS(check_expr_vars(c.lhs, false, "condition"));
    RLFLOW_TRY_STATUS(check_expr_vars(c.rhs, false, "condition"));
  }
  std::set<std::string> mapped;
  for (const auto& [s, t] : r.outputs) {
    auto [sid, sk] = split_ref(s);
    auto [tid, tk] = split_ref(t);
    if (!src_ids.count(sid)) return bad("output maps '" + s + "', which is not a source node");
    if (!tgt_ids.count(tid) && !tensor_vars.count(tid)) return bad("output maps to '" + t + "', which the target does not define");
    if (!mapped.insert(s).second) return bad("source output '" + s + "' is mapped twice");
  }
  for (const auto& group : r.symmetric)
    for (const auto& id : group)
      if (!src_ids.count(id)) return bad("symmetric group names '" + id + "', which is not a source node");
  return {};
}

}  // namespace rlflow::rules
