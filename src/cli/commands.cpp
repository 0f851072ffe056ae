#include "commands.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
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

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

json type_json(const std::string& name, const ir::TensorType& t) {
  return {{"name", name}, {"dtype", ir::dtype_name(t.dtype)}, {"shape", t.shape}};
}

json summary_json(const ir::GraphSummary& s) {
  return {{"ops", s.num_ops}, {"op_counts", s.op_counts}, {"parameters", s.num_parameters}, {"flops", s.flops},
          {"opaque_ops", s.opaque_ops}};
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

Expected<ir::Graph> load_model(const std::string& path, const std::vector<std::string>& shapes, const exec::Executor& ex,
                               onnxio::ImportStats* stats) {
  auto parsed = parse_input_shapes(shapes);
  if (!parsed) return parsed.error();
  onnxio::ImportOptions io;
  io.input_shapes = *parsed;
  io.evaluator = &ex;
  return onnxio::import_model_file(path, io, stats);
}

std::vector<const rules::Rule*> select_rules(const rules::RuleLibrary& lib, bool all_rules) {
  std::vector<const rules::Rule*> out;
  for (const auto& r : lib.rules)
    if (r.status != rules::VerifyStatus::kRefuted && r.status != rules::VerifyStatus::kUnverified && (all_rules || r.in_default_set))
      out.push_back(&r);
  return out;
}

namespace {

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

struct SearchOutcome {
  search::Result result;
  std::string cost_model;
  size_t num_rules = 0;
};

// Loads the rules and the cost model, runs the strategy, and keeps a progress line on a terminal.
Expected<SearchOutcome> run_search(const OptimiseOptions& o, const ir::Graph& graph, bool allow_progress) {
  const std::string rules_path = o.rules_file.empty() ? rules::default_library_path() : o.rules_file;
  auto lib = rules::load_library(rules_path);
  if (!lib) return lib.error();
  auto rules = select_rules(*lib, o.all_rules);
  if (rules.empty() && o.search != "rl") return Error::bad_input(rules_path + ": no verified rules to search with");
  cost::CostOptions co;
  co.kind = o.deterministic ? "analytic" : o.cost_model;
  co.deterministic = o.deterministic;
  co.device_profile = o.device_profile;
  auto model = cost::make_cost_model(co);
  if (!model) return model.error();
  Expected<std::unique_ptr<search::Optimizer>> opt = Error::internal("no optimizer");
  size_t num_rules = rules.size();
  if (o.search == "rl") {
    // The agent brings its own xfers (rules named in its checkpoint).
    auto info = rl::read_agent_info(o.agent);
    if (!info) return o.agent.empty() ? Error{ErrorCode::kUsage, "--search rl needs --agent AGENT.pt"} : info.error();
    num_rules = info->rules.size();
    rl::RlSearchOptions ro;
    ro.agent_path = o.agent;
    ro.rollouts = o.rollouts;
    ro.seed = o.seed;
    opt = rl::make_rl_optimizer(ro, *lib, **model);
  } else {
    search::SearchOptions so;
    so.alpha = o.alpha;
    opt = search::make_optimizer(o.search, rules, **model, so);
  }
  if (!opt) return opt.error();
  const bool tty = allow_progress && isatty(STDERR_FILENO) && spdlog::get_level() < spdlog::level::err;
  if (tty)
    (*opt)->set_progress([](const search::Report& r, double best) {
      std::fprintf(stderr, "\r[search] expanded %lld, unique %lld, best cost %.4f ms, %.1fs   ", static_cast<long long>(r.expanded),
                   static_cast<long long>(r.unique_graphs), best, r.seconds_total);
    });
  search::Limits lim;
  lim.budget = o.budget;
  lim.time_limit_s = o.time_limit_s;
  lim.memory_bytes = o.memory_mb << 20;
  auto res = (*opt)->run(graph, lim);
  if (tty) std::fprintf(stderr, "\r%80s\r", "");
  if (!res) return res.error();
  return SearchOutcome{std::move(*res), (*model)->name(), num_rules};
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

int report_error(const GlobalOptions& g, const Error& e) {
  const int code = exit_code_for(e.code);
  std::fprintf(stderr, "rlflow: error: %s\n", e.message.c_str());
  if (g.json) std::cout << json{{"ok", false}, {"error", e.message}, {"exit_code", code}}.dump(2) << std::endl;
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
  auto graph = load_model(o.model, o.input_shapes, ex, &stats);
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

int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  if (fs::exists(o.output, ec) && fs::exists(o.model, ec) && fs::equivalent(o.output, o.model, ec))
    return report_error(g, Error{ErrorCode::kUsage, "the output path is the input model; choose another -o"});
  exec::Executor ex;
  onnxio::ImportStats stats;
  auto original = load_model(o.model, o.input_shapes, ex, &stats);
  if (!original) return report_error(g, original.error());
  const double t_import = seconds_since(t0);
  spdlog::info("imported {}: {} ops ({} ONNX nodes, {} folded) in {:.2f}s", o.model, original->num_ops(), stats.onnx_nodes,
               stats.folded_nodes, t_import);

  ir::Graph optimised = *original;
  json search_json = nullptr, cost_json = nullptr, steps_json = json::array();
  std::map<std::string, int> applied;
  double t_search = 0;
  if (o.search != "none") {
    auto outcome = run_search(o, *original, !g.json);
    if (!outcome) return report_error(g, outcome.error());
    const auto& r = outcome->result;
    // Weight-only subgraphs the rewrites created (concatenated or enlarged kernels) fold now, so
    // the summary describes the model as written.
    auto folded = ir::fold_constants(r.best, ex);
    if (!folded) return report_error(g, folded.error().with_context("folding the optimised graph"));
    optimised = std::move(*folded);
    t_search = r.report.seconds_total;
    for (const auto& m : r.steps) {
      applied[m.rule]++;
      steps_json.push_back({{"rule", m.rule}, {"nodes", m.nodes}});
    }
    cost_json = {{"model", outcome->cost_model}, {"before_ms", r.initial_cost}, {"after_ms", r.best_cost},
                 {"speedup", r.best_cost > 0 ? r.initial_cost / r.best_cost : 1.0}};
    // The analytic model's view of the same two graphs (deterministic and cheap), so results
    // found under a measured model can be compared across machines.
    if (outcome->cost_model != "analytic") {
      cost::CostOptions ao;
      ao.kind = "analytic";
      ao.device_profile = o.device_profile;
      if (auto am = cost::make_cost_model(ao)) {
        auto b = cost::graph_cost(*original, **am), a = cost::graph_cost(r.best, **am);
        if (b && a) cost_json["analytic"] = {{"before_ms", *b}, {"after_ms", *a}};
      }
    }
    search_json = {{"strategy", o.search},
                   {"stop_reason", search::stop_reason_name(r.stop)},
                   {"rules", outcome->num_rules},
                   {"expanded", r.report.expanded},
                   {"generated", r.report.generated},
                   {"unique_graphs", r.report.unique_graphs},
                   {"pruned", r.report.pruned},
                   {"rejected", r.report.rejected},
                   {"peak_states", r.report.peak_states},
                   {"peak_state_mb", static_cast<double>(r.report.peak_state_bytes) / (1 << 20)},
                   {"seconds", {{"match", r.report.seconds_match}, {"apply", r.report.seconds_apply},
                                {"cost", r.report.seconds_cost}, {"total", r.report.seconds_total}}}};
    spdlog::info("search {}: cost {:.4f} -> {:.4f} ms in {:.2f}s ({})", o.search, r.initial_cost, r.best_cost, t_search,
                 search::stop_reason_name(r.stop));
  }

  // Verification re-imports the temporary output file, so it checks exactly the bytes that land.
  onnxio::ExportOptions eo;
  eo.evaluator = &ex;
  json verification = {{"enabled", o.verify}};
  double t_verify = 0;
  auto verify_written = [&](const std::string& tmp_path) -> Status {
    const auto tv = std::chrono::steady_clock::now();
    onnxio::ImportOptions io;
    io.evaluator = &ex;
    auto written = onnxio::import_model_file(tmp_path, io);
    if (!written) return Error::internal("re-importing the exported model failed: " + written.error().message);
    exec::CompareOptions co;
    co.seed = o.seed;
    co.atol = o.atol;
    co.rtol = o.rtol;
    auto cmp = exec::compare_graphs(*original, *written, co);
    t_verify = seconds_since(tv);
    if (!cmp) {
      if (cmp.error().code == ErrorCode::kUnsupported && ir::structurally_equal(*original, *written)) {
        verification["method"] = "structural";
        verification["ok"] = true;
        verification["note"] = cmp.error().message;
        return {};
      }
      return Error{ErrorCode::kVerificationFailed,
                   "cannot verify the result: " + cmp.error().message + "; nothing was written (use --no-verify to skip)"};
    }
    verification["method"] = "reference executor";
    verification["ok"] = cmp->ok;
    verification["max_abs_diff"] = cmp->max_abs_diff;
    verification["atol"] = o.atol;
    verification["rtol"] = o.rtol;
    verification["seed"] = o.seed;
    if (!cmp->ok) return Error{ErrorCode::kVerificationFailed, "verification failed: " + cmp->message + "; nothing was written"};
    return {};
  };
  const auto te = std::chrono::steady_clock::now();
  auto written = o.verify ? onnxio::write_model_file(optimised, o.output, eo, o.model, verify_written)
                          : onnxio::write_model_file(optimised, o.output, eo, o.model);
  if (!written.ok()) return report_error(g, written.error());
  const double t_export = seconds_since(te) - t_verify;
  const double total = seconds_since(t0);
  const auto before = ir::summarize(*original);
  const auto after = ir::summarize(optimised);
  if (g.json) {
    json j{{"ok", true},
           {"model", o.model},
           {"output", o.output},
           {"search", o.search},
           {"before", summary_json(before)},
           {"after", summary_json(after)},
           {"verification", verification},
           {"cost", cost_json},
           {"search_report", search_json},
           {"rules_applied", applied},
           {"steps", steps_json},
           {"time_s", {{"import", t_import}, {"search", t_search}, {"export", t_export}, {"verify", t_verify}, {"total", total}}}};
    std::cout << j.dump(2) << std::endl;
    return kOk;
  }
  std::printf("rlflow optimise %s -> %s  (search: %s)\n", o.model.c_str(), o.output.c_str(), o.search.c_str());
  print_op_table(before, &after);
  if (!cost_json.is_null()) {
    std::printf("cost (%s): %.4f ms -> %.4f ms, speedup %.3fx\n", cost_json["model"].get<std::string>().c_str(),
                cost_json["before_ms"].get<double>(), cost_json["after_ms"].get<double>(), cost_json["speedup"].get<double>());
    std::printf("search %s: %lld graphs expanded, %lld unique, %.2fs, stopped: %s\n", o.search.c_str(),
                static_cast<long long>(search_json["expanded"].get<int64_t>()),
                static_cast<long long>(search_json["unique_graphs"].get<int64_t>()), t_search,
                search_json["stop_reason"].get<std::string>().c_str());
    if (applied.empty()) std::printf("rules applied: none\n");
    else {
      std::printf("rules applied:");
      for (const auto& [rule, n] : applied) std::printf(" %s x%d", rule.c_str(), n);
      std::printf("\n");
    }
  }
  if (o.verify) {
    if (verification["method"] == "structural")
      std::printf("verified: structurally identical to the original (%s)\n", verification["note"].get<std::string>().c_str());
    else
      std::printf("verified: max abs diff %.3g against the original (atol %g, rtol %g, seed %llu)\n",
                  verification["max_abs_diff"].get<double>(), o.atol, o.rtol, static_cast<unsigned long long>(o.seed));
  } else {
    std::printf("not verified (--no-verify)\n");
  }
  std::printf("time: %.2fs (import %.2fs, search %.2fs, export %.2fs, verify %.2fs)\n", total, t_import, t_search, t_export, t_verify);
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
  auto outs = ex.run(*graph, run_inputs);
  if (!outs) return report_error(g, outs.error());
  if (outs->size() != expected.size())
    return report_error(g, Error{ErrorCode::kVerificationFailed, "the model has " + std::to_string(outs->size()) +
                                                                     " outputs, the data " + std::to_string(expected.size())});
  bool ok = true;
  double worst = 0;
  json per = json::array();
  for (size_t k = 0; k < outs->size(); ++k) {
    auto d = exec::diff_tensors(*(*outs)[k], *expected[k], o.atol, o.rtol);
    const bool same_type = (*outs)[k]->dtype() == expected[k]->dtype();
    ok = ok && d.ok && same_type;
    worst = std::max(worst, d.max_abs_diff);
    per.push_back({{"index", k}, {"ok", d.ok && same_type}, {"max_abs_diff", d.max_abs_diff}});
  }
  if (g.json) std::cout << json{{"ok", ok}, {"max_abs_diff", worst}, {"outputs", per}}.dump(2) << std::endl;
  else std::printf("%s: %s (max abs diff %.3g)\n", o.model.c_str(), ok ? "match" : "MISMATCH", worst);
  return ok ? kOk : kVerificationFailed;
}

}  // namespace rlflow::cli
