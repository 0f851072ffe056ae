#pragma once
// Internal to the prover: the Z3 vocabulary shared by the axioms (prover_axioms.cpp), the rule
// translation (prover_translate.cpp) and the driver (prover.cpp). Every function here may throw
// z3::exception; the driver catches it.
#include <z3++.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "rlflow/rules/prover.h"
#include "rlflow/rules/rule.h"

namespace rlflow::rules::prover {

// Sorts: T (tensors, uninterpreted), L (integer lists: a datatype nil | cons(head, tail)), Int,
// Real. Tensor operators are capitalised (Conv, Add, ...); shape and list functions are lower
// case (shape, len, nth, ...), so no name collides with an SMT-LIB builtin.
class Signature {
 public:
  explicit Signature(z3::context& c);

  z3::context& ctx() const { return ctx_; }
  const z3::sort& T() const { return T_; }
  const z3::sort& L() const { return L_; }
  z3::func_decl fn(const std::string& name) const;  // throws z3::exception for an unknown name

  z3::expr apply(const std::string& name, const std::vector<z3::expr>& args) const;
  z3::expr nil() const;
  z3::expr cons(const z3::expr& head, const z3::expr& tail) const;
  z3::expr list(const std::vector<z3::expr>& elems) const;
  z3::expr shape(const z3::expr& t) const { return apply("shape", {t}); }
  z3::expr len(const z3::expr& l) const { return apply("len", {l}); }
  z3::expr nth(const z3::expr& l, const z3::expr& i) const { return apply("nth", {l, i}); }
  z3::expr rank(const z3::expr& t) const { return len(shape(t)); }
  z3::expr dim(const z3::expr& t, const z3::expr& i) const { return nth(shape(t), i); }

  // Parses SMT-LIB commands (assert ...) against this vocabulary, with the shared macros
  // (rank, dim, ...) defined first.
  z3::expr_vector parse(const std::string& smt) const;

 private:
  z3::context& ctx_;
  z3::sort T_, L_;
  Z3_func_decl nil_ = nullptr, cons_ = nullptr;
  std::vector<z3::func_decl> keep_;  // holds references to nil/cons/head/tail
  std::map<std::string, z3::func_decl> fns_;
};

const AxiomFile& axiom_file();  // the embedded configs/rules/axioms.smt2, parsed once
const std::vector<AxiomInfo>& axiom_table_impl();

// Every axiom, parsed against the vocabulary.
z3::expr_vector axioms(const Signature& sig);

// The proof obligations of one rule.
struct Query {
  std::vector<std::pair<std::string, z3::expr>> assumptions;  // (what it is, formula)
  struct Goal {
    std::string name;  // "source output -> target output"
    z3::expr source, target;
  };
  std::vector<Goal> goals;
  std::vector<std::string> notes;  // what could not be modelled (and was left unconstrained)
};

Query translate(const Signature& sig, const Rule& r);

// prover_lift.cpp: a goal whose two sides are built only from broadcasting elementwise operators
// over the same leaves holds if the scalar identity holds over the reals, which Z3 decides without
// the axioms. kNotElementwise: the goal is outside that fragment (use the axioms).
// kCounterexample: the scalar identity fails at a point that tensors filled with those values
// realise (no uninterpreted function involved; `positive` leaves are constrained to be > 0), so
// the rule is false; *counterexample names the point.
enum class LiftOutcome { kProved, kNotProved, kCounterexample, kNotElementwise };
LiftOutcome prove_elementwise(z3::context& c, const z3::expr& source, const z3::expr& target, double timeout_s,
                              const std::set<std::string>& positive, std::string* counterexample);

// Exact rational for a double (Z3 numerals from decimal strings would round).
z3::expr real_value(z3::context& c, double v);

}  // namespace rlflow::rules::prover
