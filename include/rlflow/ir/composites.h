#pragma once
// Recognition of composite ops that exporters write out as chains of elementwise ops (GELU, LayerNorm,
// HardSwish, RMSNorm, RotaryEmbedding, Attention: fusions() lists them). Each chain becomes one node,
// which costs one kernel instead of five to nine, where the model's opset has that op.
//
// This is a canonicalisation, not a search step: it is exact in real arithmetic (the fused op is
// the chain's definition) and a runtime computes it at least as fast. `rlflow optimise` runs it
// before the search and verifies the written model against the input *as imported without it*, so
// a wrong recognition cannot hide behind a verification that shares it.
//
// Each fusion is one file in src/ir/fusions/ and one line in src/ir/fusions/registry.def.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::ir {

// One chain fused: the fusion's name (fusion_names()) and the nodes of the input graph it replaced,
// its root first (the fused op takes the root's place and keeps its name).
struct FusionRecord {
  std::string fusion;
  std::vector<NodeId> chain;
};

// A candidate chain a fusion looked at and did not fuse: the root it started from and why (the
// recogniser's own words, e.g. "scale 0.49, not 0.5"). Roots whose op cannot start the chain are
// not candidates and leave nothing here. `optimise -vv` logs them.
struct FusionRejection {
  std::string fusion;
  NodeId root = 0;
  std::string why;
};

// What recognise_composites did. `counts` is keyed by count key: a fusion's name, a variant a
// fusion counts apart (gelu_tanh), and noop_cast; a key that never fired is absent.
struct CompositeStats {
  std::map<std::string, int> counts;
  int removed_nodes = 0;
  std::vector<FusionRecord> records;        // every chain fused, in the order they were found
  std::vector<FusionRejection> rejections;  // every candidate that failed, in the order tried
  int count(const std::string& key) const {
    auto it = counts.find(key);
    return it == counts.end() ? 0 : it->second;
  }
  int total() const {
    int n = 0;
    for (const auto& [k, c] : counts) n += c;
    return n;
  }
  // "2 gelu, 1 layer_norm, 3 noop_cast" (the keys that fired, in registry order); "" when none.
  std::string summary() const;
};

// One registered fusion (src/ir/fusions/registry.def lists them, in the order they are tried at each
// root: the first that matches wins).
struct FusionInfo {
  std::string name;             // --disable-fusion's name, FusionRecord::fusion
  std::string onnx_op;          // the default-domain op it writes
  int64_t since_opset = 0;      // the first opset with that op: below it the chain stays a chain
  std::vector<std::string> count_keys;  // the keys it counts under in CompositeStats (its name first)
  std::string chain;            // the chain it recognises, in a few words (help text, docs)
};
const std::vector<FusionInfo>& fusions();
// Every count key: the fusions' in registry order, then noop_cast.
const std::vector<std::string>& fusion_count_keys();

// The first default-domain opset with each fused op: below it the exporter writes the chain back
// (the export and the onnxruntime pricing use these too).
inline constexpr int64_t kLayerNormOpset = 17, kGeluOpset = 20, kHardSwishOpset = 14, kRMSNormOpset = 23,
                        kRotaryEmbeddingOpset = 23, kAttentionOpset = 23;

// The fusions' names, in registry order. A set of these names disables them.
const std::vector<std::string>& fusion_names();
using FusionSet = std::set<std::string>;

// A Cast to the type its input already has computes nothing (at any opset): recognise_composites
// has its readers read the input instead and drops it (one that is a graph output stays).
bool is_noop_cast(const Graph& g, NodeId id);

// Replaces every recognised chain whose interior values nothing else reads, and whose fused op
// exists at `opset` (default: the graph's own): a chain the exporter would write back as a chain
// stays one, so a cost model never credits a fusion the written file does not have. The result
// computes the same function; node names and output names of the chains' last nodes are kept.
// No-op Casts left outside the chains are removed too (is_noop_cast).
// A fusion named in `disabled` leaves its chains as they are (optimise also tries the fusions
// without attention: onnxruntime's CPU Attention kernel is slower than the eager chain at small head
// sizes).
Graph recognise_composites(const Graph& g, CompositeStats* stats = nullptr, std::optional<int64_t> opset = std::nullopt,
                           const FusionSet& disabled = {});

// The chains the fusion `name` matches in g, whatever the graph's opset: each one's nodes, its root
// (which the fused op replaces) first. For cost models of a runtime that fuses a chain by itself
// (onnxruntime's SimplifiedLayerNormalization for rms_norm). Unknown name: none.
std::vector<std::vector<NodeId>> fusion_chains(const Graph& g, const std::string& name);

}  // namespace rlflow::ir
