// Device profiles: locating, parsing (yaml-cpp) and writing them.
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "rlflow/util/file_io.h"
#include "rlflow/cost/analytic.h"
#include "rlflow/util/hash.h"

namespace rlflow::cost {

namespace fs = std::filesystem;

namespace {
// The five compute rates, each once for float32 and once for half precision: one table drives
// parsing, printing and validation of both groups.
struct ComputeField {
  const char* key;
  Throughput DeviceProfile::*fp32;
  Throughput DeviceProfile::*half;
  const char* why;
};
static_assert(static_cast<int>(ComputeClass::kConv) == 0 && static_cast<int>(ComputeClass::kPool) == 4);
constexpr ComputeField kCompute[] = {
    {"conv", &DeviceProfile::conv, &DeviceProfile::half_conv, "Conv with a spatial window or stride"},
    {"matmul", &DeviceProfile::matmul, &DeviceProfile::half_matmul, "MatMul, Gemm and pointwise (1x1, stride 1) Conv: GEMMs"},
    {"vector", &DeviceProfile::vector, &DeviceProfile::half_vector, "elementwise arithmetic, norms, softmax, reductions"},
    {"special", &DeviceProfile::special, &DeviceProfile::half_special, "transcendentals: Erf, Tanh, Sigmoid, Pow (1 FLOP per element)"},
    {"pool", &DeviceProfile::pool, &DeviceProfile::half_pool, "MaxPool, AveragePool (1 FLOP per window element)"},
};
}  // namespace

const Throughput& DeviceProfile::rate(ComputeClass c, bool half) const {
  // kCompute lists the classes in ComputeClass order.
  const auto& f = kCompute[static_cast<size_t>(c)];
  return half && has_half_rates() ? this->*f.half : this->*f.fp32;
}

const Throughput& DeviceProfile::rate(MemoryClass m) const { return m == MemoryClass::kLayout ? layout : stream; }

uint64_t DeviceProfile::hash() const {
  Hasher h;
  h.add(name).add(device);
  for (const auto* t : {&conv, &matmul, &vector, &special, &pool, &stream, &layout}) h.add_f(t->peak).add_f(t->efficiency);
  h.add_f(kernel_overhead_us).add_f(view_overhead_us);
  if (!runtime.empty()) h.add(runtime);  // absent from older fingerprints: they stay valid
  if (has_half_rates())                   // likewise
    for (const auto& f : kCompute) h.add_f((this->*f.half).peak).add_f((this->*f.half).efficiency);
  return h.digest();
}

Status DeviceProfile::validate() const {
  auto bad = [&](const std::string& what) { return Error::bad_input("device profile '" + name + "': " + what); };
  if (name.empty()) return Error::bad_input("device profile: missing name");
  if (device != "cpu" && device != "gpu") return bad("device must be cpu or gpu, not '" + device + "'");
  if (!runtime.empty() && runtime != "onnxruntime") return bad("runtime must be onnxruntime or absent, not '" + runtime + "'");
  auto check = [&](const std::string& key, const Throughput& t) -> Status {
    if (!(std::isfinite(t.peak) && t.peak > 0)) return bad(key + ".peak must be a positive number");
    if (!(std::isfinite(t.efficiency) && t.efficiency > 0)) return bad(key + ".efficiency must be a positive number");
    return {};
  };
  for (const auto& f : kCompute) {
    RLFLOW_TRY_STATUS(check(std::string("compute_gflops.") + f.key, this->*f.fp32));
    if (has_half_rates()) RLFLOW_TRY_STATUS(check(std::string("half_compute_gflops.") + f.key, this->*f.half));
  }
  RLFLOW_TRY_STATUS(check("memory_gbs.stream", stream));
  RLFLOW_TRY_STATUS(check("memory_gbs.layout", layout));
  if (!(std::isfinite(kernel_overhead_us) && kernel_overhead_us >= 0)) return bad("overhead_us.kernel must be >= 0");
  if (!(std::isfinite(view_overhead_us) && view_overhead_us >= 0)) return bad("overhead_us.view must be >= 0");
  return {};
}

std::string devices_dir() { return find_shipped("configs/devices", "RLFLOW_DEVICES"); }

Expected<DeviceProfile> parse_profile(const std::string& text, const std::string& label) {
  DeviceProfile p;
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap()) return Error::bad_input(label + ": a device profile is a YAML mapping");
    auto str = [&](const char* key, std::string* out, bool required) -> Status {
      const auto n = root[key];
      if (!n) return required ? Status(Error::bad_input(label + ": missing '" + key + "'")) : Status();
      *out = n.as<std::string>();
      return {};
    };
    RLFLOW_TRY_STATUS(str("name", &p.name, true));
    RLFLOW_TRY_STATUS(str("device", &p.device, true));
    RLFLOW_TRY_STATUS(str("description", &p.description, false));
    RLFLOW_TRY_STATUS(str("source", &p.source, false));
    RLFLOW_TRY_STATUS(str("calibration", &p.calibration, false));
    RLFLOW_TRY_STATUS(str("runtime", &p.runtime, false));
    auto rate = [&](const char* group, const char* key, Throughput* t) -> Status {
      const auto n = root[group][key];
      if (!n || !n.IsMap()) return Error::bad_input(label + ": missing '" + group + "." + key + "' {peak, efficiency}");
      if (!n["peak"]) return Error::bad_input(label + ": missing '" + group + "." + key + ".peak'");
      t->peak = n["peak"].as<double>();
      t->efficiency = n["efficiency"] ? n["efficiency"].as<double>() : 1.0;
      return {};
    };
    for (const auto& f : kCompute) RLFLOW_TRY_STATUS(rate("compute_gflops", f.key, &(p.*f.fp32)));
    RLFLOW_TRY_STATUS(rate("memory_gbs", "stream", &p.stream));
    RLFLOW_TRY_STATUS(rate("memory_gbs", "layout", &p.layout));
    if (root["half_compute_gflops"]) {
      for (const auto& f : kCompute) RLFLOW_TRY_STATUS(rate("half_compute_gflops", f.key, &(p.*f.half)));
      RLFLOW_TRY_STATUS(str("half_source", &p.half_source, false));
    }
    const auto o = root["overhead_us"];
    if (!o || !o["kernel"]) return Error::bad_input(label + ": missing 'overhead_us.kernel'");
    p.kernel_overhead_us = o["kernel"].as<double>();
    p.view_overhead_us = o["view"] ? o["view"].as<double>() : 0.0;
  } catch (const YAML::Exception& e) {
    return Error::bad_input(label + ": " + e.what());
  }
  auto st = p.validate();
  if (!st) return st.error().with_context(label);
  return p;
}

