#include "commands.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "rlflow/cli/app.h"
#include "rlflow/cost/device.h"
#include "rlflow/exec/compare.h"
#include "rlflow/ir/summary.h"
#include "rlflow/cost/factory.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/rl/agent.h"
#include "rlflow/search/optimizer.h"

namespace rlflow::cli {

using json = nlohmann::json;
namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

json summary_json(const ir::GraphSummary& s) {
  return {{"ops", s.num_ops}, {"op_counts", s.op_counts}, {"parameters", s.num_parameters}, {"flops", s.flops},
          {"opaque_ops", s.opaque_ops}};
}

namespace {

json type_json(const std::string& name, const ir::TensorType& t) {
  return {{"name", name}, {"dtype", ir::dtype_name(t.dtype)}, {"shape", t.shape}};
}

std::string human(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

}  // namespace

std::string target_cost_model(const std::string& target) {
  if (target == "h100") return "recorded";
  if (target == "gpu") return "cudnn";
  return "ort";
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

Expected<ir::Graph> load_model(const std::string& path, const std::vector<std::string>& shapes, const exec::Executor& ex,
                               onnxio::ImportStats* stats, int64_t memory_limit_mb) {
  auto parsed = parse_input_shapes(shapes);
  if (!parsed) return parsed.error();
  onnxio::ImportOptions io;
  io.input_shapes = *parsed;
  io.evaluator = &ex;
  auto g = onnxio::import_model_file(path, io, stats);
  if (!g) return g;
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

void print_op_table(const ir::GraphSummary& before, const ir::GraphSummary* after) {
  std::set<std::string> ops;
  for (const auto& [k, v] : before.op_counts) ops.insert(k);
  if (after)
    for (const auto& [k, v] : after->op_counts) ops.insert(k);
  std::printf("  %-22s %8s%s\n", "op", after ? "before" : "count", after ? "    after" : "");
  for (const auto& op : ops) {
    auto b = before.op_counts.count(op) ? before.op_counts.at(op) : 0;
    if (after) {
      auto a = after->op_counts.count(op) ? after->op_counts.at(op) : 0;
      std::printf("  %-22s %8lld %8lld\n", op.c_str(), static_cast<long long>(b), static_cast<long long>(a));
    } else {
      std::printf("  %-22s %8lld\n", op.c_str(), static_cast<long long>(b));
    }
  }
  if (after)
    std::printf("  %-22s %8lld %8lld\n", "total", static_cast<long long>(before.num_ops), static_cast<long long>(after->num_ops));
  else
    std::printf("  %-22s %8lld\n", "total", static_cast<long long>(before.num_ops));
}

int exit_code_for(ErrorCode c) {
  switch (c) {
    case ErrorCode::kUsage: return kUsage;
    case ErrorCode::kBadInput:
    case ErrorCode::kUnsupported: return kBadInput;
    case ErrorCode::kVerificationFailed: return kVerificationFailed;
    case ErrorCode::kInternal: return kInternal;
  }
  return kInternal;
}

namespace {

// Names in a model are arbitrary bytes: a NUL would end the line early and a newline would split it,
// so control characters are written as escapes and the error stays one whole line.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c != 0x7f) out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

}  // namespace

int report_error(const GlobalOptions& g, const Error& e) {
  const int code = exit_code_for(e.code);
  const std::string message = printable(e.message);
  std::fprintf(stderr, "rlflow: error: %s\n", message.c_str());
  if (g.json) std::cout << json{{"ok", false}, {"error", message}, {"exit_code", code}}.dump(2) << std::endl;
  return code;
}

std::string version_string() {
  auto dev = cost::probe_devices();
  std::string s = "rlflow " RLFLOW_VERSION " (libtorch " RLFLOW_TORCH_VERSION ", CUDA backend ";
  s += dev.cuda_compiled ? "compiled" : "not compiled";
  s += ", GPUs: " + std::to_string(dev.device_count);
  if (!dev.names.empty()) s += " [" + dev.names.front() + "]";
  return s + ")";
}

int cmd_info(const GlobalOptions& g, const InfoOptions& o) {
  exec::Executor ex;
  onnxio::ImportStats stats;
  auto graph = load_model(o.model, o.input_shapes, ex, &stats, kNoMemoryCheck);  // info never runs the graph
  if (!graph) return report_error(g, graph.error());
  const auto s = ir::summarize(*graph);
  json ins = json::array(), outs = json::array();
  for (auto id : graph->inputs()) ins.push_back(type_json(graph->node(id).name, graph->node(id).outputs[0]));
  for (const auto& out : graph->outputs()) outs.push_back(type_json(out.name, graph->type(out.value)));
  if (g.json) {
    json j = summary_json(s);
    j["model"] = o.model;
    j["inputs"] = ins;
    j["outputs"] = outs;
    j["opsets"] = json::object();
    for (const auto& [d, v] : graph->meta().opsets) j["opsets"][d.empty() ? "ai.onnx" : d] = v;
    j["import"] = {{"onnx_nodes", stats.onnx_nodes}, {"folded", stats.folded_nodes}, {"removed", stats.removed_nodes}};
    std::cout << j.dump(2) << std::endl;
    return kOk;
  }
  std::printf("%s  (opset %lld, producer %s)\n", o.model.c_str(), static_cast<long long>(graph->meta().opset("")),
              graph->meta().producer_name.c_str());
  for (const auto& i : ins) std::printf("  input  %-20s %s %s\n", i["name"].get<std::string>().c_str(), i["dtype"].get<std::string>().c_str(), i["shape"].dump().c_str());
  for (const auto& i : outs) std::printf("  output %-20s %s %s\n", i["name"].get<std::string>().c_str(), i["dtype"].get<std::string>().c_str(), i["shape"].dump().c_str());
  std::printf("  parameters %s   FLOPs %s   ops %lld (ONNX nodes %d, folded %d, removed %d)\n", human(static_cast<double>(s.num_parameters)).c_str(),
              human(s.flops).c_str(), static_cast<long long>(s.num_ops), stats.onnx_nodes, stats.folded_nodes, stats.removed_nodes);
  print_op_table(s, nullptr);
  if (!s.opaque_ops.empty()) {
    std::printf("  opaque ops (kept as they are, never rewritten):");
    for (const auto& op : s.opaque_ops) std::printf(" %s", op.c_str());
    std::printf("\n");
  }
  return kOk;
}

int cmd_run(const GlobalOptions& g, const RunOptions& o) {
  std::vector<ir::TensorPtr> inputs, expected;
  for (int k = 0;; ++k) {
    auto p = fs::path(o.data_dir) / ("input_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    auto t = onnxio::read_tensor_file(p.string());
    if (!t) return report_error(g, t.error());
    inputs.push_back(*t);
  }
  for (int k = 0;; ++k) {
    auto p = fs::path(o.data_dir) / ("output_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    auto t = onnxio::read_tensor_file(p.string());
    if (!t) return report_error(g, t.error());
    expected.push_back(*t);
  }
  if (inputs.empty() && expected.empty())
    return report_error(g, Error::bad_input(o.data_dir + ": no input_N.pb / output_N.pb files"));
  exec::Executor ex;
  onnxio::ImportOptions io;
  io.evaluator = &ex;
  // The data fixes the input shapes. Integer inputs and scalars carry parameters (shapes, axes,
  // indices, clip bounds, pad values), so they are bound as constants; other float inputs stay
  // inputs and exercise the executor's kernels.
  std::vector<ir::TensorPtr> run_inputs;
  for (const auto& t : inputs) {
    io.positional_input_shapes.push_back(t->shape());
    const bool bind = !ir::is_float(t->dtype()) || t->shape().empty();
    io.positional_constants.push_back(bind ? t : nullptr);
    if (!bind) run_inputs.push_back(t);
  }
  auto graph = onnxio::import_model_file(o.model, io);
  if (!graph) return report_error(g, graph.error());
  if (auto st = check_memory(*graph, 0); !st.ok()) return report_error(g, st.error().with_context(o.model));
  auto outs = ex.run(*graph, run_inputs);
  if (!outs) return report_error(g, outs.error());
  if (outs->size() != expected.size())
    return report_error(g, Error{ErrorCode::kVerificationFailed, "the model has " + std::to_string(outs->size()) +
                                                                     " outputs, the data " + std::to_string(expected.size())});
  bool ok = true;
  double worst = 0;
  json per = json::array();
  for (size_t k = 0; k < outs->size(); ++k) {
    const auto tol = exec::output_tolerance(*expected[k], o.atol, o.rtol);  // wider for half outputs
    auto d = exec::diff_tensors(*(*outs)[k], *expected[k], tol.atol, tol.rtol);
    const bool same_type = (*outs)[k]->dtype() == expected[k]->dtype();
    ok = ok && d.ok && same_type;
    worst = std::max(worst, d.max_abs_diff);
    per.push_back({{"index", k}, {"ok", d.ok && same_type}, {"max_abs_diff", d.max_abs_diff}, {"atol", tol.atol}, {"rtol", tol.rtol}});
  }
  if (g.json) std::cout << json{{"ok", ok}, {"max_abs_diff", worst}, {"outputs", per}}.dump(2) << std::endl;
  else std::printf("%s: %s (max abs diff %.3g)\n", o.model.c_str(), ok ? "match" : "MISMATCH", worst);
  return ok ? kOk : kVerificationFailed;
}

}  // namespace rlflow::cli
