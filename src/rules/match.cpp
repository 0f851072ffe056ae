#include "rlflow/rules/match.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "rlflow/ir/shape_inference.h"

namespace rlflow::rules {

using ir::Graph;
using ir::NodeId;
using ir::OpKind;
using ir::ValueRef;

std::string Match::str() const {
  std::ostringstream os;
  os << rule << "@[";
  for (size_t i = 0; i < nodes.size(); ++i) os << (i ? "," : "") << nodes[i];
  os << ']';
  return os.str();
}

namespace detail {

struct Ref {
  int node = -1;  // pattern node index, or -1 for a tensor variable
  int index = 0;
  std::string var;
};

Ref parse_ref(const Pattern& p, const std::string& s) {
  auto colon = s.find(':');
  std::string id = colon == std::string::npos ? s : s.substr(0, colon);
  int k = colon == std::string::npos ? 0 : std::stoi(s.substr(colon + 1));
  int idx = p.index_of(id);
  if (idx >= 0) return {idx, k, {}};
  return {-1, 0, id};
}

struct State {
  std::vector<NodeId> placed;
  Bindings b;
  std::vector<std::vector<std::pair<int, ValueRef>>> pending;  // per pattern node: (output, required value)
};

}  // namespace detail

using detail::Ref;
using detail::State;
using detail::parse_ref;

// Everything about a rule's source pattern that does not depend on the graph: compiled once, when
// the library is loaded (RuleLibrary::reindex), not on every match.
struct CompiledPattern {
  std::vector<std::vector<Ref>> inputs;  // per source node
  std::vector<int> order;                // search order of source nodes
  std::set<std::pair<int, int>> mapped;  // (source node, output) pairs that the target replaces
  size_t source_nodes = 0, source_inputs = 0;  // what it was compiled from, to catch a stale form
  // Some source or target node computes (ir::moves_values_only is false for it): the rule then
  // applies only where the matched nodes compute in floating point.
  bool computes = false;

  explicit CompiledPattern(const Rule& r) {
    const auto& nodes = r.source.nodes;
    source_nodes = nodes.size();
    for (const auto* pat : {&r.source, &r.target})
      for (const auto& n : pat->nodes) computes = computes || !ir::moves_values_only(n.kind);
    for (const auto& n : nodes) source_inputs += n.inputs.size();
    for (const auto& n : nodes) {
      std::vector<Ref> refs;
      for (const auto& in : n.inputs) refs.push_back(parse_ref(r.source, in));
      inputs.push_back(std::move(refs));
    }
    for (const auto& [s, t] : r.outputs) {
      Ref ref = parse_ref(r.source, s);
      mapped.insert({ref.node, ref.index});
    }
    // Root first, then grow through edges: producers of placed inputs, consumers of placed
    // outputs, then nodes sharing a tensor variable with placed ones.
    std::vector<char> done(nodes.size(), 0);
    order.push_back(static_cast<int>(nodes.size()) - 1);
    done.back() = 1;
    while (order.size() < nodes.size()) {
      int pick = -1;
      for (int pass = 0; pass < 3 && pick < 0; ++pass) {
        for (size_t c = 0; c < nodes.size() && pick < 0; ++c) {
          if (done[c]) continue;
          for (int q : order) {
            bool linked = false;
            if (pass == 0)
              for (const auto& ref : inputs[static_cast<size_t>(q)]) linked = linked || ref.node == static_cast<int>(c);
            if (pass == 1)
              for (const auto& ref : inputs[c]) linked = linked || ref.node == q;
            if (pass == 2)
              for (const auto& ref : inputs[c])
                for (const auto& qr : inputs[static_cast<size_t>(q)]) linked = linked || (ref.node < 0 && qr.node < 0 && ref.var == qr.var);
            if (linked) {
              pick = static_cast<int>(c);
              break;
            }
          }
        }
      }
      if (pick < 0)  // disconnected pattern: continue with the latest remaining node
        for (size_t c = nodes.size(); c-- > 0;)
          if (!done[c]) {
            pick = static_cast<int>(c);
            break;
          }
      done[static_cast<size_t>(pick)] = 1;
      order.push_back(pick);
    }
  }

