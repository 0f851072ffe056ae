#include "rlflow/exec/op_timer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <time.h>

#include <algorithm>
#include <chrono>

#include "aten_ops.h"

namespace rlflow::exec {

namespace {

at::Tensor make_operand(const ir::TensorType& t, at::Generator& gen) {
  // ATen's CPU kernels lack most half-precision ops (convolution among them).
  const auto opts = at::TensorOptions().dtype(ir::is_half(t.dtype) ? at::kFloat : detail::to_scalar_type(t.dtype));
  // Floats in [0.5, 1.5): no sqrt/pow/div NaNs or denormals to distort the timing. Integers and
  // booleans are zeros, which are valid indices for Gather.
  if (ir::is_float(t.dtype)) return at::rand(t.shape, gen, opts).add_(0.5);
  return at::zeros(t.shape, opts);
}

}  // namespace

double clock_ms(bool thread_cpu_time) {
  if (thread_cpu_time) {
    timespec ts{};
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Expected<double> median_op_time_ms(const ir::Node& node, const std::vector<ir::TensorType>& inputs, const OpTimingOptions& o) {
  const int threads = std::max(1, o.threads);
  if (at::get_num_threads() != threads) at::set_num_threads(threads);
  try {
    auto gen = at::detail::createCPUGenerator(o.seed);
    std::vector<at::Tensor> in;
    in.reserve(inputs.size());
    for (const auto& t : inputs) in.push_back(make_operand(t, gen));
    const bool cpu_time = threads == 1;
    auto once = [&]() -> Expected<double> {
      const double t0 = clock_ms(cpu_time);
      auto r = detail::run_op(node, in, false);
      const double t1 = clock_ms(cpu_time);
      if (!r) return r.error();
      return t1 - t0;
    };
    for (int i = 0; i < std::max(0, o.warmup); ++i) {
      auto r = once();
      if (!r) return r.error();
    }
    std::vector<double> times;
    double spent = 0;
    for (int i = 0; i < std::max(1, o.repeats); ++i) {
      auto r = once();
      if (!r) return r.error();
      times.push_back(*r);
      spent += *r;
      if (spent > o.max_seconds * 1e3 && times.size() >= 3) break;
    }
    std::sort(times.begin(), times.end());
    const size_t n = times.size();
    return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    return Error::internal(msg.substr(0, msg.find('\n')));
  }
}

}  // namespace rlflow::exec
