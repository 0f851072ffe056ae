// Rule -> proof obligations. Tensor variables become constants of sort T, $parameters constants
// of sort Int / L / Real (by the field that binds them), pattern nodes applications of the
// operator symbols. Source fields a rule leaves open become fresh constants shared with the
// target nodes that are `like` them. Assumptions: the rule's conditions, the well-formedness of
// every source and target node, equal output types (the applier checks them), and exactness of
// the integer divisions the rule's expressions perform. What cannot be modelled is left
// unconstrained (a fresh constant), which can only make a proof fail, never succeed wrongly.
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>

#include "prover_internal.h"

namespace rlflow::rules::prover {

namespace {

using ir::OpKind;
using z3::expr;

enum class FieldKind { kScalar, kList, kReal };

FieldKind field_kind(OpKind k, const std::string& f) {
  if (is_real_field(k, f)) return FieldKind::kReal;
  static const std::set<std::string> lists = {"strides", "pads", "dilations", "kernel", "perm", "shape",
                                              "axes",    "sizes", "starts",   "ends",   "steps"};
  return lists.count(f) ? FieldKind::kList : FieldKind::kScalar;
}

// An integer vector: known elements, or an opaque list term when the length is not known.
struct IVal {
  std::vector<expr> elems;
  std::optional<expr> list;
  bool known() const { return !list.has_value(); }
};

bool numeral(const expr& e, int64_t* v) {
  if (!e.is_numeral()) return false;
  return Z3_get_numeral_int64(e.ctx(), e, v);
}

std::pair<std::string, int> split_ref(const std::string& s) {
  auto colon = s.find(':');
  if (colon == std::string::npos) return {s, 0};
  return {s.substr(0, colon), std::stoi(s.substr(colon + 1))};
}

bool is_param(const std::string& v) { return !v.empty() && v[0] == '$'; }

struct NodeVals {
  const PatternNode* pn = nullptr;
  bool source = true;
  std::vector<expr> ins;
  std::map<std::string, IVal> ints;
  std::map<std::string, expr> reals;
  std::map<int, expr> outs;
  bool wf_done = false;
};

class Translator {
 public:
  Translator(const Signature& sig, const Rule& r) : S(sig), r_(r), c(sig.ctx()) {}

  Query run() {
    bind_source_params();
    for (const auto& pn : r_.source.nodes) {
      auto& n = src_[pn.id];
      n.pn = &pn;
      n.source = true;
      for (const auto& in : pn.inputs) n.ins.push_back(resolve(in, true));
      for (const auto& [field, e] : pn.params) set_field(n, field, e);
      output(n, 0);
    }
    for (const auto& pn : r_.target.nodes) {
      auto& n = tgt_[pn.id];
      n.pn = &pn;
      n.source = false;
      for (const auto& in : pn.inputs) n.ins.push_back(resolve(in, false));
      for (const auto& [field, e] : pn.params) set_field(n, field, e);
      output(n, 0);
    }
    for (const auto& cond : r_.conditions) condition(cond);
    for (const auto& [s, t] : r_.outputs) {
      expr a = resolve(s, true), b = resolve(t, false);
      assume("output types of " + s + " and " + t + " agree (the applier checks them)", S.shape(a) == S.shape(b));
      q_.goals.push_back({s + " -> " + t, a, b});
    }
    return std::move(q_);
  }

 private:
  void note(const std::string& s) {
    for (const auto& n : q_.notes)
      if (n == s) return;
    q_.notes.push_back(s);
  }
  void assume(const std::string& what, const expr& f) { q_.assumptions.emplace_back(what, f); }

  expr tensor(const std::string& name) {
    auto it = tvars_.find(name);
    if (it != tvars_.end()) return it->second;
    expr t = c.constant(name.c_str(), S.T());
    tvars_.emplace(name, t);
    return t;
  }

