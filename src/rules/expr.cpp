#include "rlflow/rules/expr.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

namespace rlflow::rules {

namespace {

const std::set<std::string>& functions() {
  static const std::set<std::string> f = {"dim", "shape", "rank", "add", "sub", "mul", "div", "max", "list", "repeat", "at", "sum", "iota", "permute"};
  return f;
}

Error err(const Expr& e, const std::string& why) { return Error::bad_input("expression " + e.str() + ": " + why); }

Expected<const ir::TensorType*> tensor_type(const Expr& e, const Bindings& b, const ir::Graph& g) {
  if (e.kind != Expr::Kind::kVar) return err(e, "expects a tensor variable");
  auto it = b.tensors.find(e.name);
  if (it == b.tensors.end()) return err(e, "tensor variable '" + e.name + "' is not bound");
  return &g.type(it->second);
}

}  // namespace

bool is_known_function(const std::string& name) { return functions().count(name) > 0; }

std::string Expr::str() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kInts:
      if (ints.size() == 1) os << ints[0];
      else {
        os << '[';
        for (size_t i = 0; i < ints.size(); ++i) os << (i ? "," : "") << ints[i];
        os << ']';
      }
      break;
    case Kind::kReal: os << real; break;
    case Kind::kVar: os << name; break;
    case Kind::kCall:
      os << name << '(';
      for (size_t i = 0; i < args.size(); ++i) os << (i ? ", " : "") << args[i].str();
      os << ')';
  }
  return os.str();
}

void Expr::collect_vars(std::vector<std::string>* out) const {
  if (kind == Kind::kVar) out->push_back(name);
  for (const auto& a : args) a.collect_vars(out);
}

Expected<std::vector<int64_t>> eval_ints(const Expr& e, const Bindings& b, const ir::Graph& g) {
  switch (e.kind) {
    case Expr::Kind::kInts: return e.ints;
    case Expr::Kind::kReal: return err(e, "a real where integers are expected");
    case Expr::Kind::kVar: {
      auto it = b.ints.find(e.name);
      if (it == b.ints.end()) return err(e, "parameter '" + e.name + "' is not bound");
      return it->second;
    }
    case Expr::Kind::kCall: break;
  }
  const std::string& f = e.name;
  if (f == "dim" || f == "shape" || f == "rank") {
    if (e.args.empty()) return err(e, "missing tensor argument");
    auto t = tensor_type(e.args[0], b, g);
    if (!t) return t.error();
    if (f == "shape") return (*t)->shape;
    if (f == "rank") return std::vector<int64_t>{(*t)->rank()};
    if (e.args.size() != 2) return err(e, "dim(x, i) takes two arguments");
    auto i = eval_ints(e.args[1], b, g);
    if (!i) return i.error();
    if (i->size() != 1) return err(e, "dim index must be a scalar");
    int64_t k = (*i)[0] < 0 ? (*i)[0] + (*t)->rank() : (*i)[0];
    if (k < 0 || k >= (*t)->rank()) return err(e, "dim index out of range");
    return std::vector<int64_t>{(*t)->shape[static_cast<size_t>(k)]};
  }
  std::vector<std::vector<int64_t>> a;
  for (const auto& arg : e.args) {
    auto v = eval_ints(arg, b, g);
    if (!v) return v.error();
    a.push_back(std::move(*v));
  }
  if (f == "list") {
    std::vector<int64_t> out;
    for (auto& v : a) out.insert(out.end(), v.begin(), v.end());
    return out;
  }
  if (f == "sum") {
    if (a.size() != 1) return err(e, "sum takes one argument");
    return std::vector<int64_t>{std::accumulate(a[0].begin(), a[0].end(), int64_t{0})};
  }
  if (f == "repeat") {
    if (a.size() != 2 || a[1].size() != 1 || a[1][0] < 0) return err(e, "repeat(v, n) needs a scalar n >= 0");
    std::vector<int64_t> out;
    for (int64_t k = 0; k < a[1][0]; ++k) out.insert(out.end(), a[0].begin(), a[0].end());
    return out;
  }
  if (f == "iota") {
    if (a.size() != 1 || a[0].size() != 1 || a[0][0] < 0) return err(e, "iota(n) needs a scalar n >= 0");
    std::vector<int64_t> out(static_cast<size_t>(a[0][0]));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  if (f == "permute") {  // permute(v, p)[i] = v[p[i]]
    if (a.size() != 2) return err(e, "permute(v, p) takes two arguments");
    std::vector<int64_t> out;
    for (auto i : a[1]) {
      if (i < 0 || i >= static_cast<int64_t>(a[0].size())) return err(e, "permutation index out of range");
      out.push_back(a[0][static_cast<size_t>(i)]);
    }
    return out;
  }
  if (f == "at") {
    if (a.size() != 2 || a[1].size() != 1) return err(e, "at(v, i) needs a scalar i");
    int64_t i = a[1][0] < 0 ? a[1][0] + static_cast<int64_t>(a[0].size()) : a[1][0];
    if (i < 0 || i >= static_cast<int64_t>(a[0].size())) return err(e, "index out of range");
    return std::vector<int64_t>{a[0][static_cast<size_t>(i)]};
  }
  if (a.size() != 2) return err(e, f + " takes two arguments");
  // Element-wise with scalar broadcasting.
  const size_t n = std::max(a[0].size(), a[1].size());
  if ((a[0].size() != n && a[0].size() != 1) || (a[1].size() != n && a[1].size() != 1)) return err(e, "length mismatch");
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = a[0][a[0].size() == 1 ? 0 : i], y = a[1][a[1].size() == 1 ? 0 : i];
    if (f == "add") out[i] = x + y;
    else if (f == "sub") out[i] = x - y;
    else if (f == "mul") out[i] = x * y;
    else if (f == "max") out[i] = std::max(x, y);
    else if (f == "div") {
      if (y == 0 || x % y != 0) return err(e, "inexact division");
      out[i] = x / y;
    } else return err(e, "unknown function '" + f + "'");
  }
  return out;
}

Expected<double> eval_real(const Expr& e, const Bindings& b, const ir::Graph& g) {
  if (e.kind == Expr::Kind::kReal) return e.real;
  if (e.kind == Expr::Kind::kVar) {
    auto it = b.reals.find(e.name);
    if (it != b.reals.end()) return it->second;
  }
  auto v = eval_ints(e, b, g);
  if (!v) return v.error();
  if (v->size() != 1) return err(e, "a real must be a scalar");
  return static_cast<double>((*v)[0]);
}

}  // namespace rlflow::rules
