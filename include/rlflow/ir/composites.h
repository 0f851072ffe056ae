#pragma once
// Recognition of composite ops that exporters write out as chains of elementwise ops: GELU (exact
// erf form and tanh approximation, as PyTorch writes them below opset 20), LayerNorm (below
// opset 17), HardSwish (x * HardSigmoid(x) with alpha 1/6, below opset 14) and RMSNorm (x * rsqrt(mean(x^2) + eps)
// * scale, as PyTorch writes LLaMA's RMSNorm, below opset 23) and RotaryEmbedding (HF's rotate_half
// form, where cos and sin provably repeat their first half, below opset 23) and Attention (eager
// MatMul/scale/mask/Softmax/MatMul attention, 4-D or nn.MultiheadAttention's 3-D, HF LLaMA's repeat_kv
// peeled into GQA, below opset 23). Each chain becomes
// one node, which costs one kernel instead of five to nine, where the model's opset has that op.
//
// This is a canonicalisation, not a search step: it is exact in real arithmetic (the fused op is
// the chain's definition) and a runtime computes it at least as fast. `rlflow optimise` runs it
// before the search and verifies the written model against the input *as imported without it*, so
// a wrong recognition cannot hide behind a verification that shares it.
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

struct CompositeStats {
  int gelu = 0;        // exact (erf) GELU chains replaced
  int gelu_tanh = 0;   // tanh-approximation GELU chains replaced
  int layer_norm = 0;  // ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add chains replaced
  int hard_swish = 0;  // Mul(x, HardSigmoid(x; 1/6, 1/2)) pairs replaced
  int rms_norm = 0;    // Pow/ReduceMean/Add/Sqrt/(Div | Div(1, .) or Reciprocal, Mul)/Mul chains replaced
  int rotary_embedding = 0;  // x * cos + Concat(Neg(x[.., D/2:]), x[.., :D/2]) * sin chains replaced
  int attention = 0;  // MatMul(Softmax(scale * MatMul(Q, K^T) [+ mask]), V) chains replaced
  int noop_cast = 0;  // Casts to the type their input already has (HF's float32 -> float32), removed
  int removed_nodes = 0;
  std::vector<FusionRecord> records;  // every chain fused, in the order they were found
  int total() const { return gelu + gelu_tanh + layer_norm + hard_swish + rms_norm + rotary_embedding + attention + noop_cast; }
};

// The first default-domain opset with each fused op: below it the exporter writes the chain back.
inline constexpr int64_t kLayerNormOpset = 17, kGeluOpset = 20, kHardSwishOpset = 14, kRMSNormOpset = 23,
                        kRotaryEmbeddingOpset = 23, kAttentionOpset = 23;

// The fusions recognise_composites runs, by name: layer_norm, gelu (both approximations),
// hard_swish, rms_norm, rotary_embedding, attention. A set of these names disables them.
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

// The RMSNorm chains recognise_composites fuses at kRMSNormOpset, whatever the graph's opset: each
// one's nodes, its root (the scale Mul, which the fused op replaces) first. For cost models of a
// runtime that fuses the chain by itself (onnxruntime's SimplifiedLayerNormalization).
std::vector<std::vector<NodeId>> rms_norm_chains(const Graph& g);

}  // namespace rlflow::ir
