// The fusion registry and the driver that runs it (include/rlflow/ir/composites.h); each fusion's
// recogniser lives in its own file in src/ir/fusions/.
#include "rlflow/ir/composites.h"

#include <algorithm>
#include <map>

#include "fusions/fusion.h"
#include "rlflow/ir/shape_inference.h"

namespace rlflow::ir {

namespace fusion {

#define RLFLOW_FUSION(name) const Fusion& name##_fusion();
#include "fusions/registry.def"
#undef RLFLOW_FUSION

const std::vector<const Fusion*>& registry() {
  static const std::vector<const Fusion*> all = {
#define RLFLOW_FUSION(name) &name##_fusion(),
#include "fusions/registry.def"
#undef RLFLOW_FUSION
  };
  return all;
}

}  // namespace fusion

const std::vector<FusionInfo>& fusions() {
  static const std::vector<FusionInfo> all = [] {
    std::vector<FusionInfo> out;
    for (const auto* f : fusion::registry()) out.push_back(f->info());
    return out;
  }();
  return all;
}

const std::vector<std::string>& fusion_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& f : fusions()) out.push_back(f.name);
    return out;
  }();
  return names;
}

const std::vector<std::string>& fusion_count_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const auto& f : fusions()) out.insert(out.end(), f.count_keys.begin(), f.count_keys.end());
    out.push_back("noop_cast");
    return out;
  }();
  return keys;
}

std::string CompositeStats::summary() const {
  std::string out;
  for (const auto& key : fusion_count_keys())
    if (int n = count(key); n > 0) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + key;
  return out;
}

bool is_noop_cast(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  return n.kind == OpKind::kCast && n.inputs.size() == 1 && n.outputs.size() == 1 && g.type(n.inputs[0]) == n.outputs[0];
}

namespace {

// Readers of a no-op Cast read its input instead (through any run of them); a Cast that is a graph
// output stays, keeping the output's producer. Returns how many Casts nothing reads any more
// (remove_dead_nodes then drops them).
int bypass_noop_casts(Graph* g) {
  std::vector<bool> is_output(g->size(), false);
  for (const auto& o : g->outputs()) is_output[static_cast<size_t>(o.value.node)] = true;
  auto skip = [&](NodeId id) { return is_noop_cast(*g, id) && !is_output[static_cast<size_t>(id)]; };
  int n = 0;
  for (size_t i = 0; i < g->size(); ++i) n += skip(static_cast<NodeId>(i));
  if (n == 0) return 0;
  for (size_t i = 0; i < g->size(); ++i) {
    const auto id = static_cast<NodeId>(i);
    for (size_t k = 0; k < g->node(id).inputs.size(); ++k) {
      ValueRef v = g->node(id).inputs[k];
      while (skip(v.node)) v = g->node(v.node).inputs[0];
      g->mutable_node(id).inputs[k] = v;
    }
  }
  return n;
}

}  // namespace

Graph recognise_composites(const Graph& g, CompositeStats* stats, std::optional<int64_t> opset, const FusionSet& disabled) {
  const int64_t v = opset ? *opset : g.meta().opset("");
  // A fusion runs where its op exists at the output's opset and it is not disabled by name.
  std::vector<const fusion::Fusion*> on;
  for (const auto* f : fusion::registry())
    if (v >= f->info().since_opset && disabled.count(f->info().name) == 0) on.push_back(f);
  CompositeStats local;
  CompositeStats& st = stats ? *stats : local;
  fusion::Matcher m(g);
  const std::vector<bool> quantized = quantization_boundary(g);
  // Roots are visited last to first so a chain is claimed whole before a node inside it could be
  // taken as another chain's root. The fused node replaces the root in place: its inputs all come
  // before the root, so the order stays topological, and the chain's other nodes fall dead.
  std::vector<std::pair<const fusion::Fusion*, fusion::Match>> found;
  std::vector<FusionRejection> rejected;  // at one root, kept when no fusion takes it
  for (size_t i = g.size(); i-- > 0;) {
    const auto id = static_cast<NodeId>(i);
    rejected.clear();
    bool matched = false;
    for (const auto* f : on) {
      std::string why;
      auto mt = f->match(m, id, &why);
      if (mt && std::any_of(mt->chain.begin(), mt->chain.end(), [&](NodeId n) { return quantized[static_cast<size_t>(n)]; })) {
        why = "the chain reads or feeds a quantization op (the runtime's quantized kernels are built from it)";
        mt.reset();
      }
      if (!mt) {
        if (!why.empty() && stats && !m.claimed(id)) rejected.push_back({f->info().name, id, std::move(why)});
        continue;
      }
      ++st.counts[mt->count_key.empty() ? f->info().name : mt->count_key];
      m.claim(mt->chain);
      st.records.push_back({f->info().name, mt->chain});
      found.emplace_back(f, std::move(*mt));
      matched = true;
      break;
    }
    if (!matched) st.rejections.insert(st.rejections.end(), rejected.begin(), rejected.end());
  }
  Graph out = g;
  if (!found.empty()) {
    // Each fusion makes its nodes (some add nodes around them: then the graph is sorted again).
    bool added = false;
    for (const auto* f : fusion::registry()) {
      std::vector<fusion::Match*> mine;
      for (auto& [by, mt] : found)
        if (by == f) mine.push_back(&mt);
      if (!mine.empty()) added = f->build(g, &out, mine) || added;
    }
    for (auto& [by, mt] : found) out.mutable_node(mt.chain.front()) = std::move(mt.node);
    if (added) {
      auto sorted = topo_sorted(out.nodes(), out.outputs(), out.meta());
      if (!sorted) return g;
      out = std::move(*sorted);
    }
    out = remove_dead_nodes(std::move(out));
  }
  // No-op Casts outside the chains (those inside went with them).
  const int casts = bypass_noop_casts(&out);
  if (casts > 0) out = remove_dead_nodes(std::move(out));
  if (found.empty() && casts == 0) return g;
  if (casts > 0) st.counts["noop_cast"] += casts;
  st.removed_nodes += static_cast<int>(g.num_ops() - out.num_ops());
  return out;
}

std::vector<std::vector<NodeId>> fusion_chains(const Graph& g, const std::string& name) {
  std::vector<std::vector<NodeId>> out;
  const auto& all = fusion::registry();
  auto it = std::find_if(all.begin(), all.end(), [&](const fusion::Fusion* f) { return f->info().name == name; });
  if (it == all.end()) return out;
  fusion::Matcher m(g);
  for (size_t i = g.size(); i-- > 0;) {
    std::string why;
    if (auto mt = (*it)->match(m, static_cast<NodeId>(i), &why)) {
      m.claim(mt->chain);
      out.push_back(std::move(mt->chain));
    }
  }
  return out;
}

}  // namespace rlflow::ir
