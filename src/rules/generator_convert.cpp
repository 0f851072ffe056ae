// Turning a candidate pair into a Rule: patterns with literal parameters, and the shape
// conditions that make the rule safe on graphs of other sizes than the world's.
//
// Shapes are generalised symbolically. Every dim of every variable (and of every Constant op) is
// a slot; a dim of a computed tensor is an ordered sum of products of slots (a Concat adds, the
// order is kept so a Split can cut at a term boundary). Typing both graphs, and equating the
// shapes of the outputs the rule maps onto each other, yields equalities; they are unified term
// by term (a sufficient condition, never a weaker one), fixed dims (kernel sizes, broadcast 1s)
// are pinned. Equalities the source's own typing already enforces at match time (Conv channels,
// MatMul inner dims, Concat off-axis dims, BatchNorm parameters) need no condition; everything
// else becomes one. A pair whose equalities do not hold for the world's own sizes, or that would
// need a size no source variable provides, is not generalisable and is dropped.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "rlflow/rules/generator.h"

namespace rlflow::rules::gen {

using ir::OpKind;

namespace {

struct Term {
  int64_t coef = 1;
  std::vector<int> slots;  // a product
  bool operator==(const Term&) const = default;
  bool operator<(const Term& o) const { return slots != o.slots ? slots < o.slots : coef < o.coef; }
};
using SDim = std::vector<Term>;  // an ordered sum
using SShape = std::vector<SDim>;

SDim literal(int64_t v) { return {Term{v, {}}}; }
SDim slot_dim(int s) { return {Term{1, {s}}}; }

class Unifier {
 public:
  int add_slot() {
    parent_.push_back(static_cast<int>(parent_.size()));
    pin_.emplace_back();
    return static_cast<int>(parent_.size()) - 1;
  }
  int find(int s) const {
    while (parent_[static_cast<size_t>(s)] != s) s = parent_[static_cast<size_t>(s)];
    return s;
  }
  std::optional<int64_t> pinned(int s) const { return pin_[static_cast<size_t>(find(s))]; }
  bool pin(int s, int64_t v) {
    auto& p = pin_[static_cast<size_t>(find(s))];
    if (p && *p != v) return false;
    p = v;
    return true;
  }
  bool unite(int a, int b) {
    const int ra = find(a), rb = find(b);
    if (ra == rb) return true;
    auto pa = pin_[static_cast<size_t>(ra)], pb = pin_[static_cast<size_t>(rb)];
    if (pa && pb && *pa != *pb) return false;
    parent_[static_cast<size_t>(rb)] = ra;
    if (!pa) pin_[static_cast<size_t>(ra)] = pb;
    return true;
  }
  // Slots replaced by their roots, pinned roots folded into the coefficient; order kept.
  SDim subst(const SDim& d) const {
    SDim out;
    for (const auto& t : d) {
      Term n{t.coef, {}};
      for (int s : t.slots) {
        if (auto p = pinned(s)) n.coef *= *p;
        else n.slots.push_back(find(s));
      }
      std::sort(n.slots.begin(), n.slots.end());
      out.push_back(std::move(n));
    }
    return out;
  }
  // Sorted, like terms merged, zero terms dropped: equal iff equal as polynomials.
  SDim canonical(const SDim& d) const {
    SDim s = subst(d);
    std::sort(s.begin(), s.end());
    SDim out;
    for (auto& t : s) {
      if (!out.empty() && out.back().slots == t.slots) out.back().coef += t.coef;
      else out.push_back(t);
    }
    std::erase_if(out, [](const Term& t) { return t.coef == 0; });
    return out;
  }
  bool same(const SDim& a, const SDim& b) const { return canonical(a) == canonical(b); }
  bool unify(const SDim& a, const SDim& b) {
    if (same(a, b)) return true;
    const SDim sa = subst(a), sb = subst(b);
    if (sa.size() != sb.size()) return false;
    for (size_t i = 0; i < sa.size(); ++i) {
      const auto &x = sa[i], &y = sb[i];
      if (x.slots.size() == y.slots.size()) {
        if (x.coef != y.coef) return false;
        for (size_t k = 0; k < x.slots.size(); ++k)
          if (!unite(x.slots[k], y.slots[k])) return false;
      } else if (x.slots.empty() && y.slots.size() == 1 && y.coef != 0 && x.coef % y.coef == 0) {
        if (!pin(y.slots[0], x.coef / y.coef)) return false;
      } else if (y.slots.empty() && x.slots.size() == 1 && x.coef != 0 && y.coef % x.coef == 0) {
        if (!pin(x.slots[0], y.coef / x.coef)) return false;
      } else {
        return false;
      }
    }
    return same(a, b);
  }

