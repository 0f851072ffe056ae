// Pairs, directions and pruning: which candidate pairs are worth a rule, in which direction, and
// which rules are the same rule under another name.
#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "rlflow/ir/shape_inference.h"
#include "rlflow/rules/generator.h"
#include "rlflow/rules/match.h"
#include "rlflow/rules/verify.h"
#include "rlflow/util/hash.h"

namespace rlflow::rules::gen {

using ir::OpKind;

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// Short label of an op; with `exact`, a hash of the parameters makes it injective.
std::string op_label(const GNode& n, bool exact) {
  std::string s;
  switch (n.kind) {
    case OpKind::kConv: {
      const auto& p = std::get<ir::ConvParams>(n.params);
      s = p.act == ir::Activation::kRelu ? "conv_relu" : "conv";
      break;
    }
    case OpKind::kMaxPool: s = "maxpool"; break;
    case OpKind::kAveragePool: s = "avgpool"; break;
    case OpKind::kConcat: s = "concat" + std::to_string(std::get<ir::AxisParams>(n.params).axis); break;
    case OpKind::kSplit: {
      const auto& p = std::get<ir::SplitParams>(n.params);
      s = "split" + std::to_string(p.axis) + "[" + join(p.sizes) + "]";
      break;
    }
    case OpKind::kTranspose: s = "transpose[" + join(std::get<ir::TransposeParams>(n.params).perm) + "]"; break;
    case OpKind::kScalarMul: s = "scale"; break;
    case OpKind::kEnlarge: s = "enlarge"; break;
    case OpKind::kBatchNorm: s = "batchnorm"; break;
    case OpKind::kConstant: {
      const auto& p = std::get<ir::ConstantParams>(n.params);
      s = p.fill == ir::ConstantFill::kIdentityConv ? "identity" : p.fill == ir::ConstantFill::kValue ? "fill" : "poolkernel";
      s += "[" + join(p.shape) + "]";
      break;
    }
    default: {  // every other op: its IR name in lower case
      s = std::string(ir::op_name(n.kind));
      std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    }
  }
  if (exact) {
    Hasher h;
    ir::hash_params(h, n.params);
    std::ostringstream os;
    os << std::hex << (h.digest() & 0xFFFFFF);
    s += "{" + os.str() + "}";
  }
  return s;
}

// Expression text of every tensor of g, variables named by `names`.
std::vector<std::string> expressions(const World& w, const GGraph& g, const std::vector<std::string>& names, bool exact) {
  std::vector<std::string> e(names.begin(), names.end());
  e.resize(w.vars.size());
  for (const auto& n : g.nodes) {
    std::vector<std::string> args;
    for (int t : n.inputs) args.push_back(e[static_cast<size_t>(t)]);
    if (ir::is_commutative(n.kind)) std::sort(args.begin(), args.end());
    std::string s = op_label(n, exact) + "(";
    for (size_t i = 0; i < args.size(); ++i) s += (i ? "," : "") + args[i];
    s += ")";
    const int k = ir::num_outputs(n.kind, n.params);
    if (k == 1) e.push_back(s);
    else
      for (int j = 0; j < k; ++j) e.push_back(s + "#" + std::to_string(j));
  }
  return e;
}

std::set<int> vars_read(const World& w, const GGraph& g) {
  std::set<int> v;
  const int nv = static_cast<int>(w.vars.size());
  for (const auto& n : g.nodes)
    for (int t : n.inputs)
      if (t < nv) v.insert(t);
  for (int t : g.outputs)
    if (t < nv) v.insert(t);
  return v;
}

bool connected(const World& w, const GGraph& g) {
  const size_t n = g.nodes.size();
  if (n <= 1) return true;
  std::vector<size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  std::map<int, size_t> first_reader;  // variable -> a node reading it
  for (size_t i = 0; i < n; ++i)
    for (int t : g.nodes[i].inputs) {
      auto [node, k] = g.producer(w, t);
      size_t other;
      if (node >= 0) other = static_cast<size_t>(node);
      else {
        auto [it, fresh] = first_reader.emplace(t, i);
        if (fresh) continue;
        other = it->second;
      }
      parent[find(i)] = find(other);
    }
  for (size_t i = 1; i < n; ++i)
    if (find(i) != find(0)) return false;
  return true;
}

// Renamings of variables within their symmetry classes (identity first).
std::vector<std::vector<int>> renamings(const World& w) {
  std::vector<std::vector<int>> classes;
  for (size_t i = 0; i < w.vars.size(); ++i) {
    const int c = w.vars[i].symmetry;
    if (c < 0) continue;
    if (classes.size() <= static_cast<size_t>(c)) classes.resize(static_cast<size_t>(c) + 1);
    classes[static_cast<size_t>(c)].push_back(static_cast<int>(i));
  }
  std::vector<int> id(w.vars.size());
  std::iota(id.begin(), id.end(), 0);
  std::vector<std::vector<int>> out = {id};
  for (const auto& cls : classes) {
    std::vector<std::vector<int>> next;
    for (const auto& base : out) {
      std::vector<int> perm = cls;
      do {
        auto r = base;
        for (size_t k = 0; k < cls.size(); ++k) r[static_cast<size_t>(cls[k])] = perm[k];
        next.push_back(std::move(r));
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
    out = std::move(next);
  }
  return out;
}

std::string key_under(const World& w, const Directed& d, const std::vector<int>& rename, std::vector<std::string>* src_exprs = nullptr) {
  std::vector<std::string> names;
  for (size_t i = 0; i < w.vars.size(); ++i) names.push_back(w.vars[static_cast<size_t>(rename[i])].name);
  auto es = expressions(w, d.source, names, true);
  auto et = expressions(w, d.target, names, true);
  std::vector<std::string> parts;
  for (const auto& [s, t] : d.outputs) parts.push_back(es[static_cast<size_t>(s)] + "=>" + et[static_cast<size_t>(t)]);
  std::sort(parts.begin(), parts.end());
  std::string k;
  for (const auto& p : parts) k += p + ";";
  if (src_exprs) *src_exprs = std::move(es);
  return k;
}

}  // namespace

std::string describe(const World& w, const GGraph& g, const std::vector<int>& tensors) {
  std::vector<std::string> names;
  for (const auto& v : w.vars) names.push_back(v.name);
  auto e = expressions(w, g, names, false);
  std::string s;
  for (size_t i = 0; i < tensors.size(); ++i) s += (i ? ", " : "") + e[static_cast<size_t>(tensors[i])];
  return s;
}

int runtime_ops(const World& w, const GGraph& g) {
  const auto c = constant_tensors(w, g);
  int n = 0;
  for (const auto& nd : g.nodes) {
    bool reads_activation = false;
    for (int t : nd.inputs) reads_activation = reads_activation || !c[static_cast<size_t>(t)];
    n += reads_activation;
  }
  return n;
}

bool share_common_subgraph(const World& w, const GGraph& a, const GGraph& b) {
  const auto ha = tensor_hashes(w, a), hb = tensor_hashes(w, b);
  const size_t nv = w.vars.size();
  std::set<uint64_t> in_a(ha.begin() + static_cast<std::ptrdiff_t>(nv), ha.end());
  for (size_t t = nv; t < hb.size(); ++t)
    if (in_a.count(hb[t])) return true;
  return false;
}

bool share_common_context(const World& w, const GGraph& a, const GGraph& b, uint64_t seed) {
  auto va = run_int(w, a, seed), vb = run_int(w, b, seed);
  if (!va || !vb) return false;
  auto readers = [&](const GGraph& g) {
    std::vector<int> r(static_cast<size_t>(g.num_tensors(w)), 0);
    for (const auto& n : g.nodes)
      for (int t : n.inputs) r[static_cast<size_t>(t)]++;
    return r;
  };
  const auto ra = readers(a), rb = readers(b);
  const int nv = static_cast<int>(w.vars.size());
  // The top node's outputs are all outputs of the graph, and its operands feed nothing else.
  auto peelable = [&](const GGraph& g, const std::vector<int>& r, int node) {
    const auto& n = g.nodes[static_cast<size_t>(node)];
    for (int k = 0; k < ir::num_outputs(n.kind, n.params); ++k)
      if (r[static_cast<size_t>(g.tensor_of(w, node, k))]) return false;
    for (int t : n.inputs)
      if (t >= nv && r[static_cast<size_t>(t)] != 1) return false;
    return true;
  };
  auto operand_fps = [](const GNode& n, const std::vector<IntTensor>& vals) {
    std::vector<uint64_t> f;
    for (int t : n.inputs) f.push_back(vals[static_cast<size_t>(t)].fingerprint());
    if (ir::is_commutative(n.kind)) std::sort(f.begin(), f.end());
    return f;
  };
  std::set<int> tops_a, tops_b;
  for (int t : a.outputs)
    if (auto [n, k] = a.producer(w, t); n >= 0) tops_a.insert(n);
  for (int t : b.outputs)
    if (auto [n, k] = b.producer(w, t); n >= 0) tops_b.insert(n);
  for (int na : tops_a) {
    const auto& x = a.nodes[static_cast<size_t>(na)];
    if (!peelable(a, ra, na)) continue;
    for (int nb : tops_b) {
      const auto& y = b.nodes[static_cast<size_t>(nb)];
      if (x.kind != y.kind || !(x.params == y.params) || x.inputs.size() != y.inputs.size()) continue;
      if (!peelable(b, rb, nb)) continue;
      if (operand_fps(x, *va) == operand_fps(y, *vb)) return true;
    }
  }
  return false;
}

std::optional<std::vector<std::pair<int, int>>> match_outputs(const World& w, const GGraph& a, const GGraph& b, uint64_t seed) {
  auto va = run_int(w, a, seed), vb = run_int(w, b, seed);
  if (!va || !vb || a.outputs.size() != b.outputs.size()) return std::nullopt;
  std::vector<std::pair<int, int>> m;
  std::vector<bool> used(b.outputs.size(), false);
  for (int ta : a.outputs) {
    const auto& x = (*va)[static_cast<size_t>(ta)];
    bool found = false;
    for (size_t j = 0; j < b.outputs.size() && !found; ++j) {
      const auto& y = (*vb)[static_cast<size_t>(b.outputs[j])];
      if (used[j] || x.shape != y.shape || x.data != y.data) continue;
      used[j] = found = true;
      m.push_back({ta, b.outputs[j]});
    }
    if (!found) return std::nullopt;
  }
  return m;
}

std::vector<Directed> directions(const World& w, const GGraph& a, const GGraph& b, const std::vector<std::pair<int, int>>& a_to_b) {
  const int ra = runtime_ops(w, a), rb = runtime_ops(w, b);
  std::vector<Directed> out;
  auto emit = [&](const GGraph& s, const GGraph& t, bool forward) {
    if (s.nodes.empty()) return;
    const auto vs = vars_read(w, s), vt = vars_read(w, t);
    for (int v : vt)
      if (!vs.count(v)) return;
    if (!connected(w, s)) return;
    Directed d{s, t, {}};
    for (const auto& [x, y] : a_to_b) d.outputs.push_back(forward ? std::pair{x, y} : std::pair{y, x});
    out.push_back(std::move(d));
  };
  if (ra >= rb) emit(a, b, true);
  if (rb >= ra) emit(b, a, false);
  return out;
}

std::string canonical_key(const World& w, const Directed& d) {
  std::string best;
  bool first = true;
  for (const auto& r : renamings(w)) {
    auto k = key_under(w, d, r);
    if (first || k < best) best = std::move(k);
    first = false;
  }
  return best;
}

std::vector<std::vector<int>> source_symmetries(const World& w, const Directed& d) {
  const auto all = renamings(w);
  std::vector<std::string> base_exprs;
  const auto base = key_under(w, d, all.front(), &base_exprs);
  std::set<std::vector<int>> automorphisms;  // distinct node permutations
  for (size_t i = 1; i < all.size(); ++i) {
    std::vector<std::string> exprs;
    if (key_under(w, d, all[i], &exprs) != base) continue;
    std::vector<int> sigma;
    for (size_t n = 0; n < d.source.nodes.size(); ++n) {
      const auto& e = exprs[static_cast<size_t>(d.source.tensor_of(w, static_cast<int>(n)))];
      int match = -1;
      for (size_t m = 0; m < d.source.nodes.size(); ++m)
        if (base_exprs[static_cast<size_t>(d.source.tensor_of(w, static_cast<int>(m)))] == e) match = static_cast<int>(m);
      if (match < 0) return {};
      sigma.push_back(match);
    }
    bool identity = true;
    for (size_t n = 0; n < sigma.size(); ++n) identity = identity && sigma[n] == static_cast<int>(n);
    if (!identity) automorphisms.insert(sigma);
  }
  // One swap only: with more symmetry, ordering constraints could interact; duplicates are
  // harmless, a lost match is not.
  if (automorphisms.size() != 1) return {};
  const auto& s = *automorphisms.begin();
  for (size_t n = 0; n < s.size(); ++n) {
    if (s[static_cast<size_t>(s[n])] != static_cast<int>(n)) return {};  // not an involution
    if (s[n] > static_cast<int>(n)) return {{static_cast<int>(n), s[n]}};
  }
  return {};
}

uint64_t canonical_hash(const ir::Graph& g) {
  std::vector<uint64_t> h(g.size());
  int64_t input_ordinal = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    Hasher hs(0xca11);
    hs.add(static_cast<uint64_t>(n.kind));
    ir::hash_params(hs, n.params);
    for (const auto& t : n.outputs) hs.add(static_cast<uint64_t>(t.dtype)).add(t.shape);
    if (n.kind == OpKind::kInput) hs.add_i(input_ordinal++);
    if (n.value) hs.add(n.value->content_hash());
    std::vector<uint64_t> in;
    for (const auto& v : n.inputs) in.push_back(Hasher(h[static_cast<size_t>(v.node)]).add_i(v.index).digest());
    if (ir::is_commutative(n.kind)) std::sort(in.begin(), in.end());
    hs.add(in.size());
    for (auto x : in) hs.add(x);
    h[i] = hs.digest();
  }
  Hasher hs(0x9a);
  for (const auto& o : g.outputs()) hs.add(h[static_cast<size_t>(o.value.node)]).add_i(o.value.index);
  return hs.digest();
}

void RuleBase::add(std::shared_ptr<const Rule> r) {
  if (!r->source.nodes.empty()) by_root_[static_cast<size_t>(r->root_kind())].push_back(r.get());
  rules_.push_back(std::move(r));
}

bool RuleBase::derives(const Rule& r, int steps) const {
  if (r.instances.empty() || steps <= 0) return false;
  // On every instance: a general rule is not derived by rules that only hold for some sizes.
  for (const auto& inst : r.instances)
    if (!derives_on(r, inst, steps)) return false;
  return true;
}

bool RuleBase::derives_on(const Rule& r, const Instance& inst, int steps) const {
  auto g0 = instantiate_source(r, inst, 1);
  if (!g0) return false;
  auto mine = find_matches(*g0, r);
  if (mine.empty()) return false;
  auto goal_graph = apply(*g0, r, mine.front());
  if (!goal_graph) return false;
  const uint64_t goal = canonical_hash(*goal_graph);
  std::vector<ir::Graph> frontier{*g0};
  std::set<uint64_t> seen{canonical_hash(*g0)};
  for (int step = 1; step <= steps && !frontier.empty(); ++step) {
    std::vector<ir::Graph> next;
    for (const auto& g : frontier) {
      std::set<OpKind> kinds;
      for (const auto& n : g.nodes()) kinds.insert(n.kind);
      for (auto k : kinds)
        for (const Rule* q : by_root_[static_cast<size_t>(k)])
          for (const auto& m : find_matches(g, *q)) {
            auto g2 = apply(g, *q, m);
            if (!g2) continue;
            const uint64_t h = canonical_hash(*g2);
            if (h == goal) return true;
            if (step < steps && seen.insert(h).second) next.push_back(std::move(*g2));
          }
    }
    frontier = std::move(next);
  }
  return false;
}

}  // namespace rlflow::rules::gen