  IVal fresh_ints(const std::string& name, FieldKind k) {
    if (k == FieldKind::kScalar) return IVal{{c.int_const(name.c_str())}, std::nullopt};
    return IVal{{}, c.constant(name.c_str(), S.L())};
  }

  expr to_list(const IVal& v) { return v.known() ? S.list(v.elems) : *v.list; }

  expr len(const IVal& v) { return v.known() ? c.int_val(static_cast<int64_t>(v.elems.size())) : S.len(*v.list); }

  std::optional<expr> scalar(const IVal& v) {
    if (v.known()) {
      if (v.elems.size() == 1) return v.elems[0];
      return std::nullopt;
    }
    assume("a list used as a scalar has one element", S.len(*v.list) == 1);
    return S.nth(*v.list, c.int_val(0));
  }

  expr infinity(bool positive) { return c.real_const(positive ? "+inf" : "-inf"); }

  // ---- rule expressions ----

  std::optional<IVal> eval_ints(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kInts: {
        IVal v;
        for (auto x : e.ints) v.elems.push_back(c.int_val(x));
        return v;
      }
      case Expr::Kind::kReal: return std::nullopt;
      case Expr::Kind::kVar: {
        auto it = ivars_.find(e.name);
        if (it == ivars_.end()) return std::nullopt;
        return it->second;
      }
      case Expr::Kind::kCall: break;
    }
    const std::string& f = e.name;
    if (f == "dim" || f == "shape" || f == "rank") {
      if (e.args.empty() || e.args[0].kind != Expr::Kind::kVar || is_param(e.args[0].name)) return std::nullopt;
      expr t = tensor(e.args[0].name);
      if (f == "shape") return IVal{{}, S.shape(t)};
      if (f == "rank") return IVal{{S.rank(t)}, std::nullopt};
      if (e.args.size() != 2) return std::nullopt;
      auto iv = eval_ints(e.args[1]);
      if (!iv) return std::nullopt;
      auto i = scalar(*iv);
      if (!i) return std::nullopt;
      int64_t k = 0;
      expr idx = numeral(*i, &k) ? (k < 0 ? S.rank(t) + c.int_val(k) : *i) : z3::ite(*i < 0, *i + S.rank(t), *i);
      assume("dim(" + e.args[0].name + ", i) has i in range", idx >= 0 && idx < S.rank(t));
      return IVal{{S.dim(t, idx)}, std::nullopt};
    }
    std::vector<IVal> a;
    for (const auto& arg : e.args) {
      auto v = eval_ints(arg);
      if (!v) return std::nullopt;
      a.push_back(std::move(*v));
    }
    if (f == "list") {
      bool all_known = true;
      for (const auto& v : a) all_known = all_known && v.known();
      if (all_known) {
        IVal out;
        for (const auto& v : a) out.elems.insert(out.elems.end(), v.elems.begin(), v.elems.end());
        return out;
      }
      expr l = S.nil();
      for (size_t i = a.size(); i-- > 0;) l = S.apply("lappend", {to_list(a[i]), l});
      return IVal{{}, l};
    }
    if (f == "sum") {
      if (a.size() != 1) return std::nullopt;
      if (!a[0].known()) return IVal{{S.apply("lsum", {*a[0].list})}, std::nullopt};
      expr s = c.int_val(0);
      for (const auto& x : a[0].elems) s = s + x;
      return IVal{{s.simplify()}, std::nullopt};
    }
    if (f == "repeat") {
      int64_t n = 0;
      if (a.size() != 2 || !a[0].known() || !a[1].known() || a[1].elems.size() != 1 || !numeral(a[1].elems[0], &n) || n < 0) return std::nullopt;
      IVal out;
      for (int64_t k = 0; k < n; ++k) out.elems.insert(out.elems.end(), a[0].elems.begin(), a[0].elems.end());
      return out;
    }
    if (f == "iota") {
      if (a.size() != 1) return std::nullopt;
      auto n = scalar(a[0]);
      if (!n) return std::nullopt;
      int64_t k = 0;
      if (numeral(*n, &k) && k >= 0) {
        IVal out;
        for (int64_t i = 0; i < k; ++i) out.elems.push_back(c.int_val(i));
        return out;
      }
      assume("iota's argument is not negative", *n >= 0);
      return IVal{{}, S.apply("iota", {*n})};
    }
    if (f == "permute") {  // permute(v, p)[i] = v[p[i]]
      if (a.size() != 2) return std::nullopt;
      if (!a[1].known()) return IVal{{}, S.apply("permute", {to_list(a[0]), *a[1].list})};
      IVal out;
      for (const auto& pi : a[1].elems) {
        int64_t k = 0;
        if (a[0].known() && numeral(pi, &k) && k >= 0 && k < static_cast<int64_t>(a[0].elems.size())) {
          out.elems.push_back(a[0].elems[static_cast<size_t>(k)]);
        } else {
          assume("permutation index in range", pi >= 0 && pi < len(a[0]));
          out.elems.push_back(S.nth(to_list(a[0]), pi));
        }
      }
      return out;
    }
    if (f == "at") {
      if (a.size() != 2) return std::nullopt;
      auto i = scalar(a[1]);
      if (!i) return std::nullopt;
      int64_t k = 0;
      if (a[0].known() && numeral(*i, &k)) {
        const auto n = static_cast<int64_t>(a[0].elems.size());
        if (k < 0) k += n;
        if (k < 0 || k >= n) return std::nullopt;
        return IVal{{a[0].elems[static_cast<size_t>(k)]}, std::nullopt};
      }
      expr n = len(a[0]);
      expr idx = z3::ite(*i < 0, *i + n, *i);
      assume("at(v, i) has i in range", idx >= 0 && idx < n);
      return IVal{{S.nth(to_list(a[0]), idx)}, std::nullopt};
    }
    if (a.size() != 2 || !a[0].known() || !a[1].known()) return std::nullopt;
    const size_t n = std::max(a[0].elems.size(), a[1].elems.size());
    if ((a[0].elems.size() != n && a[0].elems.size() != 1) || (a[1].elems.size() != n && a[1].elems.size() != 1)) return std::nullopt;
    IVal out;
    for (size_t i = 0; i < n; ++i) {
      expr x = a[0].elems[a[0].elems.size() == 1 ? 0 : i], y = a[1].elems[a[1].elems.size() == 1 ? 0 : i];
      if (f == "add") out.elems.push_back((x + y).simplify());
      else if (f == "sub") out.elems.push_back((x - y).simplify());
      else if (f == "mul") out.elems.push_back((x * y).simplify());
      else if (f == "max") out.elems.push_back(z3::ite(x >= y, x, y).simplify());
      else if (f == "div") {
        int64_t xv = 0, yv = 0;
        if (numeral(x, &xv) && numeral(y, &yv) && yv != 0 && xv % yv == 0) {
          out.elems.push_back(c.int_val(xv / yv));
        } else {
          // The evaluator rejects inexact divisions, so where the rule applies the quotient is exact.
          expr qv = c.int_const(("div!" + std::to_string(fresh_++)).c_str());
          assume("integer division in the rule is exact", y != 0 && x == y * qv);
          out.elems.push_back(qv);
        }
      } else {
        return std::nullopt;
      }
    }
    return out;
  }