 private:
  std::vector<int> parent_;
  std::vector<std::optional<int64_t>> pin_;
};

struct SlotInfo {
  int var = -1;  // owning variable, or -1 for a Constant op's dim
  int dim = -1;
  int64_t value = 0;  // the world's size
};

// Symbolic typing of a pair.
class Shapes {
 public:
  explicit Shapes(const World& w) : w_(w) {
    for (size_t v = 0; v < w.vars.size(); ++v) {
      SShape s;
      for (size_t d = 0; d < w.vars[v].shape.size(); ++d) {
        const int id = new_slot({static_cast<int>(v), static_cast<int>(d), w.vars[v].shape[d]});
        if (w.vars[v].fixed[d]) all_.pin(id, w.vars[v].shape[d]);
        s.push_back(slot_dim(id));
      }
      var_shapes_.push_back(std::move(s));
    }
  }

  // Types g; `source` says whether its equalities are enforced when the source matches.
  Status type(const GGraph& g, bool source, std::vector<SShape>* tensors) {
    *tensors = var_shapes_;
    source_ = source;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const auto& n = g.nodes[i];
      std::vector<const SShape*> in;
      for (int t : n.inputs) in.push_back(&(*tensors)[static_cast<size_t>(t)]);
      auto out = infer(n, in, source, static_cast<int>(i));
      if (!out) return out.error();
      for (auto& s : *out) tensors->push_back(std::move(s));
    }
    return {};
  }

  Status equal_shapes(const SShape& a, const SShape& b) {
    if (a.size() != b.size()) return fail("outputs of different ranks");
    for (size_t d = 0; d < a.size(); ++d) RLFLOW_TRY_STATUS(eq(a[d], b[d], false));
    return {};
  }

  // Every slot's class must hold the world's sizes (a relation true only by accident fails).
  Status consistent() const {
    std::map<int, int64_t> value;
    for (size_t s = 0; s < slots_.size(); ++s) {
      const int r = all_.find(static_cast<int>(s));
      const int64_t v = slots_[s].value;
      if (auto p = all_.pinned(r); p && *p != v) return fail("a size is pinned to another value than the world's");
      auto [it, fresh] = value.emplace(r, v);
      if (!fresh && it->second != v) return fail("equated sizes differ in the world");
    }
    return {};
  }

  const Unifier& all() const { return all_; }
  const Unifier& exact() const { return src_; }
  const std::vector<SlotInfo>& slots() const { return slots_; }
  const std::map<std::pair<bool, int>, std::vector<SDim>>& node_dims() const { return node_dims_; }

  static Error fail(const std::string& why) { return Error::unsupported("shapes: " + why); }

 private:
  int new_slot(SlotInfo info) {
    slots_.push_back(info);
    src_.add_slot();
    return all_.add_slot();
  }

  static bool single_slot(const SDim& d) { return d.size() == 1 && d[0].coef == 1 && d[0].slots.size() == 1; }

