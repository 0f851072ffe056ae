#include "rlflow/pipeline/compare.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "rlflow/bench/helper.h"
#include "rlflow/bench/runner.h"
#include "rlflow/ir/dim_expr.h"
#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/report_html.h"
#include "rlflow/util/clock.h"
#include "rlflow/util/file_io.h"

namespace rlflow::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
// The input loaded and saved by onnx, unchanged: how far from 1.00x noise alone takes a speedup.
constexpr const char* kNoiseControl = "resaved";
}  // namespace

const std::vector<std::string>& default_peers() {
  static const std::vector<std::string> peers = {"onnxslim", "onnxsim", "onnxoptimizer", "ort-fusions", "ort-transformers", kNoiseControl};
  return peers;
}

namespace {

const std::set<std::string> kKnownPeers = {"onnxslim", "onnxsim", "onnxoptimizer", "ort-fusions", "ort-transformers", kNoiseControl};

Status check_peer_name(const std::string& peer) {
  const auto colon = peer.find(':');
  const std::string base = peer.substr(0, colon);
  if (base == "script") {
    if (colon == std::string::npos || colon + 1 == peer.size()) return Error{ErrorCode::kUsage, "--peers: 'script' needs a path: script:PATH"};
    return {};
  }
  if (base == "ort-transformers" && colon != std::string::npos && colon + 1 < peer.size()) return {};
  if (colon == std::string::npos && kKnownPeers.count(base)) return {};
  std::string known;
  for (const auto& p : default_peers()) known += p + ", ";
  return Error{ErrorCode::kUsage, "--peers: no peer tool named '" + peer + "' (peers: " + known + "ort-transformers:TYPE, script:PATH)"};
}

// A file name for a peer's output: its name with anything but letters, digits, '-' and '_' as '_'.
std::string file_name(const std::string& tool, size_t k) {
  std::string s = std::to_string(k) + "-";
  for (char c : tool.substr(0, 40)) s += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return s + ".onnx";
}

std::string sizes_text(const std::map<std::string, int64_t>& sizes) {
  std::string s;
  for (const auto& [name, size] : sizes) s += (s.empty() ? "" : " ") + name + "=" + std::to_string(size);
  return s;
}

std::string binding_text(const ir::Binding& b) { return b.sizes.empty() ? b.label : b.label + " (" + sizes_text(b.sizes) + ")"; }

}  // namespace