  std::optional<expr> eval_real(const Expr& e) {
    if (e.kind == Expr::Kind::kReal) {
      if (std::isinf(e.real)) return infinity(e.real > 0);
      if (std::isnan(e.real)) return std::nullopt;
      return real_value(c, e.real);
    }
    if (e.kind == Expr::Kind::kVar) {
      auto it = rvars_.find(e.name);
      if (it != rvars_.end()) return it->second;
    }
    auto v = eval_ints(e);
    if (!v) return std::nullopt;
    auto s = scalar(*v);
    if (!s) return std::nullopt;
    return z3::to_real(*s);
  }

  // ---- pattern nodes ----

  // A $parameter binds at its first plain use in a source field; its sort follows that field.
  void bind_source_params() {
    for (const auto& pn : r_.source.nodes)
      for (const auto& [field, e] : pn.params) {
        if (e.kind != Expr::Kind::kVar || !is_param(e.name) || ivars_.count(e.name) || rvars_.count(e.name)) continue;
        const auto k = field_kind(pn.kind, field);
        if (k == FieldKind::kReal) rvars_.emplace(e.name, c.real_const(e.name.c_str()));
        else ivars_.emplace(e.name, fresh_ints(e.name, k));
      }
  }

  void set_field(NodeVals& n, const std::string& field, const Expr& e) {
    const auto k = field_kind(n.pn->kind, field);
    const std::string where = (n.source ? "source" : "target") + std::string(" node '") + n.pn->id + "' field " + field;
    if (k == FieldKind::kReal) {
      auto v = eval_real(e);
      if (!v) {
        note(where + " = " + e.str() + " is not modelled");
        v = c.real_const((n.pn->id + "." + field + "!" + std::to_string(fresh_++)).c_str());
      }
      n.reals.insert_or_assign(field, *v);
      return;
    }
    auto v = eval_ints(e);
    if (!v) {
      note(where + " = " + e.str() + " is not modelled");
      v = fresh_ints(n.pn->id + "." + field + "!" + std::to_string(fresh_++), k);
    }
    n.ints.insert_or_assign(field, *v);
  }

