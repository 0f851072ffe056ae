#pragma once
// Small integer/real expressions over pattern variables: rule parameters and conditions.
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::rules {

// Bound values while matching: tensor variables map to graph values, parameter variables ($name)
// to integer vectors or reals.
struct Bindings {
  std::map<std::string, ir::ValueRef> tensors;
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, double> reals;
};

// An expression is a literal, a variable, or a call. Calls:
//   dim(x, i)  shape(x)  rank(x)  add(a, b)  sub(a, b)  mul(a, b)  div(a, b)  max(a, b)
//   list(a, b, ...) (concatenates)  repeat(a, n)  at(a, i)  sum(a)  iota(n)  permute(v, p) = v[p[i]]
struct Expr {
  enum class Kind { kInts, kReal, kVar, kCall } kind = Kind::kInts;
  std::vector<int64_t> ints;
  double real = 0;
  std::string name;  // variable name or function name
  std::vector<Expr> args;

  static Expr Ints(std::vector<int64_t> v) { Expr e; e.kind = Kind::kInts; e.ints = std::move(v); return e; }
  static Expr Real(double v) { Expr e; e.kind = Kind::kReal; e.real = v; return e; }
  static Expr Var(std::string n) { Expr e; e.kind = Kind::kVar; e.name = std::move(n); return e; }
  static Expr Call(std::string f, std::vector<Expr> a) { Expr e; e.kind = Kind::kCall; e.name = std::move(f); e.args = std::move(a); return e; }
  bool operator==(const Expr&) const = default;

  std::string str() const;
  // Variables ($params and tensor names) this expression reads.
  void collect_vars(std::vector<std::string>* out) const;
};

// Evaluates to an integer vector (a scalar is a one-element vector).
Expected<std::vector<int64_t>> eval_ints(const Expr& e, const Bindings& b, const ir::Graph& g);
Expected<double> eval_real(const Expr& e, const Bindings& b, const ir::Graph& g);

bool is_known_function(const std::string& name);

}  // namespace rlflow::rules