Expected<CompareReport> compare_peers(const ComparePeersOptions& o, const CompareHooks& hooks) {
  auto stage = [&](const std::string& text) {
    spdlog::info("compare: {}", text);
    if (hooks.stage) hooks.stage(text);
  };
  const std::vector<std::string> peers = o.peers.empty() ? default_peers() : o.peers;
  for (const auto& p : peers)
    if (auto st = check_peer_name(p); !st.ok()) return st.error();
  if (o.timeout_s <= 0) return Error{ErrorCode::kUsage, "--timeout must be positive"};
  if (!o.report_html.empty()) RLFLOW_TRY_STATUS(check_output_path(o.report_html, {o.model}, "--report"));

  CompareReport report;
  report.model = o.model;
  report.threads = o.threads;
  report.confidence = o.bench.confidence;

  // The input, at its representative sizes and at each verification binding.
  stage("importing " + o.model);
  exec::Executor ex;
  onnxio::ImportStats stats;
  auto fixed = parse_fixed_dims(o.rlflow.fixed_dims);
  if (!fixed) return fixed.error();
  auto input = load_model(o.model, o.rlflow.input_shapes, ex, &stats, o.rlflow.memory_mb, *fixed, /*keep_static_dims=*/true);
  if (!input) return input.error();
  std::vector<ir::Binding> bindings{{"representative", stats.dynamic_dims}};
  const auto more = ir::verification_bindings(stats.dynamic_dims, stats.min_dims);
  const int short_k = ir::short_binding(more, stats.dynamic_dims);
  bindings.insert(bindings.end(), more.begin(), more.end());
  std::vector<std::optional<ir::Graph>> at(bindings.size());
  at[0] = std::move(*input);
  for (size_t k = 1; k < bindings.size(); ++k) {
    onnxio::ImportOptions io;
    io.evaluator = &ex;
    io.dim_values = bindings[k].sizes;
    io.fixed_dims = *fixed;
    io.share_weights_with = &*at[0];
    auto g = onnxio::import_model_file(o.model, io);
    if (g) at[k] = std::move(*g);
    else report.input_fails.push_back("the input does not import at " + binding_text(bindings[k]) + ": " + g.error().message);
  }

  // Where the files go.
  std::unique_ptr<TempPath> temp_dir;
  std::vector<std::unique_ptr<TempPath>> temp_files;
  fs::path dir;
  if (!o.keep_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.keep_dir, ec);
    if (ec || !fs::is_directory(o.keep_dir)) return Error::bad_input("--keep " + o.keep_dir + ": not a folder that can be made (" + ec.message() + ")");
    dir = o.keep_dir;
  } else {
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    auto made = make_temp_folder(((ec ? fs::path("/tmp") : tmp) / "rlflow-compare-XXXXXX").string());
    if (!made) return made.error();
    temp_dir = std::move(*made);
    dir = temp_dir->path();
  }
  auto output_path = [&](const std::string& name) {
    const std::string p = (dir / name).string();
    if (temp_dir) {
      temp_files.push_back(std::make_unique<TempPath>(p));
      temp_files.push_back(std::make_unique<TempPath>(p + ".data"));
    }
    return p;
  };

  // The peers, each in a child process of the helper's.
  auto peers_helper = bench::Helper::start(bench::peers_helper_script());
  if (!peers_helper) return peers_helper.error().with_context("starting the peer tools' helper");
  auto count_nodes = [&](const std::string& path) -> int64_t {
    auto r = (*peers_helper)->call({{"cmd", "nodes"}, {"path", path}});
    return r ? (*r).value("nodes", int64_t{-1}) : -1;
  };
  report.input_nodes = count_nodes(o.model);
  for (size_t k = 0; k < peers.size(); ++k) {
    ToolResult t;
    t.name = peers[k];
    t.path = output_path(file_name(peers[k], k));
    stage("running " + t.name);
    auto r = (*peers_helper)->call({{"cmd", "run"}, {"peer", t.name}, {"src", o.model}, {"dst", t.path}, {"timeout", o.timeout_s}});
    if (!r) {
      t.status = "failed";
      t.error = r.error().message;
    } else {
      t.status = (*r).value("status", std::string("failed"));
      if ((*r)["version"].is_string()) t.version = (*r)["version"].get<std::string>();
      if ((*r)["error"].is_string()) t.error = (*r)["error"].get<std::string>();
      t.seconds = (*r).value("seconds", 0.0);
      if ((*r)["nodes"].is_number_integer()) t.nodes = (*r)["nodes"].get<int64_t>();
    }
    report.tools.push_back(std::move(t));
  }

  // rlflow, at optimise's defaults.
  {
    ToolResult t;
    t.name = "rlflow";
    t.path = output_path(file_name("rlflow", peers.size()));
    OptimiseOptions ro = o.rlflow;
    ro.model = o.model;
    ro.output = t.path;
    ro.report_html.clear();
    stage("running rlflow (optimise --target " + ro.target + ")");
    const auto t0 = std::chrono::steady_clock::now();
    auto rep = optimise(ro, hooks.rlflow);
    t.seconds = seconds_since(t0);
    if (!rep) {
      t.status = "failed";
      t.error = rep.error().message;
    } else {
      t.status = "ok";
      report.rlflow_report = rep->to_json();
      t.nodes = count_nodes(t.path);
    }
    report.tools.push_back(std::move(t));
  }

  // Every file against the input in onnxruntime, at every binding.
  auto ort = bench::Helper::start(bench::ort_helper_script());
  if (!ort) return ort.error().with_context("starting onnxruntime");
  if (auto hello = (*ort)->call({{"cmd", "hello"}}); !hello)
    return Error::unsupported("onnxruntime is not usable through " + bench::python_interpreter() + ": " + hello.error().message +
                              " (run scripts/setup/setup, or set RLFLOW_PYTHON)");
  std::vector<bool> input_runs(bindings.size(), false);
  for (size_t k = 0; k < bindings.size(); ++k) {
    const std::string where = binding_text(bindings[k]);
    if (!at[k]) continue;
    report.checked_at.push_back(where);
    const json inputs = bench::input_shapes_json(*at[k]);
    bool reference_ok = true;
    for (auto& t : report.tools) {
      if (t.status != "ok" || !reference_ok) continue;
      stage("checking " + t.name + " at " + where);
      ToolResult::Check c;
      c.binding = where;
      auto r = (*ort)->call({{"cmd", "check"}, {"reference", o.model}, {"candidate", t.path}, {"inputs", inputs},
                             {"seed", o.rlflow.seed}, {"atol", o.atol}, {"rtol", o.rtol}});
      if (!r) return r.error().with_context("checking " + t.name + "'s file at " + where);
      if ((*r)["reference_error"].is_string()) {
        // The input itself fails there: no file is checked at this binding.
        reference_ok = false;
        report.input_fails.push_back("the input fails in onnxruntime at " + where + ": " + (*r)["reference_error"].get<std::string>());
        continue;
      }
      c.checked = true;
      c.match = (*r).value("match", false);
      if ((*r)["max_abs_diff"].is_number()) c.max_abs_diff = (*r)["max_abs_diff"].get<double>();
      if ((*r)["candidate_error"].is_string()) c.message = "it does not run: " + (*r)["candidate_error"].get<std::string>();
      else c.message = (*r).value("message", std::string());
      if (!c.match) {
        t.status = "wrong";
        t.error = "at " + where + ": " + c.message;
      }
      t.checks.push_back(std::move(c));
    }
    input_runs[k] = reference_ok;
  }

  // The right files timed, interleaved with the input, at the representative and the short binding.
  bool sequence = false;
  for (const auto& [name, size] : stats.dynamic_dims) sequence = sequence || ir::symbol_role(name) != ir::SymbolRole::kBatch;
  std::vector<size_t> timed{0};
  if (short_k >= 0) timed.push_back(static_cast<size_t>(short_k) + 1);
  bench::BenchOptions bo = o.bench;
  bo.seed = o.rlflow.seed;
  for (size_t k : timed) {
    if (!at[k] || !input_runs[k]) continue;
    const std::string label = k == 0 ? (sequence ? "prefill" : "representative")
                              : bindings[k].label == "decode step" ? "decode step"
                                                                   : "sequence 1";
    report.timed.push_back(binding_text(bindings[k]));
    report.timed_labels.push_back(label);
    bench::RunnerOptions rop;
    rop.target = "ort";
    rop.threads = o.threads;
    rop.seed = bo.seed;
    stage("timing at " + report.timed.back());
    auto runner = bench::make_runner(rop);
    if (!runner) return runner.error();
    report.runner = (*runner)->description();
    std::vector<size_t> ids;
    std::vector<ToolResult*> who;
    auto base = (*runner)->load({o.model, *at[k]});
    if (!base) return base.error();
    ids.push_back(*base);
    for (auto& t : report.tools) {
      if (t.status != "ok") continue;
      auto id = (*runner)->load({t.path, *at[k]});
      if (!id) {
        t.status = "failed";
        t.error = "onnxruntime cannot time it at " + report.timed.back() + ": " + id.error().message;
        continue;
      }
      ids.push_back(*id);
      who.push_back(&t);
    }
    auto res = bench::run_bench(**runner, ids, bo, hooks.round);
    if (!res) return res.error();
    report.rounds.push_back(res->rounds);
    report.input_ms.push_back(res->files[0].median_ms);
    const size_t slot = report.timed.size() - 1;
    ToolResult* best = nullptr;
    ToolResult* ours = nullptr;
    std::vector<const std::vector<double>*> samples(report.tools.size(), nullptr);
    for (size_t i = 0; i < who.size(); ++i) {
      auto& t = *who[i];
      t.timings.resize(slot + 1);
      t.timings[slot] = {res->files[i + 1].median_ms, res->files[i + 1].speedup};
      samples[static_cast<size_t>(&t - report.tools.data())] = &res->files[i + 1].ms;
      if (t.name == "rlflow") ours = &t;
      else if (t.name == kNoiseControl) continue;  // the input unchanged: noise, not a peer
      else if (!best || t.timings[slot].over_input.estimate > best->timings[slot].over_input.estimate) best = &t;
    }
    CompareReport::VsPeer vs;
    if (best && ours) {
      vs.peer = best->name;
      vs.speedup = bench::paired_speedup(*samples[static_cast<size_t>(best - report.tools.data())],
                                         *samples[static_cast<size_t>(ours - report.tools.data())], bo.confidence);
    }
    report.rlflow_vs_fastest_peer.push_back(vs);
  }
  if (!o.keep_dir.empty())
    for (auto& t : report.tools)
      if (t.status == "not installed") t.path.clear();
  if (o.keep_dir.empty())
    for (auto& t : report.tools) t.path.clear();
  if (!o.report_html.empty()) {
    // rlflow's own page, with the comparison as its own section; a page of the comparison alone
    // when rlflow did not run.
    json page = report.rlflow_report.is_object() ? report.rlflow_report : json{{"model", o.model}};
    page["comparison"] = report.to_json();
    if (auto st = write_file_atomic(o.report_html, report_html(page)); !st.ok())
      spdlog::error("--report: the page was not written: {}", st.error().message);
  }
  return report;
}