  bool fits(const Rule& r) const {
    size_t ins = 0;
    for (const auto& n : r.source.nodes) ins += n.inputs.size();
    return source_nodes == r.source.nodes.size() && source_inputs == ins;
  }
};

namespace {

// The rule's compiled pattern, or a fresh one when it has none (or one from before an edit).
struct PatternRef {
  std::shared_ptr<const CompiledPattern> own;
  const CompiledPattern* p;
  explicit PatternRef(const Rule& r) {
    if (r.compiled && r.compiled->fits(r)) {
      p = r.compiled.get();
    } else {
      own = std::make_shared<const CompiledPattern>(r);
      p = own.get();
    }
  }
};

class Matcher {
 public:
  Matcher(const GraphIndex& ix, const Rule& r, const CompiledPattern& c, RejectionCounts* rejections = nullptr)
      : g_(ix.graph), r_(r), c_(c), ix_(ix), uses_(ix.uses), rejections_(rejections) {}

  // Tries to place pattern node p on graph node gid; appends every consistent state.
  void place(int p, NodeId gid, const State& s, std::vector<State>* out) const {
    const auto& pn = r_.source.nodes[static_cast<size_t>(p)];
    const auto& node = g_.node(gid);
    if (node.kind != pn.kind || node.inputs.size() != pn.inputs.size()) return;
    for (auto other : s.placed)
      if (other == gid) return;
    State base = s;
    for (const auto& [k, v] : base.pending[static_cast<size_t>(p)])
      if (v.node != gid || v.index != k) return;
    if (!bind_params(pn, node, &base.b)) return;
    std::vector<std::vector<size_t>> perms = {{0, 1}};
    if (pn.inputs.size() != 2) {
      perms = {{}};
      for (size_t i = 0; i < pn.inputs.size(); ++i) perms[0].push_back(i);
    } else if (ir::is_commutative(pn.kind)) {
      perms.push_back({1, 0});
    }
    for (const auto& perm : perms) {
      State st = base;
      bool ok = true;
      for (size_t i = 0; i < pn.inputs.size() && ok; ++i) ok = unify(c_.inputs[static_cast<size_t>(p)][i], node.inputs[perm[i]], &st);
      if (!ok) continue;
      st.placed[static_cast<size_t>(p)] = gid;
      out->push_back(std::move(st));
      if (perms.size() > 1 && node.inputs[0] == node.inputs[1]) break;  // both orders give the same state
    }
  }