  NodeVals* like_of(NodeVals& n) {
    if (n.source || n.pn->like.empty()) return nullptr;
    auto it = src_.find(n.pn->like);
    return it == src_.end() ? nullptr : &it->second;
  }

  IVal get_ints(NodeVals& n, const std::string& field) {
    auto it = n.ints.find(field);
    if (it != n.ints.end()) return it->second;
    IVal v;
    if (auto* l = like_of(n)) {
      v = get_ints(*l, field);
    } else if (!n.source && n.pn->kind == OpKind::kConstant && field == "dtype") {
      v = IVal{{c.int_val(0)}, std::nullopt};
    } else {
      if (!n.source) note("target node '" + n.pn->id + "' has no value for field " + field);
      v = fresh_ints(n.pn->id + "." + field, field_kind(n.pn->kind, field));
    }
    n.ints.emplace(field, v);
    return v;
  }

  expr get_scalar(NodeVals& n, const std::string& field) {
    auto s = scalar(get_ints(n, field));
    if (s) return *s;
    note("field " + field + " of '" + n.pn->id + "' is not a scalar");
    return c.int_const((n.pn->id + "." + field + "!" + std::to_string(fresh_++)).c_str());
  }

  expr get_list(NodeVals& n, const std::string& field) { return to_list(get_ints(n, field)); }

  expr get_real(NodeVals& n, const std::string& field) {
    auto it = n.reals.find(field);
    if (it != n.reals.end()) return it->second;
    expr v = c.real_val(0);
    if (auto* l = like_of(n)) {
      v = get_real(*l, field);
    } else if (n.source) {
      v = c.real_const((n.pn->id + "." + field).c_str());
    } else {  // the applier's defaults (params_from_fields)
      const auto k = n.pn->kind;
      if (field == "alpha" || field == "beta" || (k == OpKind::kScalarMul && field == "value")) v = c.real_val(1);
      else if (field == "epsilon") v = real_value(c, 1e-5);
      else if (field == "min") v = infinity(false);
      else if (field == "max") v = infinity(true);
      else v = c.real_val(0);
    }
    n.reals.emplace(field, v);
    return v;
  }

  expr resolve(const std::string& ref, bool source) {
    auto [id, k] = split_ref(ref);
    auto& nodes = source ? src_ : tgt_;
    auto it = nodes.find(id);
    if (it != nodes.end()) return output(it->second, k);
    if (!source && tgt_.count(id) == 0 && r_.target.index_of(id) >= 0) note("target node '" + id + "' is used before it is defined");
    return tensor(id);
  }