json CompareReport::to_json() const {
  json tools_json = json::array();
  for (const auto& t : tools) {
    json checks_json = json::array();
    for (const auto& c : t.checks)
      checks_json.push_back({{"binding", c.binding}, {"match", c.match}, {"max_abs_diff", c.max_abs_diff}, {"message", c.message}});
    json timings_json = json::array();
    for (size_t k = 0; k < t.timings.size(); ++k)
      timings_json.push_back({{"binding", timed[k]}, {"label", timed_labels[k]}, {"median_ms", t.timings[k].median_ms},
                              {"speedup", t.timings[k].over_input.estimate},
                              {"speedup_ci", {t.timings[k].over_input.ci.lo, t.timings[k].over_input.ci.hi}}});
    tools_json.push_back({{"name", t.name}, {"version", t.version.empty() ? json() : json(t.version)}, {"status", t.status},
                          {"error", t.error.empty() ? json() : json(t.error)}, {"seconds", t.seconds},
                          {"nodes", t.nodes >= 0 ? json(t.nodes) : json()}, {"path", t.path.empty() ? json() : json(t.path)},
                          {"checks", checks_json}, {"timings", timings_json}});
  }
  json vs_json = json::array();
  for (size_t k = 0; k < rlflow_vs_fastest_peer.size(); ++k) {
    const auto& v = rlflow_vs_fastest_peer[k];
    vs_json.push_back({{"binding", timed[k]}, {"label", timed_labels[k]}, {"peer", v.peer.empty() ? json() : json(v.peer)},
                       {"speedup", v.peer.empty() ? json() : json(v.speedup.estimate)},
                       {"speedup_ci", v.peer.empty() ? json() : json({v.speedup.ci.lo, v.speedup.ci.hi})}});
  }
  json timed_json = json::array();
  for (size_t k = 0; k < timed.size(); ++k)
    timed_json.push_back({{"binding", timed[k]}, {"label", timed_labels[k]}, {"input_median_ms", input_ms[k]}, {"rounds", rounds[k]}});
  return {{"ok", true},
          {"model", model},
          {"input_nodes", input_nodes},
          {"runner", runner},
          {"threads", threads},
          {"confidence", confidence},
          {"checked_at", checked_at},
          {"input_fails", input_fails},
          {"timed", timed_json},
          {"tools", tools_json},
          {"rlflow_vs_fastest_peer", vs_json}};
}