  // Checks that need every node placed: deferred expressions, conditions, symmetry, no escaping
  // interior values, and convexity (no path leaves the match and re-enters it). Returns why the
  // state is refused (kNone: accepted); the message goes to *detail only when one is asked for, so
  // that matching, which refuses many states, builds no strings.
  Rejection finish(const State& s, std::string* detail = nullptr) const {
    const auto& r = r_;
    auto refuse = [&](Rejection why, auto&& message) {
      if (detail) *detail = message();
      return why;
    };
    for (size_t p = 0; p < r.source.nodes.size(); ++p) {
      const auto& pn = r.source.nodes[p];
      bool deferred = false;
      for (const auto& [field, e] : pn.params) deferred = deferred || e.kind == Expr::Kind::kCall;
      if (!deferred) continue;
      const auto fields = params_to_fields(pn.kind, g_.node(s.placed[p]).params);
      for (const auto& [field, e] : pn.params) {
        if (e.kind != Expr::Kind::kCall) continue;
        bool same;
        if (is_real_field(pn.kind, field)) {
          auto v = eval_real(e, s.b, g_);
          same = v && fields.reals.at(field) == *v;
        } else {
          auto v = eval_ints(e, s.b, g_);
          same = v && fields.ints.at(field) == *v;
        }
        if (!same) return refuse(Rejection::kParamsDiffer, [&] { return "parameter " + field + " of '" + pn.id + "' differs"; });
      }
    }
    for (size_t p = 0; p < s.placed.size(); ++p)
      if (ix_.quantized[static_cast<size_t>(s.placed[p])])
        return refuse(Rejection::kQuantized, [&] { return "'" + r.source.nodes[p].id + "' reads or feeds a quantization op"; });
    if (c_.computes)
      for (size_t p = 0; p < s.placed.size(); ++p) {
        const auto& node = g_.node(s.placed[p]);
        if (ir::moves_values_only(node.kind)) continue;
        auto not_float = [](const ir::TensorType& t) { return !ir::is_float(t.dtype); };
        bool integer = std::any_of(node.outputs.begin(), node.outputs.end(), not_float);
        for (const auto& in : node.inputs) integer = integer || not_float(g_.type(in));
        if (integer)
          return refuse(Rejection::kNotFloat, [&] {
            return "'" + r.source.nodes[p].id + "' computes in a non-float type (rules are proved over the reals)";
          });
      }
    for (const auto& c : r.conditions) {
      auto l = eval_ints(c.lhs, s.b, g_), rr = eval_ints(c.rhs, s.b, g_);
      if (!l) return refuse(Rejection::kUnbound, [&] { return l.error().message; });
      if (!rr) return refuse(Rejection::kUnbound, [&] { return rr.error().message; });
      bool ok = c.cmp == "eq" ? *l == *rr : c.cmp == "ne" ? *l != *rr : c.cmp == "lt" ? *l < *rr : *l <= *rr;
      if (!ok)
        return refuse(Rejection::kCondition, [&] { return "condition " + c.lhs.str() + " " + c.cmp + " " + c.rhs.str() + " does not hold"; });
    }
    for (const auto& group : r.symmetric)
      for (size_t i = 1; i < group.size(); ++i)
        if (s.placed[static_cast<size_t>(r.source.index_of(group[i - 1]))] >= s.placed[static_cast<size_t>(r.source.index_of(group[i]))])
          return refuse(Rejection::kSymmetry, [] { return std::string("symmetric nodes out of order"); });
    std::set<NodeId> inside(s.placed.begin(), s.placed.end());
    for (size_t p = 0; p < s.placed.size(); ++p) {
      const auto gid = s.placed[p];
      for (size_t k = 0; k < g_.node(gid).outputs.size(); ++k) {
        if (c_.mapped.count({static_cast<int>(p), static_cast<int>(k)})) continue;
        const auto& outs = ix_.output_indices[static_cast<size_t>(gid)];
        if (std::find(outs.begin(), outs.end(), static_cast<int32_t>(k)) != outs.end())
          return refuse(Rejection::kEscapingValue, [&] { return "interior value of '" + r.source.nodes[p].id + "' is a graph output"; });
        for (const auto& u : uses_[static_cast<size_t>(gid)])
          if (g_.node(u.node).inputs[static_cast<size_t>(u.input_slot)].index == static_cast<int32_t>(k) && !inside.count(u.node))
            return refuse(Rejection::kEscapingValue,
                          [&] { return "interior value of '" + r.source.nodes[p].id + "' is used outside the match"; });
      }
    }
    if (s.placed.size() > 1) {
      const NodeId hi = *std::max_element(s.placed.begin(), s.placed.end());
      std::vector<NodeId> stack;
      std::set<NodeId> seen;
      for (auto gid : s.placed)
        for (const auto& u : uses_[static_cast<size_t>(gid)])
          if (!inside.count(u.node) && u.node < hi) stack.push_back(u.node);
      while (!stack.empty()) {
        NodeId n = stack.back();
        stack.pop_back();
        if (!seen.insert(n).second) continue;
        for (const auto& u : uses_[static_cast<size_t>(n)]) {
          if (inside.count(u.node))
            return refuse(Rejection::kCycle, [] { return std::string("a path leaves the match and re-enters it (the rewrite would form a cycle)"); });
          if (u.node < hi) stack.push_back(u.node);
        }
      }
    }
    return Rejection::kNone;
  }

  void search(size_t k, State s, std::vector<Match>* out, size_t limit) const {
    if (out->size() >= limit) return;
    const auto& r = r_;
    if (k == c_.order.size()) {
      const Rejection why = finish(s);
      if (why == Rejection::kNone)
        out->push_back(Match{r.name, s.placed});
      else if (rejections_)
        ++(*rejections_)[static_cast<size_t>(why)];
      return;
    }
    const int p = c_.order[k];
    for (NodeId cand : candidates(p, s)) {
      std::vector<State> next;
      place(p, cand, s, &next);
      for (auto& st : next) search(k + 1, std::move(st), out, limit);
    }
  }

  State empty_state() const {
    State s;
    s.placed.assign(r_.source.nodes.size(), -1);
    s.pending.resize(r_.source.nodes.size());
    return s;
  }