  expr in(NodeVals& n, size_t i) {
    if (i < n.ins.size()) return n.ins[i];
    note("node '" + n.pn->id + "' lacks input " + std::to_string(i));
    return c.constant((n.pn->id + ".in" + std::to_string(i) + "!" + std::to_string(fresh_++)).c_str(), S.T());
  }

  expr output(NodeVals& n, int k) {
    auto it = n.outs.find(k);
    if (it != n.outs.end()) return it->second;
    expr t = build(n, k);
    n.outs.emplace(k, t);
    well_formed(n, k, t);
    return t;
  }

  expr activation(const expr& a, const expr& y) {
    int64_t v = -1;
    if (numeral(a, &v)) {
      if (v == 0) return y;
      if (v == 1) return S.apply("Relu", {y});
      if (v == 2) return S.apply("Sigmoid", {y});
      if (v == 3) return S.apply("Tanh", {y});
    }
    return S.apply("Act", {a, y});
  }

  expr build(NodeVals& n, int k) {
    const auto kind = n.pn->kind;
    const std::string op(ir::op_name(kind));
    if (k != 0 && kind != OpKind::kSplit) note("node '" + n.pn->id + "' has only one output");
    auto unary = [&](const char* f) { return S.apply(f, {in(n, 0)}); };
    auto binary = [&](const char* f) { return S.apply(f, {in(n, 0), in(n, 1)}); };
    switch (kind) {
      case OpKind::kConv: {
        expr y = S.apply("Conv", {in(n, 0), in(n, 1), get_list(n, "strides"), get_list(n, "pads"), get_list(n, "dilations"), get_scalar(n, "group")});
        if (n.ins.size() > 2) y = S.apply("BiasAdd", {y, n.ins[2]});
        return activation(get_scalar(n, "act"), y);
      }
      case OpKind::kMatMul: return binary("MatMul");
      case OpKind::kGemm: {
        auto maybe_t = [&](const expr& x, const expr& flag) {
          expr t = S.apply("Transpose", {x, S.list({c.int_val(1), c.int_val(0)})});
          int64_t v = 0;
          if (numeral(flag, &v)) return v ? t : x;
          return z3::ite(flag != 0, t, x);
        };
        expr y = S.apply("MatMul", {maybe_t(in(n, 0), get_scalar(n, "trans_a")), maybe_t(in(n, 1), get_scalar(n, "trans_b"))});
        y = S.apply("SMul", {y, get_real(n, "alpha")});
        if (n.ins.size() > 2) y = S.apply("Add", {y, S.apply("SMul", {n.ins[2], get_real(n, "beta")})});
        return y;
      }
      case OpKind::kAdd: return binary("Add");
      case OpKind::kSub: return binary("Sub");
      case OpKind::kMul: return binary("Mul");
      case OpKind::kDiv: return binary("Div");
      case OpKind::kPow: return binary("Pow");
      case OpKind::kSqrt: return unary("Sqrt");
      case OpKind::kRelu: return unary("Relu");
      case OpKind::kSigmoid: return unary("Sigmoid");
      case OpKind::kTanh: return unary("Tanh");
      case OpKind::kErf: return unary("Erf");
      case OpKind::kGlobalAveragePool: return unary("GAP");
      case OpKind::kClip: return S.apply("Clip", {in(n, 0), get_real(n, "min"), get_real(n, "max")});
      case OpKind::kScalarMul: return S.apply("SMul", {in(n, 0), get_real(n, "value")});
      case OpKind::kCast: return S.apply("Cast", {in(n, 0), get_scalar(n, "to")});
      case OpKind::kSoftmax: return S.apply("Softmax", {in(n, 0), get_scalar(n, "axis")});
      case OpKind::kLayerNorm:
        if (n.ins.size() > 2) return S.apply("LayerNorm3", {in(n, 0), in(n, 1), in(n, 2), get_scalar(n, "axis"), get_real(n, "epsilon")});
        return S.apply("LayerNorm", {in(n, 0), in(n, 1), get_scalar(n, "axis"), get_real(n, "epsilon")});
      case OpKind::kRMSNorm: return S.apply("RMSNorm", {in(n, 0), in(n, 1), get_scalar(n, "axis"), get_real(n, "epsilon")});
      case OpKind::kAttention:
        if (n.ins.size() > 3)
          return S.apply("Attention4", {in(n, 0), in(n, 1), in(n, 2), in(n, 3), get_scalar(n, "is_causal"), get_real(n, "scale"),
                                        get_scalar(n, "q_num_heads"), get_scalar(n, "kv_num_heads")});
        return S.apply("Attention", {in(n, 0), in(n, 1), in(n, 2), get_scalar(n, "is_causal"), get_real(n, "scale"),
                                     get_scalar(n, "q_num_heads"), get_scalar(n, "kv_num_heads")});
      case OpKind::kBatchNorm:
        return S.apply("BatchNorm", {in(n, 0), in(n, 1), in(n, 2), in(n, 3), in(n, 4), get_real(n, "epsilon")});
      case OpKind::kReduceMean: return S.apply("ReduceMean", {in(n, 0), get_list(n, "axes"), get_scalar(n, "keepdims")});
      case OpKind::kMaxPool:
      case OpKind::kAveragePool:
        return S.apply(kind == OpKind::kMaxPool ? "MaxPool" : "AvgPool", {in(n, 0), get_list(n, "kernel"), get_list(n, "strides"), get_list(n, "pads"),
                                                                          get_scalar(n, "ceil_mode"), get_scalar(n, "count_include_pad")});
      case OpKind::kConcat: {
        if (n.ins.empty()) break;
        expr ax = get_scalar(n, "axis");
        expr y = n.ins[0];
        for (size_t i = 1; i < n.ins.size(); ++i) y = S.apply("Concat", {y, n.ins[i], ax});
        return y;
      }
      case OpKind::kSplit: return S.apply("Split", {in(n, 0), get_scalar(n, "axis"), get_list(n, "sizes"), c.int_val(k)});
      case OpKind::kTranspose: return S.apply("Transpose", {in(n, 0), get_list(n, "perm")});
      case OpKind::kReshape: return S.apply("Reshape", {in(n, 0), get_list(n, "shape")});
      case OpKind::kFlatten: return S.apply("Flatten", {in(n, 0), get_scalar(n, "axis")});
      case OpKind::kPad: return S.apply("Pad", {in(n, 0), get_list(n, "pads"), get_scalar(n, "mode"), get_real(n, "value")});
      case OpKind::kSlice:
        return S.apply("Slice", {in(n, 0), get_list(n, "starts"), get_list(n, "ends"), get_list(n, "axes"), get_list(n, "steps")});
      case OpKind::kGather: return S.apply("Gather", {in(n, 0), in(n, 1), get_scalar(n, "axis")});
      case OpKind::kSqueeze: return S.apply("Squeeze", {in(n, 0), get_list(n, "axes")});
      case OpKind::kUnsqueeze: return S.apply("Unsqueeze", {in(n, 0), get_list(n, "axes")});
      case OpKind::kEnlarge: return S.apply("Enlarge", {in(n, 0), get_list(n, "kernel")});
      case OpKind::kConstant:
        return S.apply("Const", {get_scalar(n, "fill"), get_list(n, "shape"), get_scalar(n, "dtype"), get_real(n, "value")});
      default:  // not modelled: the rule's node is a fresh constant, so no proof can lean on it
        break;
    }
    note("operator " + op + " of node '" + n.pn->id + "' is not modelled");
    return c.constant((n.pn->id + "!" + std::to_string(fresh_++)).c_str(), S.T());
  }

