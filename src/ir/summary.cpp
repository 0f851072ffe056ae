#include "rlflow/ir/summary.h"
#include "rlflow/ir/op_def.h"

#include <algorithm>

namespace rlflow::ir {

std::string op_display_name(const Node& n) {
  // The ONNX op the node is written as (see onnx/export.cpp); sources keep their IR names.
  if (n.kind == OpKind::kOpaque) return std::get<OpaqueParams>(n.params).op_type;
  const OpInfo& op = op_info(n.kind);
  return std::string(op.onnx_type.empty() ? op.name : op.onnx_type);
}

double op_flops(OpKind kind, const OpParams& params, const std::vector<TensorType>& inputs,
                const std::vector<TensorType>& outputs) {
  if (kind == OpKind::kInput || kind == OpKind::kWeight || outputs.empty()) return 0;
  if (const OpDef* def = op_info(kind).def; def && def->flops) return def->flops(params, inputs, outputs);  // its record's
  const double out = static_cast<double>(outputs[0].numel());
  switch (kind) {
    case OpKind::kConv: {
      if (inputs.size() < 2) return 0;
      const auto& w = inputs[1].shape;
      double k = 1;
      for (size_t i = 1; i < w.size(); ++i) k *= static_cast<double>(w[i]);
      return 2.0 * out * k;
    }
    case OpKind::kMatMul:
      if (inputs.empty() || inputs[0].shape.empty()) return 0;
      return 2.0 * out * static_cast<double>(inputs[0].shape.back());
    case OpKind::kGemm: {
      const auto* p = std::get_if<GemmParams>(&params);
      if (!p || inputs.empty() || inputs[0].shape.size() != 2) return 0;
      const auto& a = inputs[0].shape;
      return 2.0 * out * static_cast<double>(p->trans_a ? a[0] : a[1]);
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: {
      const auto* p = std::get_if<PoolParams>(&params);
      double k = 1;
      if (p)
        for (auto v : p->kernel) k *= static_cast<double>(v);
      return out * k;
    }
    case OpKind::kGlobalAveragePool:
    case OpKind::kReduceMean:
      return inputs.empty() ? 0 : static_cast<double>(inputs[0].numel());
    case OpKind::kGelu:  // erf or tanh, a multiply-add, two multiplies
      return 4.0 * out;
    case OpKind::kHardSigmoid:  // a multiply-add and a clamp
      return 2.0 * out;
    case OpKind::kHardSwish:  // HardSigmoid, then a multiply
      return 3.0 * out;
    case OpKind::kRMSNorm:  // square, sum, scale by 1/rms, scale by the weight
      return 4.0 * out;
    case OpKind::kAttention: {  // the two GEMMs, Q K^T and P V: 2 * L * (|Q| + |Y|) in both layouts
      if (inputs.size() < 3 || inputs[1].rank() < 3) return 0;
      const double len = static_cast<double>(inputs[1].shape[inputs[1].rank() == 4 ? 2 : 1]);
      return 2.0 * len * (static_cast<double>(inputs[0].numel()) + out);
    }
    case OpKind::kSoftmax:
    case OpKind::kLayerNorm:
    case OpKind::kBatchNorm:
      return 5.0 * out;
    case OpKind::kTranspose: case OpKind::kReshape: case OpKind::kFlatten: case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: case OpKind::kConcat: case OpKind::kSplit: case OpKind::kSlice: case OpKind::kGather:
    case OpKind::kPad: case OpKind::kCast: case OpKind::kConstant: case OpKind::kOpaque:
      return 0;
    default:  // elementwise ops (plain ones included): one per output element
      return out;
  }
  return out;
}

double node_flops(const Graph& g, NodeId id) {
  const auto& n = g.node(id);
  std::vector<TensorType> ins;
  for (const auto& in : n.inputs) ins.push_back(g.type(in));
  return op_flops(n.kind, n.params, ins, n.outputs);
}

GraphSummary summarize(const Graph& g) {
  GraphSummary s;
  s.num_parameters = g.num_parameters();
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<NodeId>(i));
    if (n.kind == OpKind::kInput || n.kind == OpKind::kWeight) continue;
    ++s.num_ops;
    s.op_counts[op_display_name(n)]++;
    // A fused activation is its own node in the ONNX file: count it as written.
    if (n.kind == OpKind::kConv && std::get<ConvParams>(n.params).act != Activation::kNone) {
      const auto act = std::get<ConvParams>(n.params).act;
      ++s.num_ops;
      s.op_counts[act == Activation::kRelu ? "Relu" : act == Activation::kSigmoid ? "Sigmoid" : "Tanh"]++;
    }
    s.flops += node_flops(g, static_cast<NodeId>(i));
    if (n.kind == OpKind::kOpaque) {
      auto t = op_display_name(n);
      if (std::find(s.opaque_ops.begin(), s.opaque_ops.end(), t) == s.opaque_ops.end()) s.opaque_ops.push_back(t);
    }
  }
  return s;
}

namespace {

double type_bytes(const TensorType& t) {
  double n = static_cast<double>(dtype_size(t.dtype));
  for (auto d : t.shape) n *= static_cast<double>(std::max<int64_t>(d, 0));
  return n;
}

}  // namespace

MemoryEstimate estimate_run_memory(const Graph& g) {
  MemoryEstimate m;
  const size_t n = g.size();
  std::vector<size_t> last_use(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (const auto& in : g.node(static_cast<NodeId>(i)).inputs) last_use[static_cast<size_t>(in.node)] = i;
  for (const auto& o : g.outputs()) last_use[static_cast<size_t>(o.value.node)] = n;
  std::vector<double> bytes(n, 0);
  double live = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<NodeId>(i);
    const auto& node = g.node(id);
    for (const auto& t : node.outputs) bytes[i] += type_bytes(t);
    if (bytes[i] > m.largest_bytes) {
      m.largest_bytes = bytes[i];
      m.largest = node.kind == OpKind::kInput ? "input '" + node.name + "'"
                  : node.kind == OpKind::kWeight ? "weight '" + node.name + "'"
                                                 : "the output of " + node_label(g, id);
    }
    if (node.kind == OpKind::kWeight) {
      m.weight_bytes += bytes[i];
      continue;  // weights live for the whole run: counted once, below
    }
    live += bytes[i];
    m.peak_bytes = std::max(m.peak_bytes, live);
    for (const auto& in : node.inputs) {
      const auto k = static_cast<size_t>(in.node);
      if (last_use[k] == i && g.node(in.node).kind != OpKind::kWeight) {
        live -= bytes[k];
        bytes[k] = 0;  // a value read twice by this node is freed once
      }
    }
  }
  m.peak_bytes += m.weight_bytes;
  return m;
}

}  // namespace rlflow::ir
