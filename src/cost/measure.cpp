#include "rlflow/cost/measure.h"

#include <algorithm>

#include "rlflow/exec/executor.h"
#include "rlflow/exec/op_timer.h"
#include "rlflow/ir/builder.h"

namespace rlflow::cost {

Expected<GraphMeasurement> measure_graph_cpu(const ir::Graph& g, const MeasureOptions& opts) {
  for (size_t i = 0; i < g.size(); ++i)
    if (g.node(static_cast<ir::NodeId>(i)).kind == ir::OpKind::kOpaque)
      return Error::unsupported("the reference executor cannot run the whole graph: " + ir::node_label(g, static_cast<ir::NodeId>(i)) +
                                " is opaque");
  exec::Executor ex(ir::DType::kFloat32, std::max(1, opts.threads));
  std::vector<ir::TensorPtr> inputs;
  uint64_t seed = opts.seed;
  for (auto id : g.inputs()) {
    const auto& t = g.node(id).outputs[0];
    if (ir::is_float(t.dtype)) {
      inputs.push_back(ir::random_tensor(t.shape, seed++, t.dtype));
    } else {  // integer (index) inputs: zeros are valid everywhere
      std::vector<std::byte> zeros(static_cast<size_t>(t.numel()) * ir::dtype_size(t.dtype));
      inputs.push_back(std::make_shared<const ir::Tensor>(t, std::move(zeros)));
    }
  }
  // Timed like the cpu backend: the thread's CPU time with one torch thread (immune to other
  // processes on the machine), wall time with several.
  const bool cpu_time = std::max(1, opts.threads) == 1;
  std::vector<double> times;
  const int runs = std::max(0, opts.warmup) + std::max(1, opts.repeats);
  for (int i = 0; i < runs; ++i) {
    const double t0 = exec::clock_ms(cpu_time);
    auto out = ex.run(g, inputs);
    const double t1 = exec::clock_ms(cpu_time);
    if (!out) return out.error();
    if (i >= std::max(0, opts.warmup)) times.push_back(t1 - t0);
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  GraphMeasurement m;
  m.ms = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  m.runs = static_cast<int>(n);
  m.method = "reference executor (libtorch CPU, " +
             (cpu_time ? std::string("1 thread, thread CPU time") : std::to_string(opts.threads) + " threads, wall time") +
             ", median of " + std::to_string(n) + ")";
  return m;
}

}  // namespace rlflow::cost