  expr forall_int(const std::function<expr(const expr&)>& body, const std::vector<std::function<expr(const expr&)>>& patterns) {
    expr i = c.int_const(("i!" + std::to_string(fresh_++)).c_str());
    std::vector<Z3_pattern> pats;
    std::vector<expr> terms;  // keeps the pattern terms alive
    for (const auto& p : patterns) {
      terms.push_back(p(i));
      Z3_ast t = terms.back();
      pats.push_back(Z3_mk_pattern(c, 1, &t));
      Z3_inc_ref(c, Z3_pattern_to_ast(c, pats.back()));
    }
    Z3_app bound = (Z3_app)(Z3_ast)i;
    expr b = body(i);
    Z3_ast q = Z3_mk_forall_const(c, 0, 1, &bound, static_cast<unsigned>(pats.size()), pats.data(), b);
    expr result(c, q);
    for (auto p : pats) Z3_dec_ref(c, Z3_pattern_to_ast(c, p));
    c.check_error();
    return result;
  }

  // What holds of a node because it exists in a valid graph (source) or type-checked (target).
  void well_formed(NodeVals& n, int k, const expr& out) {
    const std::string what = (n.source ? "source" : "target") + std::string(" node '") + n.pn->id + "' is well-formed";
    const auto kind = n.pn->kind;
    if (kind == OpKind::kSplit) {
      assume(what, c.int_val(k) < S.len(get_list(n, "sizes")));
    }
    if (n.wf_done) return;
    n.wf_done = true;
    switch (kind) {
      case OpKind::kConv: {
        if (n.ins.size() < 2) return;
        expr x = n.ins[0], w = n.ins[1];
        expr r = S.rank(x);
        expr g = get_scalar(n, "group");
        expr f = S.rank(w) == r && r >= 3 && S.len(get_list(n, "strides")) == r - 2 && S.len(get_list(n, "pads")) == 2 * (r - 2) &&
                 S.len(get_list(n, "dilations")) == r - 2 && g >= 1;
        int64_t gv = 0;
        if (numeral(g, &gv)) f = f && S.dim(w, c.int_val(1)) * g == S.dim(x, c.int_val(1));
        if (n.ins.size() > 2) f = f && S.shape(n.ins[2]) == S.list({S.dim(w, c.int_val(0))});
        assume(what, f);
        return;
      }
      case OpKind::kMatMul: {
        if (n.ins.size() < 2) return;
        expr a = n.ins[0], b = n.ins[1];
        assume(what, S.rank(a) >= 1 && S.rank(b) >= 1 &&
                         z3::implies(S.rank(a) >= 2 && S.rank(b) >= 2, S.dim(a, S.rank(a) - 1) == S.dim(b, S.rank(b) - 2)));
        return;
      }
      case OpKind::kConcat: {
        if (n.ins.size() < 2) return;
        expr ax = get_scalar(n, "axis");
        expr a = n.ins[0];
        for (size_t j = 1; j < n.ins.size(); ++j) {
          expr b = n.ins[j];
          assume(what, S.rank(a) == S.rank(b) && ax >= 0 && ax < S.rank(a));
          assume(what, forall_int([&](const expr& i) { return z3::implies(i >= 0 && i < S.rank(a) && i != ax, S.dim(a, i) == S.dim(b, i)); },
                                  {[&](const expr& i) { return S.dim(a, i); }, [&](const expr& i) { return S.dim(b, i); }}));
        }
        return;
      }
      case OpKind::kSplit: {
        expr x = in(n, 0), ax = get_scalar(n, "axis");
        IVal sz = get_ints(n, "sizes");
        expr f = ax >= 0 && ax < S.rank(x) && S.apply("lsum", {to_list(sz)}) == S.dim(x, ax);
        for (const auto& e : sz.elems) f = f && e >= 0;
        assume(what, f);
        return;
      }
      case OpKind::kTranspose: assume(what, S.len(get_list(n, "perm")) == S.rank(in(n, 0))); return;
      case OpKind::kEnlarge: {
        expr w = in(n, 0);
        IVal kv = get_ints(n, "kernel");
        expr f = S.rank(w) == 2 + len(kv);
        for (size_t i = 0; i < kv.elems.size(); ++i) {
          expr d = S.dim(w, c.int_val(static_cast<int64_t>(2 + i)));
          f = f && kv.elems[i] >= d && z3::mod(kv.elems[i] - d, 2) == 0;
        }
        assume(what, f);
        return;
      }
      case OpKind::kBatchNorm: {
        if (n.ins.size() < 5) return;
        expr x = n.ins[0];
        expr f = S.rank(x) >= 2;
        for (size_t i = 1; i < 5; ++i) f = f && S.shape(n.ins[i]) == S.list({S.dim(x, c.int_val(1))});
        assume(what, f);
        return;
      }
      default:  // nothing beyond the shape axioms
        return;
    }
    (void)out;
  }