  Status eq(const SDim& a, const SDim& b, bool enforced_by_typing) {
    if (!all_.unify(a, b)) return fail("sizes cannot be equated term by term");
    if (enforced_by_typing && source_ && single_slot(a) && single_slot(b)) src_.unite(a[0].slots[0], b[0].slots[0]);
    return {};
  }

  std::optional<int64_t> literal_value(const SDim& d) const {
    auto c = all_.canonical(d);
    if (c.empty()) return 0;
    if (c.size() == 1 && c[0].slots.empty()) return c[0].coef;
    return std::nullopt;
  }

  int64_t world_value(const Term& t) const {
    int64_t v = t.coef;
    for (int s : t.slots) v *= slots_[static_cast<size_t>(s)].value;
    return v;
  }

  Expected<SShape> broadcast(const SShape& a, const SShape& b) {
    const size_t n = std::max(a.size(), b.size());
    SShape out(n);
    for (size_t i = 0; i < n; ++i) {
      const SDim da = i < n - a.size() ? literal(1) : a[i - (n - a.size())];
      const SDim db = i < n - b.size() ? literal(1) : b[i - (n - b.size())];
      if (literal_value(da) == 1) out[i] = db;
      else if (literal_value(db) == 1) out[i] = da;
      else {
        RLFLOW_TRY_STATUS(eq(da, db, false));  // equal, not broadcast: a condition
        out[i] = da;
      }
    }
    return out;
  }

