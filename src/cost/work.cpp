// FLOPs and bytes of one op, from its signature alone.
#include "rlflow/cost/analytic.h"
#include "rlflow/ir/op_def.h"
#include "rlflow/ir/summary.h"

namespace rlflow::cost {

namespace {

double bytes_of(const ir::TensorType& t) { return static_cast<double>(t.numel()) * static_cast<double>(ir::dtype_size(t.dtype)); }

double total_bytes(const std::vector<ir::TensorType>& ts) {
  double b = 0;
  for (const auto& t : ts) b += bytes_of(t);
  return b;
}

// A 1x1, stride-1, undilated, ungrouped convolution is a GEMM over the pixels, and libraries run
// it as one (ATen's CPU convolution sends it to its GEMM path at small batch; cuDNN's implicit
// GEMM degenerates to a plain one).
bool is_pointwise_conv(const OpSignature& s) {
  const auto* p = std::get_if<ir::ConvParams>(&s.params);
  if (!p || p->group != 1 || s.inputs.size() < 2) return false;
  const auto& w = s.inputs[1].shape;
  for (size_t i = 2; i < w.size(); ++i)
    if (w[i] != 1) return false;
  for (auto v : p->strides)
    if (v != 1) return false;
  for (auto v : p->dilations)
    if (v != 1) return false;
  for (auto v : p->pads)
    if (v != 0) return false;
  return true;
}

}  // namespace

double signature_flops(const OpSignature& s) { return ir::op_flops(s.kind, s.params, s.inputs, s.outputs); }

OpWork op_work(const OpSignature& s) {
  using ir::CostClass;
  OpWork w;
  w.flops = signature_flops(s);
  w.bytes = total_bytes(s.inputs) + total_bytes(s.outputs);
  w.half = !s.outputs.empty() && ir::is_half(s.outputs[0].dtype);
  if (const ir::OpDef* def = ir::op_info(s.kind).def; def && def->bytes && !s.outputs.empty()) w.bytes = def->bytes(s.inputs, s.outputs);  // its record's
  switch (ir::op_info(s.kind).cost) {
    case CostClass::kConv:
      // A fused activation is applied to the accumulator before the store: no extra memory pass.
      w.compute = is_pointwise_conv(s) ? ComputeClass::kMatMul : ComputeClass::kConv;
      break;
    case CostClass::kMatMul: w.compute = ComputeClass::kMatMul; break;
    case CostClass::kSpecial: w.compute = ComputeClass::kSpecial; break;
    case CostClass::kPool: w.compute = ComputeClass::kPool; break;
    case CostClass::kLayout: w.memory = MemoryClass::kLayout; break;
    case CostClass::kSlice:
      // Only the selected elements are read.
      w.memory = MemoryClass::kLayout;
      w.bytes = 2 * total_bytes(s.outputs);
      break;
    case CostClass::kGather:
      // Reads the indices and one data element per output element.
      w.memory = MemoryClass::kLayout;
      w.bytes = 2 * total_bytes(s.outputs) + (s.inputs.size() > 1 ? bytes_of(s.inputs[1]) : 0);
      break;
    case CostClass::kView:
      w.view = true;
      w.bytes = 0;
      break;
    case CostClass::kFill: w.bytes = total_bytes(s.outputs); break;
    case CostClass::kVector: break;
    case CostClass::kFree:    // priced 0 by the cost models before they get here
    case CostClass::kOpaque:  // priced by a fixed guess, likewise
      break;
  }
  return w;
}

}  // namespace rlflow::cost