  void condition(const Condition& cond) {
    const std::string what = "condition " + cond.lhs.str() + " " + cond.cmp + " " + cond.rhs.str();
    auto l = eval_ints(cond.lhs), rr = eval_ints(cond.rhs);
    if (!l || !rr) {
      note(what + " is not modelled (dropped)");
      return;
    }
    if (cond.cmp == "eq" || cond.cmp == "ne") {
      expr eq = c.bool_val(false);
      if (l->known() && rr->known()) {
        if (l->elems.size() == rr->elems.size()) {
          eq = c.bool_val(true);
          for (size_t i = 0; i < l->elems.size(); ++i) eq = eq && l->elems[i] == rr->elems[i];
        }
      } else {
        eq = to_list(*l) == to_list(*rr);
      }
      assume(what, cond.cmp == "eq" ? eq : !eq);
      return;
    }
    // lt / le compare lexicographically, like std::vector.
    if (!l->known() || !rr->known()) {
      note(what + " is not modelled (dropped)");
      return;
    }
    const auto& a = l->elems;
    const auto& b = rr->elems;
    // lex(i): a[i..] < b[i..] (strict) or <= (non-strict)
    std::function<expr(size_t)> lex = [&](size_t i) -> expr {
      if (i == a.size() || i == b.size()) {
        if (cond.cmp == "lt") return c.bool_val(a.size() - i < b.size() - i);
        return c.bool_val(a.size() - i <= b.size() - i);
      }
      return a[i] < b[i] || (a[i] == b[i] && lex(i + 1));
    };
    assume(what, lex(0));
  }