 private:
  std::vector<NodeId> candidates(int p, const State& s) const {
    const auto& pn = r_.source.nodes[static_cast<size_t>(p)];
    if (!s.pending[static_cast<size_t>(p)].empty()) return {s.pending[static_cast<size_t>(p)][0].second.node};
    // Consumers of an input already known.
    for (const auto& ref : c_.inputs[static_cast<size_t>(p)]) {
      std::optional<ValueRef> v;
      if (ref.node >= 0 && s.placed[static_cast<size_t>(ref.node)] >= 0) v = ValueRef{s.placed[static_cast<size_t>(ref.node)], ref.index};
      if (ref.node < 0) {
        auto it = s.b.tensors.find(ref.var);
        if (it != s.b.tensors.end()) v = it->second;
      }
      if (!v) continue;
      std::vector<NodeId> c;
      for (const auto& u : uses_[static_cast<size_t>(v->node)])
        if (g_.node(u.node).kind == pn.kind && g_.node(u.node).inputs[static_cast<size_t>(u.input_slot)] == *v &&
            (c.empty() || c.back() != u.node))
          c.push_back(u.node);
      return c;
    }
    return ix_.by_kind[static_cast<size_t>(pn.kind)];
  }

  bool unify(const Ref& ref, ValueRef v, State* s) const {
    if (ref.node >= 0) {
      if (v.index != ref.index) return false;
      NodeId placed = s->placed[static_cast<size_t>(ref.node)];
      if (placed >= 0) return placed == v.node;
      s->pending[static_cast<size_t>(ref.node)].push_back({ref.index, v});
      return true;
    }
    auto it = s->b.tensors.find(ref.var);
    if (it != s->b.tensors.end()) return it->second == v;
    auto spec = r_.vars.find(ref.var);
    // A constant variable takes a weight, or any value computed from weights alone (an enlarged
    // or concatenated kernel a previous rewrite made): it folds at export all the same, and
    // accepting it lets multi-step sequences such as enlarge-then-merge go through.
    if (spec != r_.vars.end() && spec->second.constant && !ix_.constant[static_cast<size_t>(v.node)])
      return false;
    s->b.tensors[ref.var] = v;
    return true;
  }

  bool bind_params(const PatternNode& pn, const ir::Node& node, Bindings* b) const {
    if (pn.params.empty()) return true;
    const auto fields = params_to_fields(pn.kind, node.params);
    for (const auto& [field, e] : pn.params) {
      const bool real = is_real_field(pn.kind, field);
      if (real) {
        auto it = fields.reals.find(field);
        if (it == fields.reals.end()) return false;
        if (e.kind == Expr::Kind::kReal && e.real != it->second) return false;
        if (e.kind == Expr::Kind::kInts && (e.ints.size() != 1 || static_cast<double>(e.ints[0]) != it->second)) return false;
        if (e.kind == Expr::Kind::kVar) {
          auto [pos, inserted] = b->reals.emplace(e.name, it->second);
          if (!inserted && pos->second != it->second) return false;
        }
      } else {
        auto it = fields.ints.find(field);
        if (it == fields.ints.end()) return false;
        if (e.kind == Expr::Kind::kInts && e.ints != it->second) return false;
        if (e.kind == Expr::Kind::kVar) {
          auto [pos, inserted] = b->ints.emplace(e.name, it->second);
          if (!inserted && pos->second != it->second) return false;
        }
      }
    }
    return true;
  }