  Expected<std::vector<SShape>> infer(const GNode& n, const std::vector<const SShape*>& in, bool source, int index) {
    auto one = [](SShape s) { return std::vector<SShape>{std::move(s)}; };
    switch (n.kind) {
      case OpKind::kConv: {
        const auto& p = std::get<ir::ConvParams>(n.params);
        const SShape &x = *in[0], &k = *in[1];
        if (x.size() != 4 || k.size() != 4 || p.group != 1) return fail("only 2-D group-1 convolutions");
        RLFLOW_TRY_STATUS(eq(x[1], k[1], true));
        SShape out{x[0], k[0], {}, {}};
        for (size_t i = 0; i < 2; ++i) {
          auto kv = literal_value(k[2 + i]);
          if (!kv || p.strides[i] != 1 || p.dilations[i] != 1 || p.pads[i] + p.pads[2 + i] != *kv - 1)
            return fail("only 'same' stride-1 convolutions with fixed kernels");
          out[2 + i] = x[2 + i];
        }
        if (in.size() == 3) RLFLOW_TRY_STATUS(eq((*in[2])[0], k[0], true));
        return one(out);
      }
      case OpKind::kMatMul: {
        const SShape &a = *in[0], &b = *in[1];
        if (a.size() < 2 || b.size() < 2) return fail("matmul of vectors");
        RLFLOW_TRY_STATUS(eq(a.back(), b[b.size() - 2], true));
        auto batch = broadcast(SShape(a.begin(), a.end() - 2), SShape(b.begin(), b.end() - 2));
        if (!batch) return batch.error();
        SShape out = *batch;
        out.push_back(a[a.size() - 2]);
        out.push_back(b.back());
        return one(out);
      }
      case OpKind::kAdd:
      case OpKind::kMul: {
        auto out = broadcast(*in[0], *in[1]);
        if (!out) return out.error();
        return one(*out);
      }
      case OpKind::kRelu:
      case OpKind::kScalarMul: return one(*in[0]);
      case OpKind::kMaxPool:
      case OpKind::kAveragePool: {
        const auto& p = std::get<ir::PoolParams>(n.params);
        for (size_t i = 0; i < p.kernel.size(); ++i)
          if (p.strides[i] != 1 || p.pads[i] + p.pads[p.kernel.size() + i] != p.kernel[i] - 1) return fail("only 'same' stride-1 pooling");
        return one(*in[0]);
      }
      case OpKind::kBatchNorm:
        for (size_t i = 1; i < 5; ++i) RLFLOW_TRY_STATUS(eq((*in[0])[1], (*in[i])[0], true));
        return one(*in[0]);
      case OpKind::kConcat: {
        const auto ax = static_cast<size_t>(std::get<ir::AxisParams>(n.params).axis);
        SShape out = *in[0];
        for (size_t k = 1; k < in.size(); ++k) {
          if (in[k]->size() != out.size()) return fail("concat of different ranks");
          for (size_t d = 0; d < out.size(); ++d)
            if (d != ax) RLFLOW_TRY_STATUS(eq(out[d], (*in[k])[d], true));
          out[ax].insert(out[ax].end(), (*in[k])[ax].begin(), (*in[k])[ax].end());
        }
        return one(out);
      }
      case OpKind::kSplit: {
        const auto& p = std::get<ir::SplitParams>(n.params);
        const auto ax = static_cast<size_t>(p.axis);
        const SDim& whole = (*in[0])[ax];
        std::vector<SShape> outs;
        std::vector<SDim> sizes;
        size_t t = 0;
        for (auto want : p.sizes) {
          SDim part;
          int64_t got = 0;
          while (got < want && t < whole.size()) {
            got += world_value(whole[t]);
            part.push_back(whole[t++]);
          }
          if (got != want) return fail("a split that does not fall between concatenated parts");
          SShape o = *in[0];
          o[ax] = part;
          sizes.push_back(part);
          outs.push_back(std::move(o));
        }
        node_dims_[{source, index}] = sizes;
        return outs;
      }
      case OpKind::kTranspose: {
        const auto& perm = std::get<ir::TransposeParams>(n.params).perm;
        SShape out;
        for (auto d : perm) out.push_back((*in[0])[static_cast<size_t>(d)]);
        return one(out);
      }
      case OpKind::kEnlarge: {
        const auto& k = std::get<ir::EnlargeParams>(n.params).kernel;
        SShape out = *in[0];
        for (size_t i = 0; i < k.size(); ++i) {
          if (!literal_value(out[2 + i])) return fail("enlarging a kernel of unknown size");
          out[2 + i] = literal(k[i]);
        }
        return one(out);
      }
      case OpKind::kConstant: {
        const auto& p = std::get<ir::ConstantParams>(n.params);
        const ConstSpec* spec = nullptr;
        for (const auto& c : w_.ops.constants)
          if (c.params == p) spec = &c;
        SShape out;
        std::vector<SDim> dims;
        for (size_t d = 0; d < p.shape.size(); ++d) {
          if (spec && spec->fixed[d]) {
            out.push_back(literal(p.shape[d]));
          } else {
            out.push_back(slot_dim(new_slot({-1, static_cast<int>(d), p.shape[d]})));
          }
          dims.push_back(out.back());
        }
        node_dims_[{source, index}] = dims;
        return one(out);
      }
      default:  // not in the generator's op set
        break;
    }
    return fail(std::string("no symbolic typing for ") + std::string(ir::op_name(n.kind)));
  }

  const World& w_;
  Unifier all_, src_;
  bool source_ = true;
  std::vector<SlotInfo> slots_;
  std::vector<SShape> var_shapes_;
  std::map<std::pair<bool, int>, std::vector<SDim>> node_dims_;  // (source?, node) -> Split sizes / Constant shape
};

Expr dim_of(const std::string& v, int d) { return Expr::Call("dim", {Expr::Var(v), Expr::Ints({d})}); }

// Renders sizes as expressions over the source's variables.
class Renderer {
 public:
  Renderer(const World& w, const Shapes& s, const std::set<int>& source_vars) : w_(w), s_(s) {
    // Representative of every class: the first dim of the first source variable in it.
    for (size_t i = 0; i < s.slots().size(); ++i) {
      const auto& info = s.slots()[i];
      if (info.var < 0 || !source_vars.count(info.var)) continue;
      rep_.emplace(s.all().find(static_cast<int>(i)), static_cast<int>(i));
    }
  }