  const Signature& S;
  const Rule& r_;
  z3::context& c;
  Query q_;
  std::map<std::string, expr> tvars_;
  std::map<std::string, IVal> ivars_;
  std::map<std::string, expr> rvars_;
  std::map<std::string, NodeVals> src_, tgt_;
  int fresh_ = 0;
};

// 2^n as a decimal string.
std::string pow2(int n) {
  std::string d = "1";
  for (int k = 0; k < n; ++k) {
    int carry = 0;
    for (size_t i = d.size(); i-- > 0;) {
      int v = (d[i] - '0') * 2 + carry;
      d[i] = static_cast<char>('0' + v % 10);
      carry = v / 10;
    }
    if (carry) d.insert(d.begin(), static_cast<char>('0' + carry));
  }
  return d;
}

}  // namespace

expr real_value(z3::context& c, double v) {
  if (v == 0 || !std::isfinite(v)) return c.real_val(0);
  int exp = 0;
  double m = std::frexp(v, &exp);  // v = m 2^exp, 0.5 <= |m| < 1
  auto mant = static_cast<int64_t>(std::ldexp(m, 53));
  exp -= 53;
  while (mant % 2 == 0) {
    mant /= 2;
    ++exp;
  }
  std::string num = std::to_string(mant);
  if (exp >= 0) return (c.real_val(num.c_str()) * c.real_val(pow2(exp).c_str())).simplify();
  return c.real_val((num + "/" + pow2(-exp)).c_str());
}

Query translate(const Signature& sig, const Rule& r) { return Translator(sig, r).run(); }

}  // namespace rlflow::rules::prover
