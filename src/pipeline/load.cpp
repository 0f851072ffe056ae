#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/target.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>

#include <spdlog/fmt/fmt.h>

#include "rlflow/ir/dim_expr.h"
#include "rlflow/ir/summary.h"
#include <spdlog/spdlog.h>

namespace rlflow::pipeline {

Expected<std::map<std::string, ir::Shape>> parse_input_shapes(const std::vector<std::string>& specs) {
  std::map<std::string, ir::Shape> out;
  for (const auto& spec : specs) {
    auto bad = [&](const std::string& why) {
      return Error{ErrorCode::kUsage, "--input-shape '" + spec + "': " + why + " (expected name:d0,d1,...)"};
    };
    const auto colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0) return bad("missing name");
    const std::string name = spec.substr(0, colon);
    ir::Shape shape;
    std::string_view rest(spec.c_str() + colon + 1);
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      std::string_view tok = rest.substr(0, comma);
      int64_t v = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec != std::errc() || p != tok.data() + tok.size() || v <= 0) return bad("'" + std::string(tok) + "' is not a positive integer");
      shape.push_back(v);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
      if (rest.empty()) return bad("trailing comma");
    }
    if (out.count(name)) return bad("input given twice");
    out[name] = shape;
  }
  return out;
}

std::string target_cost_model(const std::string& target) {
  auto t = find_target(target);
  return t ? (*t)->cost_model : "ort";
}

int64_t default_memory_limit_mb() {
  double bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  for (const char* cg : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream f(cg);
    double v = 0;
    if (f >> v && v > 0) bytes = std::min(bytes, v);  // "max" (no limit) fails to parse and is skipped
  }
  return std::max<int64_t>(1, static_cast<int64_t>(bytes * 0.75) >> 20);
}

Status check_memory(const ir::Graph& g, int64_t limit_mb) {
  if (limit_mb == kNoMemoryCheck) return {};
  const int64_t limit = limit_mb > 0 ? limit_mb : default_memory_limit_mb();
  const auto m = ir::estimate_run_memory(g);
  const double mib = 1024.0 * 1024.0;
  if (m.peak_bytes <= static_cast<double>(limit) * mib) return {};
  const std::string msg = fmt::format("running the model needs about {:.0f} MiB ({} alone is {:.0f} MiB), over the memory limit of {} MiB",
                                      m.peak_bytes / mib, m.largest, m.largest_bytes / mib, limit);
  return Error::bad_input(msg + " (--memory-limit raises it where the command has one; --input-shape chooses smaller sizes)");
}

Expected<std::map<std::string, int64_t>> parse_fixed_dims(const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> out;
  for (const auto& spec : specs) {
    const auto eq = spec.rfind('=');
    int64_t v = 0;
    const char* first = spec.c_str() + (eq == std::string::npos ? 0 : eq + 1);
    auto [p, ec] = std::from_chars(first, spec.c_str() + spec.size(), v);
    if (eq == std::string::npos || eq == 0 || ec != std::errc() || p != spec.c_str() + spec.size() || v <= 0)
      return Error{ErrorCode::kUsage, "--fix '" + spec + "': expected NAME=SIZE with a positive size (e.g. batch=1)"};
    if (!out.emplace(spec.substr(0, eq), v).second) return Error{ErrorCode::kUsage, "--fix '" + spec + "': that name is given twice"};
  }
  return out;
}