  Expected<Expr> render(const SDim& d) const {
    int64_t constant = 0;
    std::vector<Expr> terms;
    for (const auto& t : d) {
      int64_t coef = t.coef;
      std::vector<Expr> factors;
      for (int sl : t.slots) {
        if (auto p = s_.all().pinned(sl)) {
          coef *= *p;
          continue;
        }
        auto it = rep_.find(s_.all().find(sl));
        if (it == rep_.end()) return Shapes::fail("a size no source variable provides");
        const auto& info = s_.slots()[static_cast<size_t>(it->second)];
        factors.push_back(dim_of(w_.vars[static_cast<size_t>(info.var)].name, info.dim));
      }
      if (factors.empty()) {
        constant += coef;
        continue;
      }
      Expr e = factors[0];
      for (size_t k = 1; k < factors.size(); ++k) e = Expr::Call("mul", {e, factors[k]});
      if (coef != 1) e = Expr::Call("mul", {Expr::Ints({coef}), e});
      terms.push_back(e);
    }
    if (terms.empty()) return Expr::Ints({constant});
    Expr e = terms[0];
    for (size_t k = 1; k < terms.size(); ++k) e = Expr::Call("add", {e, terms[k]});
    if (constant != 0) e = Expr::Call("add", {e, Expr::Ints({constant})});
    return e;
  }

  Expected<Expr> render_list(const std::vector<SDim>& dims) const {
    std::vector<Expr> parts;
    std::vector<int64_t> lits;
    bool all_literal = true;
    for (const auto& d : dims) {
      auto e = render(d);
      if (!e) return e.error();
      all_literal = all_literal && e->kind == Expr::Kind::kInts;
      if (e->kind == Expr::Kind::kInts) lits.push_back(e->ints[0]);
      parts.push_back(std::move(*e));
    }
    if (all_literal) return Expr::Ints(lits);
    return Expr::Call("list", std::move(parts));
  }

 private:
  const World& w_;
  const Shapes& s_;
  std::map<int, int> rep_;  // class root -> representative slot
};

std::string ref(const std::string& prefix, const World& w, const GGraph& g, int tensor) {
  auto [node, k] = g.producer(w, tensor);
  if (node < 0) return w.vars[static_cast<size_t>(k)].name;
  std::string s = prefix + std::to_string(node);
  return k == 0 ? s : s + ":" + std::to_string(k);
}

std::set<int> vars_of(const World& w, const GGraph& g) {
  std::set<int> v;
  for (const auto& n : g.nodes)
    for (int t : n.inputs)
      if (t < static_cast<int>(w.vars.size())) v.insert(t);
  return v;
}

bool has_kind(const GGraph& g, OpKind k) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [&](const GNode& n) { return n.kind == k; });
}

// Whether a rule's Conv and pooling parameters can become variables: every Conv (source and
// target) has the same strides, pads and unit dilations, no op depends on a kernel's exact size
// (Enlarge, identity kernels), and every kernel variable has the same size; likewise for pools.
struct Generality {
  bool conv = false, pool = false;
  std::set<int> kernels;  // kernel variables (4-D weights with fixed spatial dims) of the source
};

