#include "commands.h"
#include "flags.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "rlflow/util/clock.h"
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

void print_safe(std::FILE* out, const std::function<void(std::FILE*)>& print) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  if (!mem) {  // no memory for the text: nothing is safe to print
    std::fprintf(stderr, "rlflow: error: out of memory printing the report\n");
    return;
  }
  print(mem);
  std::fclose(mem);
  std::string text;
  text.reserve(len);
  for (size_t i = 0; i < len; ++i) {
    const auto c = static_cast<unsigned char>(buf[i]);
    if (c >= 0x20 && c != 0x7f) text += static_cast<char>(c);
    else if (c == '\n' || c == '\t') text += static_cast<char>(c);
    else text += fmt::format("\\x{:02x}", c);
  }
  std::free(buf);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

int report_error(const GlobalOptions& g, const Error& e) {
  const int code = exit_code_for(e.code);
  const std::string message = printable(e.message);
  std::fprintf(stderr, "rlflow: error: %s\n", message.c_str());
  if (g.json) std::cout << json_text(json{{"ok", false}, {"error", message}, {"exit_code", code}}) << std::endl;
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
    std::cout << json_text(j) << std::endl;
    return kOk;
  }
  print_safe(stdout, [&](std::FILE* f) {
    std::fprintf(f, "%s  (opset %lld, producer %s)\n", o.model.c_str(), static_cast<long long>(graph->meta().opset("")),
                graph->meta().producer_name.c_str());
    for (const auto& i : ins) std::fprintf(f, "  input  %-20s %s %s\n", i["name"].get<std::string>().c_str(), i["dtype"].get<std::string>().c_str(), i["shape"].dump().c_str());
    for (const auto& i : outs) std::fprintf(f, "  output %-20s %s %s\n", i["name"].get<std::string>().c_str(), i["dtype"].get<std::string>().c_str(), i["shape"].dump().c_str());
    std::fprintf(f, "  parameters %s   FLOPs %s   ops %lld (ONNX nodes %d, folded %d, removed %d)\n", human(static_cast<double>(s.num_parameters)).c_str(),
                human(s.flops).c_str(), static_cast<long long>(s.num_ops), stats.onnx_nodes, stats.folded_nodes, stats.removed_nodes);
    print_op_table(f, s, nullptr);
    if (!s.opaque_ops.empty()) {
      std::fprintf(f, "  opaque ops (kept as they are, never rewritten):");
      for (const auto& op : s.opaque_ops) std::fprintf(f, " %s", op.c_str());
      std::fprintf(f, "\n");
    }
  });
  return kOk;
}

int cmd_targets(const GlobalOptions& g) {
  json all = json::array();
  for (const auto& t : pipeline::targets()) {
    const auto here = pipeline::measurability(t);
    json fused = json::array();
    for (const auto& [op, since] : t.fused_ops) fused.push_back({{"op", op}, {"opset", since}});
    all.push_back({{"name", t.name}, {"runtime", t.runtime}, {"device", t.device}, {"cost_model", t.cost_model},
                   {"max_opset", t.max_opset}, {"opset_source", t.opset_source}, {"fused_ops", fused},
                   {"runtime_fusions", t.runtime_fusions}, {"doubtful_fusions", t.doubtful_fusions}, {"measured_by", t.bench}, {"measurable_here", here.measurable},
                   {"why_not_measurable", here.why_not}});
  }
  if (g.json) {
    std::cout << json_text(json{{"targets", all}}) << std::endl;
    return kOk;
  }
  for (const auto& t : pipeline::targets()) {
    const auto here = pipeline::measurability(t);
    std::printf("%s\n  runtime          %s\n  device           %s\n  cost model       %s\n", t.name.c_str(), t.runtime.c_str(), t.device.c_str(),
                t.cost_model.c_str());
    std::printf("  opsets           up to %lld (%s)\n  fused ops        ", static_cast<long long>(t.max_opset), t.opset_source.c_str());
    for (size_t i = 0; i < t.fused_ops.size(); ++i)
      std::printf("%s%s (%lld)", i ? ", " : "", t.fused_ops[i].first.c_str(), static_cast<long long>(t.fused_ops[i].second));
    std::printf("\n  runtime fusions  %s\n", t.runtime_fusions.empty() ? "none priced" : "");
    for (const auto& f : t.runtime_fusions) std::printf("    %s\n", f.c_str());
    if (!t.doubtful_fusions.empty()) {
      std::printf("  also tried without");
      for (const auto& f : t.doubtful_fusions) std::printf(" %s", f.c_str());
      std::printf(" (measured slower than its chain at some sizes)\n");
    }
    std::printf("  measurable here  %s\n", here.measurable ? ("yes (rlflow bench --target " + t.bench + ")").c_str() : ("no: " + here.why_not).c_str());
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
  if (g.json) std::cout << json_text(json{{"ok", ok}, {"max_abs_diff", worst}, {"outputs", per}}) << std::endl;
  else std::printf("%s: %s (max abs diff %.3g)\n", o.model.c_str(), ok ? "match" : "MISMATCH", worst);
  return ok ? kOk : kVerificationFailed;
}

void declare_info(CLI::App& app, GlobalOptions& g, Subcommands& out) {
  auto o = std::make_shared<InfoOptions>();
  auto& info = *o;
  auto* c_info = app.add_subcommand("info", "Inputs, outputs, op histogram, parameters and FLOPs of a model");
  c_info->add_option("model", info.model, "ONNX model")->required();
  c_info->add_option("--input-shape", info.input_shapes, "Static shape for an input, e.g. x:1,3,224,224 (repeatable)");
  c_info->add_flag("--json", g.json, "Print one JSON document");

  auto* c_targets = app.add_subcommand("targets", "The targets --target takes: runtime, device, cost model, opsets, fused ops, runtime fusions, measurable here");
  c_targets->add_flag("--json", g.json, "Print one JSON document");
  out.push_back({c_info, [&g, o] { return cmd_info(g, *o); }});
  out.push_back({c_targets, [&g] { return cmd_targets(g); }});
}

}  // namespace rlflow::cli
