#pragma once
// Formal verification of rules with an SMT solver (Z3), TASO's method: every operator is an
// uninterpreted function over an uninterpreted tensor sort, constrained by operator axioms
// (universally quantified equalities, configs/rules/AXIOMS.md). A rule is proved when, under the
// axioms, its conditions and the well-formedness of its source and target, "source output !=
// target output" is unsatisfiable for every output it maps. Anything else (a model, an unknown,
// a timeout) leaves the rule as it was: numerically verified at best.
#include <string>
#include <string_view>
#include <vector>

#include "rlflow/rules/rule.h"

namespace rlflow::rules {

struct ProofOptions {
  double timeout_s = 10.0;  // per rule, shared by its outputs
  std::string dump_smt2;    // when set, the query (axioms, assumptions, goals) is written there
};

enum class ProofOutcome {
  kProved,     // unsat for every output
  kNotProved,  // the solver gave up (incomplete quantifier instantiation) or found a model
  kTimeout,
  kError,  // the query could not be built (solver exception)
  kDisproved,  // a genuine counterexample: the rule is false (elementwise goals, see prover_lift.cpp)
};
std::string_view outcome_name(ProofOutcome o);

struct ProofResult {
  std::string rule;
  ProofOutcome outcome = ProofOutcome::kNotProved;
  double seconds = 0;
  std::string message;                     // why it is not proved; when proved, empty or the method
  std::vector<std::string> notes;          // parts of the rule the translation could not model
  bool proved() const { return outcome == ProofOutcome::kProved; }
};

ProofResult prove_rule(const Rule& r, const ProofOptions& opts = {});
// prove_rule in a child process (fork). Z3 does not check its timeout everywhere: some rules ran
// 50-60 s past a 3 s timeout inside one check, and an interrupt from another thread is ignored
// there too. The child is killed `grace_s` after the timeout (outcome timeout), and a crashed
// child is an error for that rule instead of the end of the run. The calling process must not be
// inside Z3 on another thread when it forks (rules verify proves only in children).
ProofResult prove_rule_isolated(const Rule& r, const ProofOptions& opts = {}, double grace_s = 2.0);

// The axiom set, for documentation and tests: a stable name, the group it belongs to, the
// SMT-LIB statement, and why it is sound.
struct AxiomInfo {
  std::string name, group, smt, why;
};
const std::vector<AxiomInfo>& prover_axioms();

// configs/rules/axioms.smt2 (the format is in its header and in configs/rules/AXIOMS.md): the shared
// macros, then every axiom. Throws std::runtime_error naming the line of a malformed entry (no
// name, group, why or SMT-LIB text; a name defined twice). The build embeds the file; this also
// reads a copy, so tests can check that the embedded axioms are the file's.
struct AxiomFile {
  std::string preamble;
  std::vector<AxiomInfo> axioms;
};
AxiomFile parse_axiom_file(const std::string& text);

// The status a rule gets from a numeric check (ok or not) and an optional proof: a failed numeric
// check or a disproof refutes; a proof upgrades a numeric pass to proved.
VerifyStatus combined_status(bool numeric_ok, const ProofResult* proof);

}  // namespace rlflow::rules