void CompareReport::print(std::FILE* out) const {
  std::fprintf(out, "%s: %lld nodes\n", model.c_str(), static_cast<long long>(input_nodes));
  std::fprintf(out, "checked in onnxruntime against the input at %zu binding%s:", checked_at.size(), checked_at.size() == 1 ? "" : "s");
  for (size_t k = 0; k < checked_at.size(); ++k) std::fprintf(out, "%s %s", k ? ";" : "", checked_at[k].c_str());
  std::fprintf(out, "\n");
  for (const auto& f : input_fails) std::fprintf(out, "note: %s\n", f.c_str());
  if (!timed.empty()) {
    std::fprintf(out, "timed in %s, interleaved, paired by round:", runner.c_str());
    for (size_t k = 0; k < timed.size(); ++k) std::fprintf(out, "%s %s %d rounds (input %.3f ms)", k ? ";" : "", timed[k].c_str(), rounds[k], input_ms[k]);
    std::fprintf(out, "\n");
  }
  const int pct = static_cast<int>(confidence * 100 + 0.5);
  std::fprintf(out, "\n  %-22s %-9s %-14s %6s %8s", "tool", "version", "status", "nodes", "seconds");
  for (const auto& l : timed_labels) std::fprintf(out, "  %-28s", (l + " speedup, " + std::to_string(pct) + "% CI").c_str());
  std::fprintf(out, "\n  %-22s %-9s %-14s %6lld %8s", "(input)", "", "", static_cast<long long>(input_nodes), "");
  for (size_t k = 0; k < timed.size(); ++k) std::fprintf(out, "  %-28s", "1.000x");
  std::fprintf(out, "\n");
  for (const auto& t : tools) {
    std::string name = t.name.size() > 22 ? t.name.substr(0, 21) + "~" : t.name;
    std::fprintf(out, "  %-22s %-9s %-14s %6s %8.1f", name.c_str(), t.version.substr(0, 9).c_str(), t.status.c_str(),
                 t.nodes >= 0 ? std::to_string(t.nodes).c_str() : "-", t.seconds);
    for (size_t k = 0; k < timed.size(); ++k) {
      char cell[64] = "-";
      if (k < t.timings.size() && t.timings[k].median_ms > 0)
        std::snprintf(cell, sizeof cell, "%.3fx [%.3f, %.3f]", t.timings[k].over_input.estimate, t.timings[k].over_input.ci.lo,
                      t.timings[k].over_input.ci.hi);
      std::fprintf(out, "  %-28s", cell);
    }
    std::fprintf(out, "\n");
  }
  for (const auto& t : tools)
    if (!t.error.empty()) std::fprintf(out, "  %s %s: %s\n", t.name.c_str(), t.status.c_str(), t.error.c_str());
  for (size_t k = 0; k < rlflow_vs_fastest_peer.size(); ++k) {
    const auto& v = rlflow_vs_fastest_peer[k];
    if (v.peer.empty()) continue;
    std::fprintf(out, "rlflow over the fastest right peer at %s (%s): %.3fx [%.3f, %.3f]%s\n", timed_labels[k].c_str(), v.peer.c_str(),
                 v.speedup.estimate, v.speedup.ci.lo, v.speedup.ci.hi,
                 v.speedup.ci.hi < 1 ? "  (slower)" : v.speedup.ci.lo >= 1 ? "" : "  (not distinguishable)");
  }
}

}  // namespace rlflow::pipeline
