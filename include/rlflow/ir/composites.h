#pragma once
// Recognition of composite ops that exporters write out as chains of elementwise ops: GELU (exact
// erf form and tanh approximation, as PyTorch writes them below opset 20), LayerNorm (below
// opset 17) and HardSwish (x * HardSigmoid(x) with alpha 1/6, below opset 14). Each chain becomes one node, which costs one kernel instead of five to nine, and which
// the exporter writes back in the decomposed form when the model's opset has no such op.
//
// This is a canonicalisation, not a search step: it is exact in real arithmetic (the fused op is
// the chain's definition) and a runtime computes it at least as fast. `rlflow optimise` runs it
// before the search and verifies the written model against the input *as imported without it*, so
// a wrong recognition cannot hide behind a verification that shares it.
#include "rlflow/ir/graph.h"

namespace rlflow::ir {

struct CompositeStats {
  int gelu = 0;        // exact (erf) GELU chains replaced
  int gelu_tanh = 0;   // tanh-approximation GELU chains replaced
  int layer_norm = 0;  // ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add chains replaced
  int hard_swish = 0;  // Mul(x, HardSigmoid(x; 1/6, 1/2)) pairs replaced
  int removed_nodes = 0;
  int total() const { return gelu + gelu_tanh + layer_norm + hard_swish; }
};

// Replaces every recognised chain whose interior values nothing else reads. The result computes
// the same function; node names and output names of the chains' last nodes are kept.
Graph recognise_composites(const Graph& g, CompositeStats* stats = nullptr);

}  // namespace rlflow::ir