namespace {

bool too_short(const Error& e) { return e.message.find("larger than padded input") != std::string::npos; }

// A conv or pool stack over a long axis (raw audio) may need more than the representative size of
// a symbol: the sizes of every symbol but the batch are doubled until the model imports, the
// smallest that imports is found by bisection (stats->min_dims), and the model is imported at
// twice that, where the stack's output is longer than 1. One warning line says so.
Expected<ir::Graph> fit_sizes(const std::string& path, onnxio::ImportOptions io, onnxio::ImportStats* stats, Error first) {
  const auto base = stats->dynamic_dims;
  auto at = [&](int64_t factor_num, int64_t factor_den) {
    std::map<std::string, int64_t> sizes;
    for (const auto& [name, size] : base)
      sizes[name] = ir::symbol_role(name) == ir::SymbolRole::kBatch ? size : std::max<int64_t>(1, size * factor_num / factor_den);
    return sizes;
  };
  auto import_at = [&](std::map<std::string, int64_t> sizes, onnxio::ImportStats* st) {
    io.dim_values = std::move(sizes);
    *st = onnxio::ImportStats{};
    return onnxio::import_model_file(path, io, st);
  };
  int64_t lo = 1, hi = 0;  // factors (x base): lo fails, hi imports
  for (int64_t f = 2; f <= 256 && hi == 0; f *= 2) {
    auto retry = import_at(at(f, 1), stats);
    if (retry) hi = f;
    else if (!too_short(retry.error())) return retry.error();
    else lo = f;
  }
  if (hi == 0) return first.with_context(path + " (its sizes were doubled up to 256 times and it still does not fit; pass --input-shape)");
  // The smallest size in [lo, hi] x base that imports, to 1/16 of base.
  int64_t lo16 = lo * 16, hi16 = hi * 16;
  while (hi16 - lo16 > 1) {
    const int64_t mid = (lo16 + hi16) / 2;
    onnxio::ImportStats probe;
    if (import_at(at(mid, 16), &probe)) hi16 = mid;
    else lo16 = mid;
  }
  auto g = import_at(at(2 * hi16, 16), stats);
  if (!g) return g.error().with_context(path);
  stats->min_dims.clear();
  for (const auto& [name, size] : at(hi16, 16))
    if (ir::symbol_role(name) != ir::SymbolRole::kBatch) stats->min_dims[name] = size;
  std::string dims, mins;
  for (const auto& [name, size] : stats->dynamic_dims) dims += (dims.empty() ? "" : ", ") + name + "=" + std::to_string(size);
  for (const auto& [name, size] : stats->min_dims) mins += (mins.empty() ? "" : ", ") + name + " >= " + std::to_string(size);
  spdlog::warn("{}: the model's conv or pool stack needs longer inputs than the default sizes ({}); optimised at {} (--input-shape "
               "chooses others)",
               path, mins, dims);
  return g;
}

}  // namespace

Expected<ir::Graph> load_model(const std::string& path, const std::vector<std::string>& shapes, const exec::Executor& ex,
                               onnxio::ImportStats* stats, int64_t memory_limit_mb, const std::map<std::string, int64_t>& fixed_dims,
                               bool keep_static_dims) {
  auto parsed = parse_input_shapes(shapes);
  if (!parsed) return parsed.error();
  onnxio::ImportOptions io;
  io.input_shapes = *parsed;
  io.fixed_dims = fixed_dims;
  io.keep_static_dims = keep_static_dims;
  io.evaluator = &ex;
  onnxio::ImportStats local;
  if (!stats) stats = &local;
  auto g = onnxio::import_model_file(path, io, stats);
  if (!g && parsed->empty() && !stats->dynamic_dims.empty() && too_short(g.error())) g = fit_sizes(path, io, stats, g.error());
  if (!g) return g;
  // A --fix name no input dimension uses is a typo, not a no-op (issue 57, item 20).
  for (const auto& [name, size] : fixed_dims)
    if (!stats->fixed_found.count(name)) {
      std::string known;
      for (const auto& s : stats->fixed_found) known += (known.empty() ? "" : ", ") + s;
      for (const auto& [s, v] : stats->dynamic_dims) known += (known.empty() ? "" : ", ") + s;
      return Error{ErrorCode::kUsage, "--fix " + name + "=" + std::to_string(size) + ": " + path + " has no symbolic dimension '" + name +
                                          "'" + (known.empty() ? " (it has none)" : " (its symbolic dimensions: " + known + ")")};
    }
  if (auto st = check_memory(*g, memory_limit_mb); !st.ok()) return st.error().with_context(path);
  return g;
}

std::vector<const rules::Rule*> select_rules(const rules::RuleLibrary& lib, bool all_rules) {
  std::vector<const rules::Rule*> out;
  for (const auto& r : lib.rules)
    if (all_rules ? (r.status == rules::VerifyStatus::kNumeric || r.status == rules::VerifyStatus::kProved)
                  : (r.in_default_set && r.status == rules::VerifyStatus::kProved))
      out.push_back(&r);
  return out;
}

}  // namespace rlflow::pipeline