  const Graph& g_;
  const Rule& r_;
  const CompiledPattern& c_;
  const GraphIndex& ix_;
  const std::vector<std::vector<ir::Use>>& uses_;
  RejectionCounts* rejections_;
};

bool match_less(const Match& a, const Match& b) {
  const NodeId ma = *std::max_element(a.nodes.begin(), a.nodes.end());
  const NodeId mb = *std::max_element(b.nodes.begin(), b.nodes.end());
  if (ma != mb) return ma < mb;
  return a.nodes < b.nodes;
}

}  // namespace

std::shared_ptr<const CompiledPattern> compile_pattern(const Rule& r) {
  if (r.source.nodes.empty()) return nullptr;
  return std::make_shared<const CompiledPattern>(r);
}

GraphIndex::GraphIndex(const Graph& g)
    : graph(g), uses(g.consumers()), by_kind(ir::kNumOpKinds), output_indices(g.size()), constant(ir::constant_nodes(g)),
      quantized(ir::quantization_boundary(g)) {
  for (size_t i = 0; i < g.size(); ++i) by_kind[static_cast<size_t>(g.node(static_cast<NodeId>(i)).kind)].push_back(static_cast<NodeId>(i));
  for (const auto& o : g.outputs()) output_indices[static_cast<size_t>(o.value.node)].push_back(o.value.index);
}

std::vector<Match> find_matches(const Graph& g, const Rule& r, const MatchOptions& opts) {
  return find_matches(GraphIndex(g), r, opts);
}

std::vector<Match> find_matches(const GraphIndex& ix, const Rule& r, const MatchOptions& opts) {
  if (r.source.nodes.empty()) return {};
  // Every source op kind must occur in the graph: a cheap exit for most rules on most graphs.
  for (const auto& pn : r.source.nodes)
    if (ix.by_kind[static_cast<size_t>(pn.kind)].empty()) return {};
  const PatternRef c(r);
  Matcher m(ix, r, *c.p, opts.rejections);
  std::vector<Match> out;
  // Enumerate (bounded), then order by position so the first locations are the earliest.
  m.search(0, m.empty_state(), &out, std::max<size_t>(opts.max_matches * 8, 1024));
  std::sort(out.begin(), out.end(), match_less);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > opts.max_matches) out.resize(opts.max_matches);
  return out;
}

std::string_view rejection_name(Rejection r) {
  switch (r) {
    case Rejection::kNone: return "none";
    case Rejection::kNotMatched: return "not matched";
    case Rejection::kParamsDiffer: return "parameters differ";
    case Rejection::kCondition: return "condition fails";
    case Rejection::kSymmetry: return "symmetric duplicate";
    case Rejection::kEscapingValue: return "escaping value";
    case Rejection::kCycle: return "cycle";
    case Rejection::kUnbound: return "unbound variable";
    case Rejection::kShapeConflict: return "shape conflict";
    case Rejection::kTargetParams: return "target parameters";
    case Rejection::kNotFloat: return "not float";
    case Rejection::kQuantized: return "quantization boundary";
  }
  return "?";
}

namespace {

Error refused(Rejection* why, Rejection reason, std::string message) {
  if (why) *why = reason;
  return Error::bad_input(std::move(message));
}

}  // namespace

Expected<Bindings> check_match(const Graph& g, const Rule& r, const Match& m) { return check_match(GraphIndex(g), r, m); }

Expected<Bindings> check_match(const GraphIndex& ix, const Rule& r, const Match& m, Rejection* why) {
  const Graph& g = ix.graph;
  if (m.rule != r.name) return refused(why, Rejection::kNotMatched, "match is for rule '" + m.rule + "', not '" + r.name + "'");
  if (m.nodes.size() != r.source.nodes.size())
    return refused(why, Rejection::kNotMatched, "match has the wrong number of nodes for rule '" + r.name + "'");
  for (auto id : m.nodes)
    if (id < 0 || static_cast<size_t>(id) >= g.size()) return refused(why, Rejection::kNotMatched, "match refers to a node outside the graph");
  const PatternRef c(r);
  Matcher matcher(ix, r, *c.p);
  // Replay in search order with the given nodes; commutative inputs may branch.
  std::vector<State> states = {matcher.empty_state()};
  for (int p : c.p->order) {
    std::vector<State> next;
    for (const auto& s : states) matcher.place(p, m.nodes[static_cast<size_t>(p)], s, &next);
    states = std::move(next);
    if (states.empty())
      return refused(why, Rejection::kNotMatched,
                     "rule '" + r.name + "' does not match at " + m.str() + " (pattern node '" + r.source.nodes[static_cast<size_t>(p)].id + "')");
  }
  Rejection last = Rejection::kNotMatched;
  std::string detail = "no consistent binding";
  for (const auto& s : states) {
    last = matcher.finish(s, &detail);
    if (last == Rejection::kNone) return s.b;
  }
  return refused(why, last, "rule '" + r.name + "' at " + m.str() + ": " + detail);
}