Generality generality(const World& w, const Directed& d, const std::set<int>& source_vars, bool wanted) {
  Generality g;
  if (!wanted) return g;
  std::vector<const GNode*> convs, pools;
  bool size_bound = false;
  for (const GGraph* gr : {&d.source, &d.target})
    for (const auto& n : gr->nodes) {
      if (n.kind == OpKind::kConv) convs.push_back(&n);
      if (n.kind == OpKind::kMaxPool || n.kind == OpKind::kAveragePool) pools.push_back(&n);
      if (n.kind == OpKind::kEnlarge) size_bound = true;
      if (n.kind == OpKind::kConstant && std::get<ir::ConstantParams>(n.params).shape.size() == 4) size_bound = true;
    }
  if (!convs.empty() && !size_bound) {
    const auto& p0 = std::get<ir::ConvParams>(convs[0]->params);
    g.conv = p0.group == 1 && p0.dilations == std::vector<int64_t>{1, 1};
    for (const auto* n : convs) {
      const auto& p = std::get<ir::ConvParams>(n->params);
      g.conv = g.conv && p.strides == p0.strides && p.pads == p0.pads && p.dilations == p0.dilations && p.group == p0.group;
    }
    for (int v : source_vars) {
      const auto& spec = w.vars[static_cast<size_t>(v)];
      if (spec.constant && spec.shape.size() == 4 && spec.fixed[2] && spec.fixed[3]) g.kernels.insert(v);
    }
    for (int v : g.kernels) {
      const auto& a = w.vars[static_cast<size_t>(v)].shape;
      const auto& b = w.vars[static_cast<size_t>(*g.kernels.begin())].shape;
      g.conv = g.conv && a[2] == b[2] && a[3] == b[3];
    }
    g.conv = g.conv && !g.kernels.empty();
  }
  if (!pools.empty()) {
    g.pool = true;
    const auto& p0 = std::get<ir::PoolParams>(pools[0]->params);
    for (const auto* n : pools) g.pool = g.pool && std::get<ir::PoolParams>(n->params) == p0;
  }
  return g;
}

}  // namespace