Expected<DeviceProfile> load_profile(const std::string& name_or_path) {
  if (name_or_path.empty()) return Error::bad_input("empty device profile name");
  const bool is_path = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml") ||
                       name_or_path.ends_with(".yml");
  const std::string path = is_path ? name_or_path : (fs::path(devices_dir()) / (name_or_path + ".yaml")).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    std::string known;
    for (const auto& e : fs::directory_iterator(devices_dir(), ec))
      if (e.path().extension() == ".yaml") known += (known.empty() ? "" : ", ") + e.path().stem().string();
    return Error::bad_input("device profile '" + name_or_path + "' not found (" + path + ")" +
                            (known.empty() ? "" : "; available: " + known));
  }
  auto text = rlflow::read_file(path);
  if (!text) return text.error();
  return parse_profile(*text, path);
}

namespace {

// Shortest text that reads back as the same double.
std::string num(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, p) : std::to_string(v);
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

std::string rate_line(const char* key, const Throughput& t, const char* unit, const char* why) {
  char eff[32];
  std::snprintf(eff, sizeof eff, "%.4g", t.effective());
  return "  " + std::string(key) + ": {peak: " + num(t.peak) + ", efficiency: " + num(t.efficiency) + "}  # " + eff + " " + unit +
         " effective; " + why + "\n";
}

}  // namespace

std::string profile_yaml(const DeviceProfile& p) {
  std::string y;
  y += "# rlflow device profile for the analytic cost model (rlflow::cost::AnalyticCostModel).\n";
  y += "# cost(op) = overhead_us.kernel + max(FLOPs / compute rate, bytes moved / memory rate);\n";
  y += "# a rate is peak x efficiency. View ops (Reshape, Flatten, Squeeze, Unsqueeze) cost overhead_us.view.\n";
  y += "name: " + quoted(p.name) + "\n";
  y += "device: " + p.device + "  # cpu or gpu: which real backend this profile stands in for\n";
  y += "description: " + quoted(p.description) + "\n";
  y += "source: " + quoted(p.source) + "\n";
  if (!p.runtime.empty())
    y += "runtime: " + quoted(p.runtime) + "  # the runtime fuses some nodes into their producers itself: they cost nothing\n";
  y += "compute_gflops:  # GFLOP/s (multiply-accumulate = 2 FLOPs)\n";
  for (const auto& f : kCompute) y += rate_line(f.key, p.*f.fp32, "GFLOP/s", f.why);
  y += "memory_gbs:  # GB/s (10^9 bytes), bytes read + written once by one kernel\n";
  y += rate_line("stream", p.stream, "GB/s", "contiguous streaming ops (elementwise, norms, pooling, conv/matmul operands)");
  y += rate_line("layout", p.layout, "GB/s", "data movement ops: Transpose, Concat, Split, Slice, Pad, Gather, Cast");
  if (p.has_half_rates()) {
    y += "half_compute_gflops:  # GFLOP/s for float16/bfloat16 ops; memory rates are shared\n";
    for (const auto& f : kCompute) y += rate_line(f.key, p.*f.half, "GFLOP/s", f.why);
    if (!p.half_source.empty()) y += "half_source: " + quoted(p.half_source) + "\n";
  }
  y += "overhead_us:\n";
  y += "  kernel: " + num(p.kernel_overhead_us) + "  # microseconds added to every kernel (launch or dispatch)\n";
  y += "  view: " + num(p.view_overhead_us) + "  # microseconds for a view op, which runs no kernel\n";
  if (!p.calibration.empty()) y += "calibration: " + quoted(p.calibration) + "\n";
  return y;
}

Status write_profile(const DeviceProfile& p, const std::string& path) {
  RLFLOW_TRY_STATUS(p.validate());
  RLFLOW_TRY_STATUS(rlflow::ensure_parent_dir(path));
  return rlflow::write_file_atomic(path, profile_yaml(p));
}

}  // namespace rlflow::cost