namespace {

// The planned rewrite, index-only: the new (target) nodes, and the order of the result as indices
// into parent nodes [0, N) followed by target nodes [N, N+T). Building it copies each kept node once.
Status plan_rewrite(const GraphIndex& ix, const Rule& r, const Match& m, ApplyScratch& s, Rejection* why) {
  const Graph& g = ix.graph;
  auto bound = check_match(ix, r, m, why);
  if (!bound) return bound.error();
  const Bindings& b = *bound;
  const auto base = static_cast<NodeId>(g.size());
  auto& targets = s.targets;
  targets.clear();
  auto ctx_as = [&](Rejection reason, const std::string& message) {
    return refused(why, reason, "rule '" + r.name + "' at " + m.str() + ": " + message);
  };
  // Instantiate the target pattern; target node k gets id base + k.
  std::vector<std::pair<std::string, NodeId>> target_ids;
  auto target_value = [&](const std::string& str) -> std::optional<ValueRef> {
    auto colon = str.find(':');
    std::string id = colon == std::string::npos ? str : str.substr(0, colon);
    int k = colon == std::string::npos ? 0 : std::stoi(str.substr(colon + 1));
    for (const auto& [tid, nid] : target_ids)
      if (tid == id) return ValueRef{nid, k};
    auto it = b.tensors.find(id);
    if (it != b.tensors.end()) return it->second;
    return std::nullopt;
  };
  auto outputs_of = [&](NodeId id) -> const std::vector<ir::TensorType>& {
    return id < base ? g.node(id).outputs : targets[static_cast<size_t>(id - base)].outputs;
  };
  auto type_of = [&](ValueRef v) -> const ir::TensorType& { return outputs_of(v.node)[static_cast<size_t>(v.index)]; };
  for (const auto& tn : r.target.nodes) {
    ir::Node n;
    n.kind = tn.kind;
    std::vector<ir::TensorType> in_types;
    for (const auto& in : tn.inputs) {
      auto v = target_value(in);
      if (!v) return ctx_as(Rejection::kUnbound, "target input '" + in + "' is unbound");
      if (v->index >= static_cast<int32_t>(outputs_of(v->node).size())) return ctx_as(Rejection::kShapeConflict, "target input '" + in + "' has no such output");
      n.inputs.push_back(*v);
      in_types.push_back(type_of(*v));
    }
    Fields f;
    if (!tn.like.empty()) f = params_to_fields(tn.kind, g.node(m.nodes[static_cast<size_t>(r.source.index_of(tn.like))]).params);
    for (const auto& [field, e] : tn.params) {
      if (is_real_field(tn.kind, field)) {
        auto v = eval_real(e, b, g);
        if (!v) return ctx_as(Rejection::kTargetParams, v.error().message);
        f.reals[field] = *v;
      } else {
        auto v = eval_ints(e, b, g);
        if (!v) return ctx_as(Rejection::kTargetParams, v.error().message);
        f.ints[field] = *v;
      }
    }
    auto params = params_from_fields(tn.kind, f);
    if (!params) return ctx_as(Rejection::kTargetParams, params.error().message);
    n.params = std::move(*params);
    if (auto* c = std::get_if<ir::ConstantParams>(&n.params); c && c->dtype == ir::DType::kFloat32 && !m.nodes.empty()) {
      // Rules are written in float32; a float constant they create (an epsilon, a one) takes the
      // float type the match computes in, so a rule is as generic in dtype as its maths.
      const auto& out = g.node(m.nodes[0]).outputs;
      if (!out.empty() && ir::is_float(out[0].dtype)) c->dtype = out[0].dtype;
    }
    auto types = ir::infer_types(tn.kind, n.params, in_types);
    if (!types) return ctx_as(Rejection::kShapeConflict, "shape conflict: " + types.error().message);
    n.outputs = std::move(*types);
    if (!ir::moves_values_only(tn.kind)) {
      bool integer = false;
      for (const auto& t : in_types) integer = integer || !ir::is_float(t.dtype);
      for (const auto& t : n.outputs) integer = integer || !ir::is_float(t.dtype);
      if (integer) return ctx_as(Rejection::kNotFloat, "target node '" + tn.id + "' would compute in a non-float type");
    }
    target_ids.emplace_back(tn.id, base + static_cast<NodeId>(targets.size()));
    targets.push_back(std::move(n));
  }
  // Every use of a replaced source output reads its target value instead.
  auto& redirect = s.redirect;
  redirect.clear();
  for (const auto& [src, t] : r.outputs) {
    auto colon = src.find(':');
    const int p = r.source.index_of(colon == std::string::npos ? src : src.substr(0, colon));
    const int k = colon == std::string::npos ? 0 : std::stoi(src.substr(colon + 1));
    ValueRef from{m.nodes[static_cast<size_t>(p)], k};
    auto to = target_value(t);
    if (!to) return ctx_as(Rejection::kUnbound, "output target '" + t + "' is unbound");
    if (type_of(*to) != g.type(from))
      return ctx_as(Rejection::kShapeConflict, "shape conflict: " + src + " is " + g.type(from).str() + " but " + t + " is " + type_of(*to).str());
    redirect.emplace_back(from, *to);
  }
  auto redirected = [&](ValueRef v) {
    for (const auto& [from, to] : redirect)
      if (from == v) return to;
    return v;
  };
  auto inputs_of = [&](size_t i) -> const std::vector<ValueRef>& {
    return i < static_cast<size_t>(base) ? g.node(static_cast<NodeId>(i)).inputs : targets[i - static_cast<size_t>(base)].inputs;
  };
  // Only the existing nodes are redirected: a target node reads exactly what the target pattern says.
  auto source_of = [&](size_t i, ValueRef in) {
    return static_cast<size_t>((i < static_cast<size_t>(base) ? redirected(in) : in).node);
  };
  const size_t n = g.size() + targets.size();
  const bool acyclic = ir::topo_order(
      n,
      [&](size_t i, auto&& visit) {
        for (const auto& in : inputs_of(i)) visit(source_of(i, in));
      },
      s.topo, s.order);
  if (!acyclic) return ctx_as(Rejection::kCycle, "the rewrite would create a cycle");
  // Keep what an output depends on, and every graph input (ir::remove_dead_nodes).
  s.live.assign(n, 0);
  s.outputs = g.outputs();
  for (auto& o : s.outputs) {
    o.value = redirected(o.value);
    s.live[static_cast<size_t>(o.value.node)] = 1;
  }
  for (size_t k = n; k-- > 0;) {
    const auto i = static_cast<size_t>(s.order[k]);
    if (i < static_cast<size_t>(base) && g.node(static_cast<NodeId>(i)).kind == OpKind::kInput) s.live[i] = 1;
    if (!s.live[i]) continue;
    for (const auto& in : inputs_of(i)) s.live[source_of(i, in)] = 1;
  }
  s.remap.assign(n, -1);
  NodeId next = 0;
  for (auto i : s.order)
    if (s.live[static_cast<size_t>(i)]) s.remap[static_cast<size_t>(i)] = next++;
  for (auto& o : s.outputs) o.value.node = s.remap[static_cast<size_t>(o.value.node)];
  return Status{};
}

// Writes the planned result into out, copy-assigning each kept node into out's existing slots so
// that their strings and vectors are reused.
void build_rewrite(const Graph& g, ApplyScratch& s, Graph& out) {
  const auto base = static_cast<int32_t>(g.size());
  size_t kept = 0;
  for (auto i : s.order) kept += s.live[static_cast<size_t>(i)] != 0;
  out.resize_nodes(kept);
  for (auto i : s.order) {
    const auto to = s.remap[static_cast<size_t>(i)];
    if (to < 0) continue;
    ir::Node& dst = out.mutable_node(to);
    dst = i < base ? g.node(i) : s.targets[static_cast<size_t>(i - base)];
    for (auto& in : dst.inputs) {
      if (i < base)
        for (const auto& [from, redirected_to] : s.redirect)
          if (from == in) {
            in = redirected_to;
            break;
          }
      in.node = s.remap[static_cast<size_t>(in.node)];
    }
  }
  out.set_outputs(s.outputs);
  out.meta() = g.meta();
}

}  // namespace

Expected<Graph> apply(const Graph& g, const Rule& r, const Match& m) { return apply(GraphIndex(g), r, m); }

Expected<Graph> apply(const GraphIndex& ix, const Rule& r, const Match& m, Rejection* why) {
  ApplyScratch s;
  auto planned = plan_rewrite(ix, r, m, s, why);
  if (!planned) return planned.error();
  Graph out;
  build_rewrite(ix.graph, s, out);
  return out;
}

Status apply_into(const GraphIndex& ix, const Rule& r, const Match& m, Graph& out, ApplyScratch& scratch, Rejection* why) {
  auto planned = plan_rewrite(ix, r, m, scratch, why);
  if (!planned) return planned.error();
  build_rewrite(ix.graph, scratch, out);
  return Status{};
}

}  // namespace rlflow::rules