Expected<Rule> to_rule(const World& w, const Directed& d, const ConvertOptions& o) {
  Shapes shapes(w);
  std::vector<SShape> src, tgt;
  RLFLOW_TRY_STATUS(shapes.type(d.source, true, &src));
  RLFLOW_TRY_STATUS(shapes.type(d.target, false, &tgt));
  for (const auto& [s, t] : d.outputs)
    RLFLOW_TRY_STATUS(shapes.equal_shapes(src[static_cast<size_t>(s)], tgt[static_cast<size_t>(t)]));
  RLFLOW_TRY_STATUS(shapes.consistent());

  const auto source_vars = vars_of(w, d.source);
  Renderer render(w, shapes, source_vars);
  Rule r;
  r.name = "generated";
  r.provenance = "generated";
  for (int v : source_vars) {
    const auto& spec = w.vars[static_cast<size_t>(v)];
    if (spec.constant || spec.positive) r.vars[spec.name] = TensorVar{spec.constant, spec.positive};
  }

  const bool scalar_var = o.general_scalars && has_kind(d.source, OpKind::kScalarMul);
  const bool eps_var = has_kind(d.source, OpKind::kBatchNorm);
  const Generality gen = generality(w, d, source_vars, o.general_params);
  auto pattern = [&](const GGraph& g, bool source, Pattern* p) -> Status {
    const std::string prefix = source ? "s" : "t";
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const auto& n = g.nodes[i];
      PatternNode pn;
      pn.id = prefix + std::to_string(i);
      pn.kind = n.kind;
      for (int t : n.inputs) pn.inputs.push_back(ref(prefix, w, g, t));
      const auto fields = params_to_fields(n.kind, n.params);
      for (const auto& [f, v] : fields.ints) pn.params[f] = Expr::Ints(v);
      for (const auto& [f, v] : fields.reals) pn.params[f] = Expr::Real(v);
      auto dims = shapes.node_dims().find({source, static_cast<int>(i)});
      if (n.kind == OpKind::kSplit || n.kind == OpKind::kConstant) {
        auto e = render.render_list(dims->second);
        if (!e) return e.error();
        pn.params[n.kind == OpKind::kSplit ? "sizes" : "shape"] = *e;
      }
      if (n.kind == OpKind::kScalarMul && scalar_var) pn.params["value"] = Expr::Var("$s");
      if (n.kind == OpKind::kConv && gen.conv) {
        pn.params["strides"] = Expr::Var("$cs");
        pn.params["pads"] = Expr::Var("$cp");
      }
      if ((n.kind == OpKind::kMaxPool || n.kind == OpKind::kAveragePool) && gen.pool) {
        pn.params["kernel"] = Expr::Var("$pk");
        pn.params["strides"] = Expr::Var("$ps");
        pn.params["pads"] = Expr::Var("$pp");
      }
      if (n.kind == OpKind::kBatchNorm && eps_var) pn.params["epsilon"] = Expr::Var("$e");
      p->nodes.push_back(std::move(pn));
    }
    return {};
  };
  RLFLOW_TRY_STATUS(pattern(d.source, true, &r.source));
  RLFLOW_TRY_STATUS(pattern(d.target, false, &r.target));
  for (const auto& [s, t] : d.outputs) r.outputs.push_back({ref("s", w, d.source, s), ref("t", w, d.target, t)});

  // Conditions: ranks, fixed sizes, and equalities the source's typing does not enforce.
  for (int v : source_vars) {
    const auto& spec = w.vars[static_cast<size_t>(v)];
    r.conditions.push_back({"eq", Expr::Call("rank", {Expr::Var(spec.name)}), Expr::Ints({static_cast<int64_t>(spec.shape.size())})});
  }
  const auto& all = shapes.all();
  const auto& exact = shapes.exact();
  std::map<int, std::vector<int>> groups;  // class root -> one slot per exactly-equal group
  std::set<int> seen_exact;
  for (size_t i = 0; i < shapes.slots().size(); ++i) {
    const auto& info = shapes.slots()[i];
    if (info.var < 0 || !source_vars.count(info.var)) continue;
    if (!seen_exact.insert(exact.find(static_cast<int>(i))).second) continue;
    groups[all.find(static_cast<int>(i))].push_back(static_cast<int>(i));
  }
  auto dim_expr = [&](int slot) {
    const auto& info = shapes.slots()[static_cast<size_t>(slot)];
    return dim_of(w.vars[static_cast<size_t>(info.var)].name, info.dim);
  };
  std::vector<int> free_roots;
  auto kernel_dim = [&](int slot) {
    const auto& info = shapes.slots()[static_cast<size_t>(slot)];
    return gen.conv && info.var >= 0 && gen.kernels.count(info.var) && info.dim >= 2;
  };
  for (const auto& [root, members] : groups) {
    if (auto p = all.pinned(root)) {
      for (int m : members)
        if (!kernel_dim(m)) r.conditions.push_back({"eq", dim_expr(m), Expr::Ints({*p})});
      continue;
    }
    free_roots.push_back(root);
    for (size_t k = 1; k < members.size(); ++k) r.conditions.push_back({"eq", dim_expr(members[0]), dim_expr(members[k])});
  }

  if (gen.conv) {  // every kernel has the size of the first one
    const std::string& k0 = w.vars[static_cast<size_t>(*gen.kernels.begin())].name;
    for (int v : gen.kernels)
      if (v != *gen.kernels.begin())
        for (int dd : {2, 3}) r.conditions.push_back({"eq", dim_of(w.vars[static_cast<size_t>(v)].name, dd), dim_of(k0, dd)});
  }

  // Instances: the world's sizes, then distinct random sizes per class (never 1, which would
  // broadcast). With general conv/pool parameters, each instance also takes the next of a few
  // configurations, 'same' and not, strided and not, square and not.
  struct Config {
    std::vector<int64_t> kernel, pads, strides;
  };
  // 'same' first (the world's own case), then strided, unpadded, non-square and asymmetrically
  // padded ones: a rule that needs any of those properties fails here and stays literal.
  static const std::vector<Config> conv_configs = {{{3, 3}, {1, 1, 1, 1}, {1, 1}}, {{1, 1}, {0, 0, 0, 0}, {2, 2}},
                                                   {{3, 3}, {0, 0, 0, 0}, {1, 1}}, {{1, 3}, {0, 1, 0, 1}, {1, 1}},
                                                   {{3, 3}, {0, 0, 1, 1}, {2, 2}}};
  static const std::vector<Config> pool_configs = {{{3, 3}, {1, 1, 1, 1}, {1, 1}}, {{3, 3}, {1, 1, 1, 1}, {2, 2}},
                                                   {{2, 2}, {0, 0, 0, 0}, {2, 2}}, {{1, 3}, {0, 1, 0, 1}, {1, 1}},
                                                   {{3, 3}, {0, 0, 1, 1}, {2, 2}}};
  const int wanted = gen.conv || gen.pool ? std::max<int>(o.instances, static_cast<int>(conv_configs.size())) : o.instances;
  std::mt19937_64 rng(o.seed);
  // Rules get three instances: a scalar above 1, one below -1 and one in (0, 1), so that a
  // general-scalar rule that holds only for some signs or magnitudes fails its own check.
  const std::vector<double> scalars = {3.0, -2.0, 0.5, 1.75, -0.5};
  const std::vector<double> epsilons = {1e-5, 1e-3, 0.1, 1e-2, 0.5};
  std::set<std::map<std::string, ir::Shape>> distinct;
  for (int k = 0, attempts = 0; k < wanted && attempts < 50; ++attempts) {
    std::map<int, int64_t> value;
    std::vector<int64_t> pool{2, 3, 4, 5, 6, 7, 8, 9};
    if (gen.conv || gen.pool) pool = {5, 6, 7, 8, 9, 10, 11, 12};  // room for 5x5 kernels and strides
    std::shuffle(pool.begin(), pool.end(), rng);
    for (size_t c = 0; c < free_roots.size(); ++c) {
      int64_t v = pool[c % pool.size()];
      if (k == 0) {
        for (size_t i = 0; i < shapes.slots().size(); ++i)
          if (all.find(static_cast<int>(i)) == free_roots[c]) v = shapes.slots()[i].value;
      }
      value[free_roots[c]] = v;
    }
    Instance inst;
    for (int v : source_vars) {
      const auto& spec = w.vars[static_cast<size_t>(v)];
      ir::Shape s;
      for (size_t dd = 0; dd < spec.shape.size(); ++dd) {
        int slot = -1;
        for (size_t i = 0; i < shapes.slots().size(); ++i)
          if (shapes.slots()[i].var == v && shapes.slots()[i].dim == static_cast<int>(dd)) slot = static_cast<int>(i);
        const int root = all.find(slot);
        auto p = all.pinned(root);
        s.push_back(p ? *p : value.at(root));
      }
      if (gen.conv && gen.kernels.count(v)) {
        const auto& kernel = conv_configs[static_cast<size_t>(k) % conv_configs.size()].kernel;
        s[2] = kernel[0];
        s[3] = kernel[1];
      }
      inst.shapes[spec.name] = s;
    }
    if (gen.conv) {
      const auto& c = conv_configs[static_cast<size_t>(k) % conv_configs.size()];
      inst.ints["$cs"] = c.strides;
      inst.ints["$cp"] = c.pads;
    }
    if (gen.pool) {
      const auto& c = pool_configs[static_cast<size_t>(k) % pool_configs.size()];
      inst.ints["$pk"] = c.kernel;
      inst.ints["$ps"] = c.strides;
      inst.ints["$pp"] = c.pads;
    }
    if (!distinct.insert(inst.shapes).second) continue;
    if (scalar_var) inst.reals["$s"] = scalars[static_cast<size_t>(k) % scalars.size()];
    if (eps_var) inst.reals["$e"] = epsilons[static_cast<size_t>(k) % epsilons.size()];
    r.instances.push_back(std::move(inst));
    ++k;
  }
  if (static_cast<int>(r.instances.size()) < wanted) return Shapes::fail("too few distinct shape instantiations");
  RLFLOW_TRY_STATUS(validate_rule(r));
  return r;
}

}  // namespace rlflow::rules::gen
