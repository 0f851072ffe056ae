// Which nodes a runtime fuses into their producers by itself. Pricing them at zero is what makes
// a cost model answer to the runtime: onnxruntime already fuses Conv+Relu and folds
// BatchNormalization into Conv, so a rewrite doing the same earns nothing there.
#include "rlflow/cost/cost_model.h"
#include "rlflow/ir/composites.h"

#include <algorithm>

namespace rlflow::cost {

namespace {

using ir::OpKind;

bool is_fusable_activation(OpKind k) {
  return k == OpKind::kRelu || k == OpKind::kClip || k == OpKind::kSigmoid || k == OpKind::kTanh || k == OpKind::kHardSigmoid;
}

// A constant that broadcasts along the channel axis of an NCHW conv output: [C,1,1] or [1,C,1,1].
bool per_channel(const ir::TensorType& t, const ir::TensorType& conv_out) {
  if (conv_out.shape.size() < 3) return false;
  const int64_t c = conv_out.shape[1];
  const auto& s = t.shape;
  const size_t spatial = conv_out.shape.size() - 2;
  if (s.size() == spatial + 1) {
    if (s[0] != c) return false;
    for (size_t i = 1; i < s.size(); ++i)
      if (s[i] != 1) return false;
    return true;
  }
  if (s.size() == spatial + 2) {
    if (s[0] != 1 || s[1] != c) return false;
    for (size_t i = 2; i < s.size(); ++i)
      if (s[i] != 1) return false;
    return true;
  }
  return false;
}

}  // namespace

std::vector<bool> onnxruntime_fused_nodes(const ir::Graph& g, const std::vector<bool>& constant) {
  const size_t n = g.size();
  std::vector<bool> fused(n, false);
  std::vector<int32_t> readers(n, 0);  // uses of any output of each node
  std::vector<ir::NodeId> reader(n, -1);  // the reading node, when there is exactly one
  for (size_t i = 0; i < n; ++i)
    for (const auto& in : g.node(static_cast<ir::NodeId>(i)).inputs) {
      ++readers[static_cast<size_t>(in.node)];
      reader[static_cast<size_t>(in.node)] = static_cast<ir::NodeId>(i);
    }
  std::vector<bool> is_output(n, false);
  for (const auto& o : g.outputs()) is_output[static_cast<size_t>(o.value.node)] = true;
  auto sole_reader = [&](ir::NodeId p) { return readers[static_cast<size_t>(p)] == 1 && !is_output[static_cast<size_t>(p)]; };
  // conv_tail[p]: p's output is a Conv's (without an activation), possibly through nodes already
  // folded into it; further BatchNorm/Add/Mul and one activation can still fold in.
  std::vector<bool> conv_tail(n, false);
  for (size_t i = 0; i < n; ++i) {
    const auto& node = g.node(static_cast<ir::NodeId>(i));
    if (node.kind == OpKind::kConv) {
      conv_tail[i] = std::get<ir::ConvParams>(node.params).act == ir::Activation::kNone;
      continue;
    }
    if (constant[i] || node.inputs.empty()) continue;
    const ir::NodeId p = node.inputs[0].node;
    const auto pi = static_cast<size_t>(p);
    if (is_fusable_activation(node.kind)) {
      const bool after_gemm = g.node(p).kind == OpKind::kGemm;
      fused[i] = (conv_tail[pi] || after_gemm) && sole_reader(p);
      continue;
    }
    if (node.kind == OpKind::kBatchNorm) {
      bool params_constant = true;
      for (size_t k = 1; k < node.inputs.size(); ++k) params_constant = params_constant && constant[static_cast<size_t>(node.inputs[k].node)];
      fused[i] = conv_tail[i] = params_constant && conv_tail[pi] && sole_reader(p);
      continue;
    }
    if ((node.kind == OpKind::kAdd || node.kind == OpKind::kMul) && node.inputs.size() == 2) {
      for (int side = 0; side < 2; ++side) {
        const auto a = node.inputs[side], b = node.inputs[1 - side];
        const auto ai = static_cast<size_t>(a.node);
        if (conv_tail[ai] && sole_reader(a.node) && constant[static_cast<size_t>(b.node)] && per_channel(g.type(b), g.type(a))) {
          fused[i] = conv_tail[i] = true;
          break;
        }
      }
    }
  }
  // Transformer fusions (BiasGeluFusion, SkipLayerNormFusion, MatMulScaleFusion): a node folded
  // into the one op that reads it.
  auto read_by = [&](size_t i, ir::OpKind k) {
    return sole_reader(static_cast<ir::NodeId>(i)) && g.node(reader[i]).kind == k;
  };
  auto scalar_const = [&](ir::ValueRef v) { return constant[static_cast<size_t>(v.node)] && g.type(v).numel() == 1; };
  auto bias_of = [&](const ir::Node& node, int side) {  // a 1-D constant over the other operand's last axis
    const auto a = node.inputs[static_cast<size_t>(1 - side)], b = node.inputs[static_cast<size_t>(side)];
    const auto& ta = g.type(a);
    const auto& tb = g.type(b);
    return constant[static_cast<size_t>(b.node)] && !constant[static_cast<size_t>(a.node)] && tb.shape.size() == 1 &&
           !ta.shape.empty() && tb.shape[0] == ta.shape.back();
  };
  std::vector<bool> skip_add(n, false);  // a residual Add that SkipLayerNormalization absorbs
  for (size_t i = n; i-- > 0;) {
    const auto& node = g.node(static_cast<ir::NodeId>(i));
    if (fused[i] || constant[i] || node.inputs.size() != 2) continue;
    if (node.kind == OpKind::kAdd) {
      const bool bias = bias_of(node, 0) || bias_of(node, 1);
      // BiasGelu: bias Add then Gelu. SkipLayerNormalization: a residual Add (and a bias Add
      // before it) then LayerNorm.
      if (bias && read_by(i, OpKind::kGelu)) fused[i] = true;
      else if (!bias && g.type(node.inputs[0]) == g.type(node.inputs[1]) && read_by(i, OpKind::kLayerNorm))
        fused[i] = skip_add[i] = true;
      else if (bias && sole_reader(static_cast<ir::NodeId>(i)) && skip_add[static_cast<size_t>(reader[i])])
        fused[i] = true;
      continue;
    }
    if (node.kind == OpKind::kMul || node.kind == OpKind::kDiv) {
      // FusedMatMul's alpha: a scalar scale of a MatMul's output, or of one of its inputs.
      for (int side = 0; side < 2 && !fused[i]; ++side) {
        if (node.kind == OpKind::kDiv && side == 0) continue;
        const auto other = node.inputs[static_cast<size_t>(1 - side)];
        if (!scalar_const(node.inputs[static_cast<size_t>(side)]) || constant[static_cast<size_t>(other.node)]) continue;
        const bool after = g.node(other.node).kind == OpKind::kMatMul && sole_reader(other.node);
        const bool before = read_by(i, OpKind::kMatMul);
        fused[i] = after || before;
      }
    }
  }
  // SimplifiedLayerNormFusion: onnxruntime turns the RMSNorm chain into one kernel, measured the same
  // as the RMSNormalization op (0.98-1.02x, docs/measurements/measure_fused_ops-2026-11-25.md). The chain is
  // priced as its root, the scale Mul: one streaming pass over x, the scale and y, as the op is.
  for (const auto& chain : ir::fusion_chains(g, "rms_norm"))
    for (size_t k = 1; k < chain.size(); ++k) fused[static_cast<size_t>(chain[k])] = true;
  // onnxruntime's CastElimination drops a Cast to the type its input already has (level 1), so one
  // costs nothing there, and removing it (recognise_composites) earns nothing on this target.
  for (size_t i = 0; i < n; ++i)
    if (ir::is_noop_cast(g, static_cast<ir::NodeId>(i))) fused[i] = true;
  // No such entry for rotary embeddings: onnxruntime leaves HF's rotate_half chain (Slice, Neg, Concat,
  // Mul, Add) as separate kernels, and the RotaryEmbedding op measured 3-7x faster than that chain
  // (docs/measurements/measure_fused_ops-2026-11-25.md), so the chain keeps its own ops' costs.
  return fused;
}

std::vector<bool> cudnn_runner_fused_nodes(const ir::Graph& g, const std::vector<bool>& constant) {
  const size_t n = g.size();
  std::vector<bool> fused(n, false);
  std::vector<int32_t> readers(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (const auto& in : g.node(static_cast<ir::NodeId>(i)).inputs) ++readers[static_cast<size_t>(in.node)];
  for (const auto& o : g.outputs()) ++readers[static_cast<size_t>(o.value.node)];  // an output is read too
  for (size_t i = 0; i < n; ++i) {
    const auto& node = g.node(static_cast<ir::NodeId>(i));
    if (node.kind != OpKind::kRelu || constant[i] || node.inputs.size() != 1) continue;
    const auto p = node.inputs[0];
    const auto& conv = g.node(p.node);
    fused[i] = conv.kind == OpKind::kConv && p.index == 0 && !constant[static_cast<size_t>(p.node)] &&
               std::get<ir::ConvParams>(conv.params).act == ir::Activation::kNone && readers[static_cast<size_t>(p.node)] == 1;
  }
  return fused;
}

ir::Graph cudnn_runner_graph(const ir::Graph& g) {
  const auto fused = cudnn_runner_fused_nodes(g, ir::constant_nodes(g));
  if (std::find(fused.begin(), fused.end(), true) == fused.end()) return g;
  ir::Graph out = g;
  // Each fused Relu's readers (and outputs) read its Conv instead; the Conv carries the activation.
  auto through = [&](ir::ValueRef v) {
    const auto i = static_cast<size_t>(v.node);
    return fused[i] ? g.node(v.node).inputs[0] : v;
  };
  for (size_t i = 0; i < out.size(); ++i) {
    auto& node = out.mutable_node(static_cast<ir::NodeId>(i));
    if (fused[i]) {
      std::get<ir::ConvParams>(out.mutable_node(node.inputs[0].node).params).act = ir::Activation::kRelu;
      continue;
    }
    for (auto& in : node.inputs) in = through(in);
  }
  auto outs = out.outputs();
  for (auto& o : outs) o.value = through(o.value);
  out.set_outputs(std::move(outs));
  return ir::remove_dead_nodes(std::move(out));
}

}  // namespace rlflow::cost
