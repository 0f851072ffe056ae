#include "rlflow/exec/executor.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <cstdlib>

#include "aten_ops.h"
#include "onnx_ops.h"

namespace rlflow::exec {

namespace {
// libtorch's BLAS is the system's: Debian's OpenBLAS. Its serial build is not safe when two threads
// call it at once (parallel rule verification, several trainers in one process gave wrong results),
// so setup installs the pthread build, which is; this keeps that build at one thread, as the serial
// one was, unless OPENBLAS_NUM_THREADS says otherwise. Without OpenBLAS the symbol is absent and
// nothing happens.
const bool kBlasThreadsPinned = [] {
  if (std::getenv("OPENBLAS_NUM_THREADS")) return false;
  using SetThreads = void (*)(int);
  auto* set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (!set) return false;
  set(1);
  return true;
}();
}  // namespace

using detail::from_aten;
using detail::round_to;
using detail::to_aten;

Executor::Executor(ir::DType compute, int num_threads) : compute_(compute) {
  if (num_threads > 0 && at::get_num_threads() != num_threads) at::set_num_threads(num_threads);
}

bool Executor::supports(const ir::Node& node) {
  return node.kind != ir::OpKind::kOpaque || detail::onnx_op_supported(std::get<ir::OpaqueParams>(node.params));
}

namespace {
// A computed value handed out in its graph dtype: half values were computed wide.
ir::TensorPtr stored(const at::Tensor& x, ir::DType dtype) {
  return from_aten(ir::is_half(dtype) && at::isFloatingType(x.scalar_type()) ? x.to(detail::to_scalar_type(dtype)) : x);
}

Expected<std::vector<at::Tensor>> guarded(const ir::Node& n, const std::vector<at::Tensor>& in, bool promote) {
  try {
    return detail::run_op(n, in, promote);
  } catch (const std::exception& e) {
    // ATen reports bad shapes through c10::Error; keep only its first line.
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    return Error::internal("reference executor failed on " + std::string(ir::op_name(n.kind)) + ": " + msg);
  }
}
}  // namespace

Expected<std::vector<ir::TensorPtr>> Executor::run(const ir::Graph& g, const std::vector<ir::TensorPtr>& inputs) const {
  const bool promote = compute_ == ir::DType::kFloat64;
  auto input_ids = g.inputs();
  if (inputs.size() != input_ids.size())
    return Error::bad_input("expected " + std::to_string(input_ids.size()) + " inputs, got " + std::to_string(inputs.size()));
  // Free each value after its last use so large models fit.
  std::vector<size_t> last_use(g.size(), 0);
  for (size_t i = 0; i < g.size(); ++i)
    for (const auto& in : g.node(static_cast<ir::NodeId>(i)).inputs) last_use[static_cast<size_t>(in.node)] = i;
  for (const auto& o : g.outputs()) last_use[static_cast<size_t>(o.value.node)] = g.size();

  std::vector<std::vector<at::Tensor>> values(g.size());
  size_t next_input = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    if (n.kind == ir::OpKind::kInput) {
      const auto& t = inputs[next_input++];
      if (t->type() != n.outputs[0])
        return Error::bad_input("input '" + n.name + "' expects " + n.outputs[0].str() + ", got " + t->type().str());
      values[i] = {to_aten(*t, promote)};
    } else if (n.kind == ir::OpKind::kWeight) {
      values[i] = {to_aten(*n.value, promote)};
    } else {
      std::vector<at::Tensor> ins;
      for (const auto& in : n.inputs) ins.push_back(values[static_cast<size_t>(in.node)][static_cast<size_t>(in.index)]);
      auto r = guarded(n, ins, promote);
      if (!r) return r.error().with_context(ir::node_label(g, static_cast<ir::NodeId>(i)));
      values[i] = std::move(*r);
      for (size_t k = 0; k < values[i].size() && k < n.outputs.size(); ++k) {
        values[i][k] = round_to(values[i][k], n.outputs[k].dtype);
        if (values[i][k].sizes().vec() != n.outputs[k].shape)
          return Error::internal(ir::node_label(g, static_cast<ir::NodeId>(i)) + ": executor produced a shape other than the inferred " +
                                 n.outputs[k].str());
      }
    }
    for (const auto& in : n.inputs)
      if (last_use[static_cast<size_t>(in.node)] == i) values[static_cast<size_t>(in.node)].clear();
  }
  std::vector<ir::TensorPtr> out;
  for (const auto& o : g.outputs()) out.push_back(stored(values[static_cast<size_t>(o.value.node)][static_cast<size_t>(o.value.index)], g.type(o.value).dtype));
  return out;
}

Expected<std::vector<ir::TensorPtr>> Executor::evaluate(const ir::Node& node, const std::vector<ir::TensorPtr>& inputs) const {
  std::vector<at::Tensor> ins;
  for (const auto& t : inputs) ins.push_back(to_aten(*t, false));
  auto r = guarded(node, ins, false);
  if (!r) return r.error();
  std::vector<ir::TensorPtr> out;
  for (size_t k = 0; k < r->size(); ++k) out.push_back(k < node.outputs.size() ? stored((*r)[k], node.outputs[k].dtype) : from_aten((*r)[k]));
  return out;
}

}  // namespace rlflow::exec
