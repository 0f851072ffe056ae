#include <algorithm>

#include "rlflow/ir/evaluator.h"

namespace rlflow::ir {

TensorPtr materialize_constant(const ConstantParams& p) {
  const auto n = static_cast<size_t>(numel(p.shape));
  std::vector<double> v(n, p.fill == ConstantFill::kValue ? p.value : 0.0);
  if (p.fill == ConstantFill::kIdentityConv && p.shape.size() == 4) {
    // [C, C/g, kh, kw]: output channel c reads its own input channel at the kernel centre.
    const int64_t c_out = p.shape[0], c_in = p.shape[1], kh = p.shape[2], kw = p.shape[3];
    const int64_t group_in = c_in;
    for (int64_t c = 0; c < c_out; ++c) {
      const int64_t ci = c % group_in;
      v[static_cast<size_t>(((c * c_in + ci) * kh + kh / 2) * kw + kw / 2)] = 1.0;
    }
  } else if (p.fill == ConstantFill::kAvgPoolKernel && p.shape.size() == 4) {
    std::fill(v.begin(), v.end(), 1.0 / static_cast<double>(p.shape[2] * p.shape[3]));
  }
  return Tensor::from_doubles(p.dtype, p.shape, v);
}

Expected<Graph> fold_constants(const Graph& g, const Evaluator& eval) {
  Graph out;
  out.meta() = g.meta();
  // constant_nodes(), extended to the opaque nodes this evaluator runs.
  std::vector<bool> constant(g.size(), false), kept(g.size(), false);
  auto out_bytes_of = [&](const Node& n) {
    size_t b = 0;
    for (const auto& t : n.outputs) b += static_cast<size_t>(t.numel()) * dtype_size(t.dtype);
    return b;
  };
  // A large weight read both by a node that stays and by a transform that would fold (a tied
  // embedding: Gather(E, ids) and MatMul(x, Transpose(E))) keeps the transform as a node, so the
  // weight is written once. Keeping one transform may leave another weight read by a node that
  // stays, so this runs until nothing changes.
  for (int round = 0; round < 8; ++round) {
    for (size_t i = 0; i < g.size(); ++i) {
      const auto& n = g.node(static_cast<NodeId>(i));
      constant[i] = false;
      if (kept[i] || n.kind == OpKind::kInput || is_quantization_op(n) || (n.kind == OpKind::kOpaque && !eval.can_evaluate(n))) continue;
      bool all = true;
      size_t in_bytes = 0;
      for (const auto& in : n.inputs) {
        all = all && constant[static_cast<size_t>(in.node)];
        in_bytes += static_cast<size_t>(g.type(in).numel()) * dtype_size(g.type(in).dtype);
      }
      if (n.kind == OpKind::kOpaque && out_bytes_of(n) > std::max(in_bytes, kMaxFoldGrowthBytes)) all = false;
      constant[i] = all;
    }
    std::vector<bool> read_live(g.size(), false);
    for (size_t i = 0; i < g.size(); ++i)
      if (!constant[i])
        for (const auto& in : g.node(static_cast<NodeId>(i)).inputs) read_live[static_cast<size_t>(in.node)] = true;
    for (const auto& o : g.outputs()) read_live[static_cast<size_t>(o.value.node)] = true;
    bool changed = false;
    for (size_t i = 0; i < g.size(); ++i) {
      const auto& n = g.node(static_cast<NodeId>(i));
      if (!constant[i] || n.kind == OpKind::kWeight || n.kind == OpKind::kConstant || out_bytes_of(n) < kNoDuplicateBytes) continue;
      for (const auto& in : n.inputs) {
        const auto& w = g.node(in.node);
        if (w.kind == OpKind::kWeight && w.value && read_live[static_cast<size_t>(in.node)] && w.value->nbytes() >= kNoDuplicateBytes) {
          kept[i] = changed = true;
          break;
        }
      }
    }
    if (!changed) break;
  }
  // Folded outputs of multi-output nodes become one Weight node each.
  std::vector<std::vector<ValueRef>> remap(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<NodeId>(i));
    auto keep = [&] {
      Node copy = n;
      for (auto& in : copy.inputs) in = remap[static_cast<size_t>(in.node)][static_cast<size_t>(in.index)];
      NodeId id = out.add(std::move(copy));
      for (size_t k = 0; k < n.outputs.size(); ++k) remap[i].push_back({id, static_cast<int32_t>(k)});
    };
    if (!constant[i] || n.kind == OpKind::kWeight) {  // weights are already folded
      keep();
      continue;
    }
    std::vector<TensorPtr> values;
    if (n.kind == OpKind::kConstant) {
      values.push_back(materialize_constant(std::get<ConstantParams>(n.params)));
    } else {
      std::vector<TensorPtr> ins;
      for (const auto& in : n.inputs) {
        const auto& src = out.node(remap[static_cast<size_t>(in.node)][static_cast<size_t>(in.index)].node);
        ins.push_back(src.value);
      }
      // An input that stayed a node (below) keeps this one a node too.
      if (std::any_of(ins.begin(), ins.end(), [](const TensorPtr& t) { return !t; })) {
        keep();
        continue;
      }
      auto r = eval.evaluate(n, ins);
      // An ONNX op whose value the evaluator does not claim for these inputs (a NaN where
      // onnxruntime's result depends on its position) stays a node, for the runtime to compute.
      if (!r && r.error().code == ErrorCode::kUnsupported && n.kind == OpKind::kOpaque) {
        keep();
        continue;
      }
      if (!r) return r.error().with_context("folding " + node_label(g, static_cast<NodeId>(i)));
      values = std::move(*r);
    }
    for (size_t k = 0; k < values.size(); ++k) {
      Node w;
      w.kind = OpKind::kWeight;
      w.outputs = {values[k]->type()};
      w.value = values[k];
      if (k < n.output_names.size()) w.name = n.output_names[k];
      if (w.outputs[0] != n.outputs[k])
        return Error::internal("folding " + node_label(g, static_cast<NodeId>(i)) + " produced " + w.outputs[0].str() +
                               ", expected " + n.outputs[k].str());
      remap[i].push_back({out.add(std::move(w)), 0});
    }
  }
  for (const auto& o : g.outputs()) out.add_output(remap[static_cast<size_t>(o.value.node)][static_cast<size_t>(o.value.index)], o.name);
  return remove_dead_nodes(std::move(out));
}

}  // namespace rlflow::ir
