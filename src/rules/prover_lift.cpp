// Elementwise lifting: a decision procedure for goals built only from broadcasting elementwise
// operators (Relu, Add, Sub, Mul, scalar Mul, Sigmoid, Tanh, Erf, rank-0 constants).
//
// Why it is sound. Each such operator computes output element i from the elements its inputs hold
// at i projected onto their shapes (numpy broadcasting: a size-1 axis reads index 0). Projections
// compose: projecting onto a shape s and then onto a shape s' that broadcasts into s is projecting
// onto s' directly. So both sides of the goal compute, at every element i of their output, a
// scalar function of the leaves' elements at their projections of i: f(x[p_x(i)], y[p_y(i)], ...)
// and g(...) with the same arguments. When the two sides read the same set of leaves, their output
// shapes are the same broadcast of those leaves' shapes (the source is well-formed, so the leaves
// broadcast together, in any grouping), and if f = g over the reals the tensors are equal. A
// rank-0 constant is neutral in broadcasting. Sigmoid, Tanh and Erf become uninterpreted real
// functions: equal arguments give equal values, which is all the proof may use of them.
//
// The scalar identity f = g is quantifier-free real arithmetic with if-then-else (Relu), which Z3
// decides directly, without the axioms' E-matching that times out on these goals (a Relu over a
// square, for example: relu(b*b*x) = b*b*relu(x) holds because b*b >= 0).
#include <map>
#include <optional>
#include <set>

#include "prover_internal.h"

namespace rlflow::rules::prover {

namespace {

class Lifter {
 public:
  explicit Lifter(z3::context& c) : c_(c) {}
  // Whether an uninterpreted function (Sigmoid, Tanh, Erf) took part: then a model of the
  // negated identity proves nothing.
  bool used_functions() const { return !funs_.empty(); }

  // The scalar form of a tensor term, or nullopt when the term is not elementwise.
  std::optional<z3::expr> lift(const z3::expr& e, std::set<std::string>& leaves) {
    if (!e.is_app()) return std::nullopt;
    const z3::func_decl d = e.decl();
    const std::string name = d.name().str();
    const unsigned n = e.num_args();
    if (n == 0) {
      if (d.decl_kind() != Z3_OP_UNINTERPRETED || e.get_sort().name().str() != "T") return std::nullopt;
      leaves.insert(name);
      return c_.real_const(("ew!" + name).c_str());
    }
    auto arg = [&](unsigned k) { return lift(e.arg(k), leaves); };
    if (name == "Relu" && n == 1) {
      auto a = arg(0);
      if (!a) return std::nullopt;
      return z3::ite(*a > 0, *a, c_.real_val(0));
    }
    if ((name == "Add" || name == "Sub" || name == "Mul") && n == 2) {
      auto a = arg(0);
      if (!a) return std::nullopt;
      auto b = arg(1);
      if (!b) return std::nullopt;
      return name == "Add" ? *a + *b : name == "Sub" ? *a - *b : *a * *b;
    }
    if (name == "SMul" && n == 2) {
      auto a = arg(0);
      if (!a || !e.arg(1).get_sort().is_real() || !scalar_only(e.arg(1))) return std::nullopt;
      return *a * e.arg(1);
    }
    if ((name == "Sigmoid" || name == "Tanh" || name == "Erf") && n == 1) {
      auto a = arg(0);
      if (!a) return std::nullopt;
      auto it = funs_.find(name);
      if (it == funs_.end()) it = funs_.emplace(name, c_.function(("ew!" + name).c_str(), c_.real_sort(), c_.real_sort())).first;
      return it->second(*a);
    }
    // Const(fill, shape, dtype, value): a uniform constant; only rank 0 (shape nil), which does
    // not change the broadcast shape.
    if (name == "Const" && n == 4) {
      const z3::expr fill = e.arg(0), shape = e.arg(1), value = e.arg(3);
      if (!fill.is_numeral() || fill.get_numeral_int() != 0) return std::nullopt;
      if (!shape.is_app() || shape.num_args() != 0 || shape.decl().name().str() != "nil") return std::nullopt;
      if (!value.get_sort().is_real() || !scalar_only(value)) return std::nullopt;
      return value;
    }
    return std::nullopt;
  }

 private:
  // A real-valued term free of tensors (a numeral, or a rule's scalar variable).
  static bool scalar_only(const z3::expr& e) {
    if (!e.is_app()) return false;
    if (!e.get_sort().is_real() && !e.get_sort().is_int() && !e.get_sort().is_bool()) return false;
    for (unsigned k = 0; k < e.num_args(); ++k)
      if (!scalar_only(e.arg(k))) return false;
    return true;
  }

  z3::context& c_;
  std::map<std::string, z3::func_decl> funs_;
};

}  // namespace

LiftOutcome prove_elementwise(z3::context& c, const z3::expr& source, const z3::expr& target, double timeout_s,
                              const std::set<std::string>& positive, std::string* counterexample) {
  Lifter lifter(c);
  std::set<std::string> ls, lt;
  auto f = lifter.lift(source, ls);
  if (!f) return LiftOutcome::kNotElementwise;
  auto g = lifter.lift(target, lt);
  if (!g) return LiftOutcome::kNotElementwise;
  if (ls != lt) return LiftOutcome::kNotElementwise;  // the output shapes could differ
  z3::solver s(c);
  z3::params p(c);
  p.set("timeout", static_cast<unsigned>(std::max(1.0, timeout_s * 1000.0)));
  s.set(p);
  for (const auto& leaf : ls)
    if (positive.count(leaf)) s.add(c.real_const(("ew!" + leaf).c_str()) > 0);
  s.add(*f != *g);
  const auto verdict = s.check();
  if (verdict == z3::unsat) return LiftOutcome::kProved;
  if (verdict != z3::sat || lifter.used_functions()) return LiftOutcome::kNotProved;
  const z3::model m = s.get_model();
  std::string at;
  for (unsigned k = 0; k < m.num_consts(); ++k) {
    const z3::func_decl d = m.get_const_decl(k);
    std::string name = d.name().str();
    if (name.rfind("ew!", 0) == 0) name = name.substr(3) + " (every element)";
    at += (at.empty() ? "" : ", ") + name + " = " + m.get_const_interp(d).get_decimal_string(6);
  }
  if (counterexample) *counterexample = at;
  return LiftOutcome::kCounterexample;
}

}  // namespace rlflow::rules::prover
