// Worlds and the enumeration of every small graph over a world's variables.
//
// The enumeration is a depth-first search that appends one op at a time. A graph is a set of
// distinct nodes (an op on the same operands twice would be redundant), so its identity is the
// set of its nodes' structural hashes; the search never revisits a set it has seen, whatever the
// order the ops were added in, because what can be added next depends only on the set. Values
// are computed incrementally by the integer interpreter as ops are appended.
#include <algorithm>
#include <numeric>
#include <random>
#include <unordered_set>

#include "rlflow/ir/shape_inference.h"
#include "rlflow/rules/generator.h"
#include "rlflow/util/hash.h"

namespace rlflow::rules::gen {

using ir::OpKind;
using ir::Shape;

// ---------------------------------------------------------------------------------------------
// Worlds

namespace {

VarSpec var(std::string name, Shape shape, bool constant, int symmetry = -1, std::vector<bool> fixed = {}) {
  VarSpec v;
  v.name = std::move(name);
  if (fixed.empty()) fixed.assign(shape.size(), false);
  v.shape = std::move(shape);
  v.fixed = std::move(fixed);
  v.constant = constant;
  v.symmetry = symmetry;
  return v;
}

ConstSpec constant_spec(ir::ConstantFill fill, Shape shape, std::vector<bool> fixed, double value = 0) {
  ConstSpec c;
  c.params.fill = fill;
  c.params.shape = std::move(shape);
  c.params.value = value;
  c.fixed = std::move(fixed);
  return c;
}

}  // namespace

World conv_world() {
  World w;
  w.name = "conv";
  // Sizes chosen so that sums of sizes rarely equal other sizes (fewer accidental shape matches).
  const Shape act{2, 4, 5, 7};
  w.vars = {var("x", act, false, 0), var("y", act, false, 0),
            var("w1", {4, 4, 3, 3}, true, 1, {false, false, true, true}),
            var("w2", {4, 4, 3, 3}, true, 1, {false, false, true, true}),
            var("w3", {4, 4, 1, 1}, true, -1, {false, false, true, true}),
            var("w4", {4, 4, 1, 3}, true, -1, {false, false, true, true}),
            var("b", {4, 1, 1}, true, -1, {false, true, true}),
            var("c1", {4}, true, 2), var("c2", {4}, true, 2)};
  for (const char* n : {"s", "bb", "m", "v"}) {
    auto p = var(n, {4}, true);
    p.operand = false;
    p.positive = std::string(n) == "v";
    w.vars.push_back(p);
  }
  auto& o = w.ops;
  o.conv_acts = {ir::Activation::kNone, ir::Activation::kRelu};
  o.add = o.mul = o.relu = o.scalar_mul = o.max_pool = o.avg_pool = o.enlarge = o.batch_norm = true;
  o.concat_axes = {{4, {0, 1}}, {3, {0}}, {1, {0}}};
  o.transposes = {{4, {{0, 1, 3, 2}, {0, 2, 3, 1}, {0, 3, 1, 2}}}};
  o.constants = {constant_spec(ir::ConstantFill::kIdentityConv, {4, 4, 3, 3}, {false, false, true, true}),
                 constant_spec(ir::ConstantFill::kIdentityConv, {4, 4, 1, 1}, {false, false, true, true}),
                 constant_spec(ir::ConstantFill::kValue, {4, 1, 1}, {false, true, true}, 1.0)};
  o.bn_params = {9, 10, 11, 12};
  o.conv_bias = true;
  return w;
}

World matmul_world() {
  World w;
  w.name = "matmul";
  const Shape act{2, 5, 4};
  w.vars = {var("x", act, false, 0), var("y", act, false, 0), var("w1", {4, 4}, true, 1), var("w2", {4, 4}, true, 1),
            var("w3", {4, 4}, true, 1), var("b1", {4}, true, 2), var("b2", {4}, true, 2)};
  auto& o = w.ops;
  o.matmul = o.add = o.mul = o.relu = o.scalar_mul = true;
  o.concat_axes = {{3, {1, 2}}, {2, {0, 1}}, {1, {0}}};
  o.transposes = {{3, {{0, 2, 1}}}, {2, {{1, 0}}}};
  o.transpose_constants = true;
  return w;
}

std::vector<World> default_worlds() { return {conv_world(), matmul_world()}; }

std::vector<IntTensor> world_values(const World& w, uint64_t seed) {
  std::vector<IntTensor> out;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
  std::uniform_int_distribution<int64_t> dist(-w.value_range, w.value_range);
  for (const auto& v : w.vars) {
    IntTensor t{v.shape, std::vector<int64_t>(static_cast<size_t>(ir::numel(v.shape)))};
    for (auto& x : t.data) x = dist(rng);
    out.push_back(std::move(t));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Graphs

int GGraph::num_tensors(const World& w) const {
  int n = static_cast<int>(w.vars.size());
  for (const auto& nd : nodes) n += ir::num_outputs(nd.kind, nd.params);
  return n;
}

int GGraph::tensor_of(const World& w, int node, int output) const {
  int t = static_cast<int>(w.vars.size());
  for (int k = 0; k < node; ++k) t += ir::num_outputs(nodes[static_cast<size_t>(k)].kind, nodes[static_cast<size_t>(k)].params);
  return t + output;
}

std::pair<int, int> GGraph::producer(const World& w, int tensor) const {
  const int nv = static_cast<int>(w.vars.size());
  if (tensor < nv) return {-1, tensor};
  int t = nv;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const int n = ir::num_outputs(nodes[k].kind, nodes[k].params);
    if (tensor < t + n) return {static_cast<int>(k), tensor - t};
    t += n;
  }
  return {-2, -1};
}

Expected<std::vector<IntTensor>> run_int(const World& w, const GGraph& g, uint64_t seed) {
  std::vector<IntTensor> vals = world_values(w, seed);
  for (const auto& n : g.nodes) {
    std::vector<const IntTensor*> ins;
    for (int t : n.inputs) {
      if (t < 0 || t >= static_cast<int>(vals.size())) return Error::internal("generator graph reads a missing tensor");
      ins.push_back(&vals[static_cast<size_t>(t)]);
    }
    auto out = eval_int(n.kind, n.params, ins);
    if (!out) return out.error();
    for (auto& t : *out) vals.push_back(std::move(t));
  }
  return vals;
}

namespace {

uint64_t template_hash(OpKind kind, const ir::OpParams& params) {
  Hasher h(0x7e3);
  h.add(static_cast<uint64_t>(kind));
  ir::hash_params(h, params);
  return h.digest();
}

uint64_t var_hash(int i) { return Hasher(0xa11).add_i(i).digest(); }

uint64_t node_hash(uint64_t tmpl, std::vector<uint64_t> in, bool comm) {
  if (comm) std::sort(in.begin(), in.end());
  Hasher h(tmpl);
  h.add(in.size());
  for (auto v : in) h.add(v);
  return h.digest();
}

uint64_t output_hash(uint64_t node, int k) { return Hasher(node).add_i(k).digest(); }

}  // namespace

std::vector<uint64_t> tensor_hashes(const World& w, const GGraph& g) {
  std::vector<uint64_t> h;
  for (size_t i = 0; i < w.vars.size(); ++i) h.push_back(var_hash(static_cast<int>(i)));
  for (const auto& n : g.nodes) {
    std::vector<uint64_t> in;
    for (int t : n.inputs) in.push_back(h[static_cast<size_t>(t)]);
    const uint64_t nh = node_hash(template_hash(n.kind, n.params), in, ir::is_commutative(n.kind));
    const int k = ir::num_outputs(n.kind, n.params);
    for (int j = 0; j < k; ++j) h.push_back(output_hash(nh, j));
  }
  return h;
}

std::vector<bool> constant_tensors(const World& w, const GGraph& g) {
  std::vector<bool> c;
  for (const auto& v : w.vars) c.push_back(v.constant);
  for (const auto& n : g.nodes) {
    bool all = true;
    for (int t : n.inputs) all = all && c[static_cast<size_t>(t)];
    const int k = ir::num_outputs(n.kind, n.params);
    for (int j = 0; j < k; ++j) c.push_back(all);
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// Enumeration

namespace {

struct Template {
  OpKind kind;
  ir::OpParams params;
  uint64_t hash;
  int outputs;
};

// 12 bytes per node: enumerations keep millions of graphs. Tensor ids fit a byte (variables plus
// two outputs per op).
struct Packed {
  uint32_t tmpl;  // kIdentityOutput: an identity graph's output variable in[0]
  uint8_t n;
  uint8_t in[5];
};
constexpr uint32_t kIdentityOutput = 0xFFFFFFFF;
constexpr int kMaxTensors = 255;

}  // namespace

struct Enumeration::Impl {
  World world;
  std::vector<Template> templates;
  std::vector<uint64_t> fps;
  std::vector<uint32_t> offsets{0};  // graph i's nodes are packed[offsets[i], offsets[i + 1])
  std::vector<Packed> packed;
};

size_t Enumeration::size() const { return impl ? impl->fps.size() : 0; }
uint64_t Enumeration::fingerprint(size_t i) const { return impl->fps[i]; }
const World& Enumeration::world() const { return impl->world; }

GGraph Enumeration::graph(size_t i) const {
  GGraph g;
  const auto& im = *impl;
  for (uint32_t k = im.offsets[i]; k < im.offsets[i + 1]; ++k) {
    const Packed& p = im.packed[k];
    if (p.tmpl == kIdentityOutput) {
      g.outputs.push_back(p.in[0]);
      continue;
    }
    const Template& t = im.templates[p.tmpl];
    GNode n{t.kind, t.params, {}};
    for (int j = 0; j < p.n; ++j) n.inputs.push_back(p.in[j]);
    g.nodes.push_back(std::move(n));
  }
  if (g.outputs.empty()) {
    std::vector<int> reads(static_cast<size_t>(g.num_tensors(im.world)), 0);
    for (const auto& n : g.nodes)
      for (int t : n.inputs) reads[static_cast<size_t>(t)]++;
    for (int t = static_cast<int>(im.world.vars.size()); t < static_cast<int>(reads.size()); ++t)
      if (!reads[static_cast<size_t>(t)]) g.outputs.push_back(t);
  }
  return g;
}

namespace {

struct Slot {
  ir::TensorType type;
  std::shared_ptr<const IntTensor> value;
  uint64_t fp = 0;
  bool constant = false;
  uint64_t hash = 0;
  uint64_t vars = 0;                       // variables read, transitively (bit i: variable i)
  bool same_as_var = false;                // its value equals a variable's: it may not be read
  std::vector<std::vector<int64_t>> cuts;  // per axis: interior offsets where a Split may cut
};

class Enumerator {
 public:
  Enumerator(const World& w, const EnumOptions& o, Enumeration* out) : w_(w), o_(o), out_(out), im_(*out->impl) {
    auto vals = world_values(w, o.seed);
    slots_.reserve(w.vars.size() + 2 * static_cast<size_t>(o.depth) + 2);
    for (size_t i = 0; i < w.vars.size(); ++i) {
      Slot s;
      s.type = {ir::DType::kFloat32, w.vars[i].shape};
      s.value = std::make_shared<IntTensor>(std::move(vals[i]));
      s.fp = s.value->fingerprint();
      s.constant = w.vars[i].constant;
      s.hash = var_hash(static_cast<int>(i));
      s.vars = uint64_t{1} << i;
      s.cuts.assign(w.vars[i].shape.size(), {});
      slots_.push_back(std::move(s));
      consumers_.push_back(0);
    }
    // Variables in symmetry classes, in declaration order.
    for (size_t i = 0; i < w.vars.size(); ++i) {
      const int c = w.vars[i].symmetry;
      if (c < 0) continue;
      if (classes_.size() <= static_cast<size_t>(c)) classes_.resize(static_cast<size_t>(c) + 1);
      classes_[static_cast<size_t>(c)].push_back(static_cast<int>(i));
    }
  }

  void run() {
    if (o_.depth > 0) expand(o_.depth);
    add_identity_graphs();
  }

 private:
  uint32_t intern(OpKind kind, const ir::OpParams& params, uint64_t* hash) {
    const uint64_t h = template_hash(kind, params);
    *hash = h;
    auto [it, fresh] = index_.emplace(h, static_cast<uint32_t>(im_.templates.size()));
    if (fresh) im_.templates.push_back({kind, params, h, ir::num_outputs(kind, params)});
    return it->second;
  }

  bool operand(int i) const { return i >= static_cast<int>(w_.vars.size()) || w_.vars[static_cast<size_t>(i)].operand; }

  // Split points of a new op's outputs (only to limit Split to meaningful cuts).
  std::vector<std::vector<std::vector<int64_t>>> cuts_of(OpKind kind, const ir::OpParams& params, const std::vector<int>& in,
                                                         const std::vector<ir::TensorType>& outs) const {
    std::vector<std::vector<std::vector<int64_t>>> res;
    for (const auto& t : outs) res.emplace_back(t.shape.size());
    auto merge = [](std::vector<int64_t>* dst, const std::vector<int64_t>& src, int64_t shift = 0) {
      for (auto c : src) dst->push_back(c + shift);
      std::sort(dst->begin(), dst->end());
      dst->erase(std::unique(dst->begin(), dst->end()), dst->end());
    };
    auto& out = res[0];
    switch (kind) {
      case OpKind::kConcat: {
        const int64_t ax = std::get<ir::AxisParams>(params).axis;
        int64_t off = 0;
        for (size_t k = 0; k < in.size(); ++k) {
          const Slot& s = slots_[static_cast<size_t>(in[k])];
          for (size_t d = 0; d < out.size(); ++d) {
            if (static_cast<int64_t>(d) == ax) {
              merge(&out[d], s.cuts[d], off);
              if (k > 0) merge(&out[d], {off});
            } else {
              merge(&out[d], s.cuts[d]);
            }
          }
          off += s.type.shape[static_cast<size_t>(ax)];
        }
        break;
      }
      case OpKind::kSplit: {
        const auto& p = std::get<ir::SplitParams>(params);
        const Slot& s = slots_[static_cast<size_t>(in[0])];
        int64_t start = 0;
        for (size_t k = 0; k < res.size(); ++k) {
          for (size_t d = 0; d < res[k].size(); ++d) {
            if (static_cast<int64_t>(d) != p.axis) {
              res[k][d] = s.cuts[d];
              continue;
            }
            for (auto c : s.cuts[d])
              if (c > start && c < start + p.sizes[k]) res[k][d].push_back(c - start);
          }
          start += p.sizes[k];
        }
        break;
      }
      case OpKind::kTranspose: {
        const auto& perm = std::get<ir::TransposeParams>(params).perm;
        for (size_t d = 0; d < perm.size(); ++d) out[d] = slots_[static_cast<size_t>(in[0])].cuts[static_cast<size_t>(perm[d])];
        break;
      }
      case OpKind::kConv:
        out[0] = slots_[static_cast<size_t>(in[0])].cuts[0];
        out[1] = slots_[static_cast<size_t>(in[1])].cuts[0];
        break;
      case OpKind::kMatMul: {
        const Slot& a = slots_[static_cast<size_t>(in[0])];
        const Slot& b = slots_[static_cast<size_t>(in[1])];
        const size_t r = out.size();
        out[r - 2] = a.cuts[a.cuts.size() - 2];
        out[r - 1] = b.cuts.back();
        for (const Slot* s : {&a, &b})
          for (size_t d = 0; d + 2 < s->cuts.size(); ++d) merge(&out[r - s->cuts.size() + d], s->cuts[d]);
        break;
      }
      case OpKind::kMaxPool:
      case OpKind::kAveragePool:
      case OpKind::kEnlarge:
        for (size_t d = 0; d < 2; ++d) out[d] = slots_[static_cast<size_t>(in[0])].cuts[d];
        break;
      case OpKind::kConstant: break;
      // elementwise (with broadcasting), BatchNorm; the other kinds are not in the generator's op set
      default:  // elementwise (with broadcasting), BatchNorm, and the kinds outside the generator's op set
        for (int t : in) {
          const Slot& s = slots_[static_cast<size_t>(t)];
          const size_t off = out.size() - std::min(out.size(), s.cuts.size());
          for (size_t d = 0; d < s.cuts.size() && off + d < out.size(); ++d)
            if (s.type.shape[d] == outs[0].shape[off + d]) merge(&out[off + d], s.cuts[d]);
        }
    }
    return res;
  }

  void try_op(OpKind kind, const ir::OpParams& params, std::vector<int> in, int left) {
    for (size_t a = 0; a < in.size(); ++a) {
      if (slots_[static_cast<size_t>(in[a])].same_as_var) return;  // reads a roundabout copy of a variable
      for (size_t b = a + 1; b < in.size(); ++b)
        if (in[a] == in[b]) return;  // op(t, t): a special case of op(t, u)
    }
    if (slots_.size() + 2 > kMaxTensors) return;  // ids must fit Packed
    uint64_t th;
    const uint32_t tmpl = intern(kind, params, &th);
    std::vector<uint64_t> ih;
    for (int t : in) ih.push_back(slots_[static_cast<size_t>(t)].hash);
    const uint64_t nh = node_hash(th, ih, ir::is_commutative(kind));
    for (auto h : node_hashes_)
      if (h == nh) return;  // the same op on the same operands is already there
    const uint64_t gh = graph_hash_ + Hasher::mix(nh ^ 0x2545F4914F6CDD1Dull);
    if (seen_.count(gh)) return;
    std::vector<ir::TensorType> in_types;
    std::vector<const IntTensor*> in_vals;
    for (int t : in) {
      in_types.push_back(slots_[static_cast<size_t>(t)].type);
      in_vals.push_back(slots_[static_cast<size_t>(t)].value.get());
    }
    auto types = ir::infer_types(kind, params, in_types);
    if (!types) return;
    auto vals = eval_int(kind, params, in_vals);
    if (!vals) return;
    // Minimality: a value computed twice (here or earlier in the graph) makes this graph and all
    // its extensions redundant; a value equal to a variable may only be an output.
    std::vector<uint64_t> fps;
    std::vector<bool> dup_var;
    for (const auto& v : *vals) {
      const uint64_t f = v.fingerprint();
      for (size_t t = w_.vars.size(); t < slots_.size(); ++t)
        if (slots_[t].fp == f) {
          ++out_->redundant;
          return;
        }
      for (auto g : fps)
        if (g == f) {
          ++out_->redundant;
          return;
        }
      bool dv = false;
      for (size_t t = 0; t < w_.vars.size(); ++t) dv = dv || slots_[t].fp == f;
      fps.push_back(f);
      dup_var.push_back(dv);
    }
    seen_.insert(gh);
    ++out_->enumerated;
    if (o_.progress && (out_->enumerated & 0xFFFF) == 0) o_.progress(out_->enumerated);

    auto cuts = cuts_of(kind, params, in, *types);
    bool constant = true;  // a Constant op (no inputs) is a weight too
    uint64_t vars = 0;
    for (int t : in) {
      constant = constant && slots_[static_cast<size_t>(t)].constant;
      vars |= slots_[static_cast<size_t>(t)].vars;
      consumers_[static_cast<size_t>(t)]++;
    }
    const size_t first = slots_.size();
    for (size_t k = 0; k < types->size(); ++k) {
      Slot s;
      s.type = (*types)[k];
      s.value = std::make_shared<IntTensor>(std::move((*vals)[k]));
      s.fp = fps[k];
      s.same_as_var = dup_var[k];
      s.constant = constant;
      s.hash = output_hash(nh, static_cast<int>(k));
      s.vars = vars;
      s.cuts = std::move(cuts[k]);
      slots_.push_back(std::move(s));
      consumers_.push_back(0);
    }
    stack_.push_back({tmpl, static_cast<uint8_t>(in.size()), {}});
    for (size_t j = 0; j < in.size(); ++j) stack_.back().in[j] = static_cast<uint8_t>(in[j]);
    node_hashes_.push_back(nh);
    const uint64_t saved = graph_hash_;
    graph_hash_ = gh;

    record();
    if (left > 1) expand(left - 1);

    graph_hash_ = saved;
    node_hashes_.pop_back();
    stack_.pop_back();
    slots_.resize(first);
    consumers_.resize(first);
    for (int t : in) consumers_[static_cast<size_t>(t)]--;
  }

  // Keeps the current graph if every output reads an activation and interchangeable variables
  // are used in order.
  void record() {
    std::vector<uint64_t> sink_fps;
    uint64_t used = 0;
    for (size_t t = w_.vars.size(); t < slots_.size(); ++t) {
      if (consumers_[t]) continue;
      if (slots_[t].constant) return;
      sink_fps.push_back(slots_[t].fp);
      used |= slots_[t].vars;
    }
    if (!canonical_use(used)) return;
    // An output equal to a variable only makes sense when every output is one (split(concat(x,
    // y)) -> x, y; transpose(transpose(x)) -> x); next to real outputs it is a detour.
    int copies = 0;
    for (size_t t = w_.vars.size(); t < slots_.size(); ++t) copies += !consumers_[t] && slots_[t].same_as_var;
    if (copies > 0 && copies != static_cast<int>(sink_fps.size())) return;
    store(sink_fps, stack_);
    ++out_->kept;
  }

  bool canonical_use(uint64_t used) const {
    for (const auto& cls : classes_) {
      bool gap = false;
      for (int v : cls) {
        const bool u = (used >> v) & 1;
        if (u && gap) return false;
        gap = gap || !u;
      }
    }
    return true;
  }

  void store(std::vector<uint64_t> sink_fps, const std::vector<Packed>& nodes) {
    std::sort(sink_fps.begin(), sink_fps.end());
    Hasher h(0xf1a9);
    h.add(sink_fps.size());
    for (auto f : sink_fps) h.add(f);
    im_.fps.push_back(h.digest());
    im_.packed.insert(im_.packed.end(), nodes.begin(), nodes.end());
    im_.offsets.push_back(static_cast<uint32_t>(im_.packed.size()));
  }

  // Graphs with no ops whose outputs are one or two activation variables: targets of rules
  // such as split(concat(x, y)) -> x, y.
  void add_identity_graphs() {
    std::vector<int> acts;
    for (size_t i = 0; i < w_.vars.size(); ++i)
      if (!w_.vars[i].constant && w_.vars[i].operand) acts.push_back(static_cast<int>(i));
    auto add = [&](std::vector<int> vs) {
      uint64_t used = 0;
      std::vector<uint64_t> fps;
      std::vector<Packed> nodes;
      for (int v : vs) {
        used |= uint64_t{1} << v;
        fps.push_back(slots_[static_cast<size_t>(v)].fp);
        nodes.push_back({kIdentityOutput, 1, {static_cast<uint8_t>(v)}});
      }
      if (!canonical_use(used)) return;
      store(fps, nodes);
      ++out_->identities;
    };
    for (size_t i = 0; i < acts.size(); ++i) {
      add({acts[i]});
      for (size_t j = i + 1; j < acts.size(); ++j) add({acts[i], acts[j]});
    }
  }

  void expand(int left) {
    const int n = static_cast<int>(slots_.size());
    const auto& ops = w_.ops;
    auto axes_for = [](const auto& table, int64_t rank) -> const auto* {
      for (const auto& [r, v] : table)
        if (r == rank) return &v;
      return static_cast<decltype(&table.front().second)>(nullptr);
    };
    for (int i = 0; i < n; ++i) {
      if (!operand(i)) continue;
      // Copies: the recursion below appends to slots_ (capacity is reserved, but stay safe).
      const Shape sa = slots_[static_cast<size_t>(i)].type.shape;
      const bool act = !slots_[static_cast<size_t>(i)].constant;
      const int64_t r = static_cast<int64_t>(sa.size());
      const auto cuts = slots_[static_cast<size_t>(i)].cuts;
      if (ops.relu && act) try_op(OpKind::kRelu, {}, {i}, left);
      if (ops.scalar_mul) try_op(OpKind::kScalarMul, ir::ScalarParams{ops.scalar}, {i}, left);
      if (act && r == 4) {
        const auto& k = ops.pool_kernel;
        ir::PoolParams pp{k, {1, 1}, {(k[0] - 1) / 2, (k[1] - 1) / 2, (k[0] - 1) / 2, (k[1] - 1) / 2}, false, false};
        if (ops.max_pool) try_op(OpKind::kMaxPool, pp, {i}, left);
        if (ops.avg_pool) try_op(OpKind::kAveragePool, pp, {i}, left);
      }
      if (act && ops.batch_norm && ops.bn_params.size() == 4 && r >= 2) {
        std::vector<int> in{i};
        for (int p : ops.bn_params) in.push_back(p);
        try_op(OpKind::kBatchNorm, ir::NormParams{1, 1e-5}, in, left);
      }
      if (act || ops.transpose_constants)
        if (const auto* perms = axes_for(ops.transposes, r))
          for (const auto& p : *perms) try_op(OpKind::kTranspose, ir::TransposeParams{p}, {i}, left);
      if (ops.enlarge && !act && r == 4) {
        const auto& to = ops.enlarge_to;
        if ((sa[2] < to[0] || sa[3] < to[1]) && sa[2] <= to[0] && sa[3] <= to[1] && (to[0] - sa[2]) % 2 == 0 && (to[1] - sa[3]) % 2 == 0)
          try_op(OpKind::kEnlarge, ir::EnlargeParams{to}, {i}, left);
      }
      if (const auto* axes = axes_for(ops.concat_axes, r))
        for (auto ax : *axes)
          for (auto c : cuts[static_cast<size_t>(ax)])
            try_op(OpKind::kSplit, ir::SplitParams{ax, {c, sa[static_cast<size_t>(ax)] - c}}, {i}, left);
      for (int j = 0; j < n; ++j) {
        if (!operand(j)) continue;
        const Shape sb = slots_[static_cast<size_t>(j)].type.shape;
        const bool bconst = slots_[static_cast<size_t>(j)].constant;
        if (j >= i) {
          if (ops.add) try_op(OpKind::kAdd, {}, {i, j}, left);
          if (ops.mul) try_op(OpKind::kMul, {}, {i, j}, left);
        }
        if (ops.matmul && r >= 2 && sb.size() >= 2) try_op(OpKind::kMatMul, {}, {i, j}, left);
        if (sb.size() == sa.size())
          if (const auto* axes = axes_for(ops.concat_axes, r))
            for (auto ax : *axes) try_op(OpKind::kConcat, ir::AxisParams{ax}, {i, j}, left);
        if (!ops.conv_acts.empty() && act && bconst && r == 4 && sb.size() == 4 && sb[2] % 2 == 1 && sb[3] % 2 == 1 &&
            sb[2] <= ops.max_kernel && sb[3] <= ops.max_kernel) {
          const int64_t ph = (sb[2] - 1) / 2, pw = (sb[3] - 1) / 2;
          for (auto a : ops.conv_acts) {
            const ir::ConvParams cp{{1, 1}, {ph, pw, ph, pw}, {1, 1}, 1, a};
            try_op(OpKind::kConv, cp, {i, j}, left);
            if (!ops.conv_bias) continue;
            for (int k = 0; k < n; ++k)  // with a bias: any weight vector of the right length
              if (operand(k) && slots_[static_cast<size_t>(k)].constant && slots_[static_cast<size_t>(k)].type.shape == Shape{sb[0]})
                try_op(OpKind::kConv, cp, {i, j, k}, left);
          }
        }
      }
    }
    for (const auto& c : ops.constants) try_op(OpKind::kConstant, c.params, {}, left);
  }

  const World& w_;
  const EnumOptions& o_;
  Enumeration* out_;
  Enumeration::Impl& im_;
  std::unordered_map<uint64_t, uint32_t> index_;
  std::vector<std::vector<int>> classes_;
  std::vector<Slot> slots_;
  std::vector<int> consumers_;
  std::vector<Packed> stack_;
  std::vector<uint64_t> node_hashes_;
  uint64_t graph_hash_ = 0;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace

Enumeration enumerate(const World& w, const EnumOptions& o) {
  Enumeration e;
  e.impl = std::make_shared<Enumeration::Impl>();
  e.impl->world = w;
  Enumerator en(w, o, &e);
  en.run();
  return e;
}

std::vector<std::pair<size_t, size_t>> candidate_pairs(const Enumeration& e, size_t max_group, size_t* groups) {
  std::vector<size_t> order(e.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return e.fingerprint(a) < e.fingerprint(b); });
  std::vector<std::pair<size_t, size_t>> pairs;
  size_t ngroups = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && e.fingerprint(order[j]) == e.fingerprint(order[i])) ++j;
    if (j - i >= 2) {
      ++ngroups;
      // Smallest graphs first: with a cap, big groups still pair everything with the simplest.
      std::vector<std::pair<size_t, size_t>> members;  // (ops, index)
      for (size_t k = i; k < j; ++k) members.push_back({e.graph(order[k]).nodes.size(), order[k]});
      std::sort(members.begin(), members.end());
      for (size_t a = 0; a < members.size() && a < max_group; ++a)
        for (size_t b = a + 1; b < members.size(); ++b)
          pairs.push_back({std::min(members[a].second, members[b].second), std::max(members[a].second, members[b].second)});
    }
    i = j;
  }
  if (groups) *groups = ngroups;
  return pairs;
}

}  // namespace rlflow::rules::gen
