// `rlflow optimise`: search for a cheaper equivalent graph under the target's cost model, verify
// it against the original, and write it only if it is not measurably slower on the target.
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "rlflow/bench/bench.h"
#include "rlflow/cli/app.h"
#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/cost/device.h"
#include "rlflow/cost/factory.h"
#include "rlflow/cost/memo.h"
#include "rlflow/cost/recorded.h"
#include "rlflow/exec/compare.h"
#include "rlflow/ir/composites.h"
#include "rlflow/ir/summary.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/rl/agent.h"
#include "rlflow/search/optimizer.h"
#include "rlflow/util/file_io.h"

namespace rlflow::cli {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The device a user deploys to: the cost model that predicts it, and how to measure it here.
struct Target {
  std::string name;
  std::string cost_model;    // default --cost-model
  std::string bench_target;  // bench runner that measures it
  bool measurable = false;   // that runner can run here (ort: decided when it starts)
  std::string why_not;       // when it cannot
};

Expected<Target> resolve_target(const std::string& name) {
  const bool gpu = cost::cudnn_backend_compiled() && cost::probe_devices().device_count > 0;
  if (name == "ort") return Target{name, target_cost_model(name), "ort", true, ""};
  if (name == "gpu")
    return Target{name, target_cost_model(name), "cudnn", gpu, gpu ? "" : "no usable GPU in this machine, or rlflow was built without the CUDA backend"};
  if (name == "h100") {
    bool h100 = false;
    if (gpu)
      for (const auto& n : cost::probe_devices().names) h100 = h100 || n.find("H100") != std::string::npos;
    return Target{name, target_cost_model(name), "cudnn", h100, h100 ? "" : "no H100 in this machine (or no CUDA backend)"};
  }
  return Error{ErrorCode::kUsage, "unknown target '" + name + "' (expected ort, h100 or gpu)"};
}

struct SearchOutcome {
  search::Result result;
  std::unique_ptr<cost::CostModel> model;
  std::vector<const rules::Rule*> replay_rules;  // every rule the steps may name
  rules::RuleLibrary library;
  size_t num_rules = 0;
  std::string kind;  // the resolved --cost-model
};

cost::CostOptions cost_options(const OptimiseOptions& o, const Target& t) {
  cost::CostOptions co;
  // --deterministic has one meaning (cost::resolve_kind): a measuring backend gives way to the analytic
  // model; the target's recorded (h100) and ort costs are deterministic already and stay.
  co.kind = o.cost_model == "auto" ? t.cost_model : o.cost_model;
  co.deterministic = o.deterministic;
  co.device_profile = o.device_profile;
  co.cost_table = o.cost_table;
  return co;
}

// Loads the rules and the cost model, runs the strategy, and keeps a progress line on a terminal.
Expected<SearchOutcome> run_search(const OptimiseOptions& o, const Target& target, const ir::Graph& graph, bool allow_progress) {
  SearchOutcome out;
  const std::string rules_path = o.rules_file.empty() ? rules::default_library_path() : o.rules_file;
  auto lib = rules::load_library(rules_path);
  if (!lib) return lib.error();
  out.library = std::move(*lib);
  auto rules = select_rules(out.library, o.all_rules);
  out.replay_rules = select_rules(out.library, /*all_rules=*/true);
  if (rules.empty() && o.search != "rl") return Error::bad_input(rules_path + ": no verified rules to search with");
  const auto co = cost_options(o, target);
  auto kind = cost::resolve_kind(co);
  if (!kind) return kind.error();
  out.kind = *kind;
  auto model = cost::make_cost_model(co);
  if (!model) return model.error();
  out.model = std::move(*model);
  Expected<std::unique_ptr<search::Optimizer>> opt = Error::internal("no optimizer");
  out.num_rules = rules.size();
  if (o.search == "rl") {
    // The agent brings its own xfers (rules named in its checkpoint).
    // Without --agent, the shipped one (trained on zoo CNNs under the recorded H100 cost).
    const std::string agent = o.agent.empty() ? rl::default_agent_path() : o.agent;
    auto info = rl::read_agent_info(agent);
    if (!info) return info.error();
    out.num_rules = info->rules.size();
    rl::RlSearchOptions ro;
    ro.agent_path = agent;
    ro.rollouts = o.rollouts;
    ro.beam = o.beam;
    ro.beam_branch = o.beam_branch;
    ro.polish = o.polish;
    ro.never_below_greedy = o.never_below_greedy;
    ro.seed = o.seed;
    opt = rl::make_rl_optimizer(ro, out.library, *out.model);
  } else {
    search::SearchOptions so;
    so.alpha = o.alpha;
    opt = search::make_optimizer(o.search, rules, *out.model, so);
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
  lim.time_limit_s = o.time_limit_s >= 0 ? o.time_limit_s : (o.deterministic ? 0 : kInteractiveTimeLimitS);
  // Stored search graphs are a cache (released and replayed beyond the cap): a quarter of the run's
  // memory, and no more than 256 MiB, which the zoo's searches never need.
  const int64_t run_mb = o.memory_mb > 0 ? o.memory_mb : default_memory_limit_mb();
  lim.memory_bytes = std::min<int64_t>(256, std::max<int64_t>(1, run_mb / 4)) << 20;
  auto res = (*opt)->run(graph, lim);
  if (tty) std::fprintf(stderr, "\r%80s\r", "");
  if (!res) return res.error();
  out.result = std::move(*res);
  return out;
}

// Refusals by reason, the non-zero ones (rules::Rejection names).
nlohmann::json rejections_json(const rules::RejectionCounts& counts) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 1; i < counts.size(); ++i)
    if (counts[i] > 0) j[std::string(rules::rejection_name(static_cast<rules::Rejection>(i)))] = counts[i];
  return j;
}

struct Candidate {
  std::string label;
  size_t steps = 0;  // rewrites applied from the input
  double predicted_ms = 0;
  ir::Graph graph;
};

// The best graph, then the graphs on the way to it (prefixes of its steps) that the cost model
// also predicts cheaper than the input, cheapest first: what to fall back on when the best one
// measures slower.
// `start_differs`: the search started from a graph that already differs from the input (composites
// fused), so the start itself is a fallback too.
Expected<std::vector<Candidate>> candidates(const ir::Graph& original, const SearchOutcome& s, int max_candidates, bool start_differs) {
  const auto& r = s.result;
  std::vector<Candidate> out;
  out.push_back({"best found", r.steps.size(), r.best_cost, r.best});
  if (max_candidates <= 1) return out;
  cost::MemoCost memo(*s.model);
  std::vector<Candidate> earlier;
  ir::Graph g = original;
  for (size_t k = 0; k + 1 < r.steps.size(); ++k) {
    auto next = search::replay(g, s.replay_rules, {r.steps[k]});
    if (!next) break;  // the best graph stays a candidate; earlier ones are optional
    g = std::move(*next);
    auto c = memo.cost(g);
    if (!c) return c.error();
    if (*c < r.initial_cost) earlier.push_back({"after " + std::to_string(k + 1) + " of " + std::to_string(r.steps.size()) + " rewrites", k + 1, *c, g});
  }
  std::stable_sort(earlier.begin(), earlier.end(), [](const Candidate& a, const Candidate& b) { return a.predicted_ms < b.predicted_ms; });
  // The composites-only graph keeps the last slot: the rewrites' predictions can all be wrong the
  // same way (measured: gpt_block's bias GEMMs block fusions onnxruntime makes itself), and then the
  // fusions alone may still pay.
  const bool keep_composites = start_differs && !r.steps.empty();
  const int slots = max_candidates - (keep_composites ? 1 : 0);
  for (auto& c : earlier) {
    if (static_cast<int>(out.size()) >= slots) break;
    out.push_back(std::move(c));
  }
  if (keep_composites) out.push_back({"composites fused, no rewrite", 0, r.initial_cost, original});
  return out;
}

std::string dims_str(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [name, size] : dims) s += (s.empty() ? "" : " ") + name + "=" + std::to_string(size);
  return s;
}

// The runtime that measures candidates (onnxruntime in a helper process) holds each model it has
// loaded, the input and every candidate tried, at about twice its weights (its own copy and the
// prepacked one). Where that would not fit beside rlflow's own run in the memory limit, nothing is
// measured and the speedup is reported as predicted, with this reason.
std::string measurement_memory(const ir::Graph& g, size_t candidates, int64_t limit_mb) {
  const auto m = ir::estimate_run_memory(g);
  const double mib = 1024.0 * 1024.0;
  const double need = m.peak_bytes + 2.0 * m.weight_bytes * static_cast<double>(1 + candidates);
  const double limit = static_cast<double>(limit_mb > 0 ? limit_mb : default_memory_limit_mb()) * mib;
  if (need <= limit) return {};
  return fmt::format("measuring would hold the input and {} candidate(s) in onnxruntime beside this run, about {:.0f} MiB, over the "
                     "memory limit of {:.0f} MiB (--memory-limit)",
                     candidates, need / mib, limit / mib);
}

constexpr const char* kSlowerMarker = "candidate measured slower than the input";
// A rewritten graph the reference executor cannot run (opaque ops) and that is not structurally the
// input cannot be verified: it is never written, and the next candidate (finally the input) is tried.
constexpr const char* kUnverifiableMarker = "candidate cannot be verified";
// A rewritten graph of a dynamic model that fails verification at the second sizes: it baked in a size.
constexpr const char* kSizeSpecificMarker = "candidate holds only at the sizes it was optimised at";
// A rewritten graph whose file, as written and re-imported, is predicted no faster than the input:
// the search's figure described an internal form the export does not write.
constexpr const char* kNoWrittenGainMarker = "the written file is predicted no faster than the input";

}  // namespace

int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  // Every path is checked before any work: the output (and the weights file written beside it for a
  // model over protobuf's limit) must not be the model, its external weights or the rule file.
  auto inputs = onnxio::model_files(o.model);
  if (!o.rules_file.empty()) inputs.push_back(o.rules_file);
  if (o.search == "rl") inputs.push_back(o.agent.empty() ? rl::default_agent_path() : o.agent);
  for (const auto& [path, role] : {std::pair{o.output, std::string("-o")}, std::pair{o.output + ".data", std::string("-o (its weights file)")}})
    if (auto st = check_output_path(path, inputs, role); !st.ok())
      return report_error(g, st.error());
  auto target = resolve_target(o.target);
  if (!target) return report_error(g, target.error());
  if (o.measure != "auto" && o.measure != "on" && o.measure != "off")
    return report_error(g, Error{ErrorCode::kUsage, "--measure must be auto, on or off"});
  exec::Executor ex;
  onnxio::ImportStats stats;
  auto original = load_model(o.model, o.input_shapes, ex, &stats, o.memory_mb);
  if (!original) return report_error(g, original.error());
  const double t_import = seconds_since(t0);
  spdlog::info("imported {}: {} ops ({} ONNX nodes, {} folded) in {:.2f}s", o.model, original->num_ops(), stats.onnx_nodes,
               stats.folded_nodes, t_import);
  // --opset: the output is written at a newer opset, where the fused ops exist (LayerNormalization
  // 17, Gelu 20): composites are then fused and written as one op, and priced as what is written.
  const int64_t input_opset = original->meta().opset("");
  if (o.opset > 0)
    if (auto st = onnxio::set_output_opset(&*original, o.opset); !st.ok()) return report_error(g, st.error());

  // The search starts from the graph with composite chains fused; verification and the "kept the
  // input" fallback use the graph as imported, so a wrong fusion cannot pass unnoticed.
  ir::CompositeStats composites;
  const ir::Graph start = o.search != "none" && o.composites ? ir::recognise_composites(*original, &composites) : *original;
  if (composites.total() > 0)
    spdlog::info("fused {} GELU, {} tanh-GELU, {} LayerNorm and {} HardSwish chains into single ops ({} nodes removed)",
                 composites.gelu, composites.gelu_tanh, composites.layer_norm, composites.hard_swish, composites.removed_nodes);
  auto composites_json = [](const ir::CompositeStats& c) {
    return json{{"gelu", c.gelu},
                {"gelu_tanh", c.gelu_tanh},
                {"layer_norm", c.layer_norm},
                {"hard_swish", c.hard_swish},
                {"removed_nodes", c.removed_nodes}};
  };

  std::vector<Candidate> cands;
  json search_json = nullptr, cost_json = nullptr;
  std::unique_ptr<cost::CostModel> model;
  search::Result* result = nullptr;
  SearchOutcome outcome;
  std::string no_predicted_gain;  // why no candidate is left (all predicted no faster than the input)
  double t_search = 0;
  if (o.search != "none") {
    auto found = run_search(o, *target, start, !g.json);
    if (!found) return report_error(g, found.error());
    outcome = std::move(*found);
    result = &outcome.result;
    const auto& r = *result;
    t_search = r.report.seconds_total;
    auto cs = candidates(start, outcome, std::max(1, o.candidates), composites.total() > 0);
    if (!cs) return report_error(g, cs.error());
    cands = std::move(*cs);
    // Weight-only subgraphs the rewrites created (concatenated or enlarged kernels) fold now, so
    // the summary describes the model as written.
    for (auto& c : cands) {
      auto folded = ir::fold_constants(c.graph, ex);
      if (!folded) return report_error(g, folded.error().with_context("folding the optimised graph"));
      c.graph = std::move(*folded);
    }
    // "before" is the model as imported; the search started from it with composites fused.
    double before_ms = r.initial_cost;
    if (composites.total() > 0) {
      cost::MemoCost memo(*outcome.model);
      auto c = memo.cost(*original);
      if (!c) return report_error(g, c.error());
      before_ms = *c;
    }
    // Only a graph predicted faster than the input is worth measuring or writing: the composites
    // the search started from may cost more than the input's chains under this model.
    const auto proposed = std::count_if(cands.begin(), cands.end(), [&](const Candidate& c) { return c.steps > 0 || composites.total() > 0; });
    cands.erase(std::remove_if(cands.begin(), cands.end(), [&](const Candidate& c) { return !(c.predicted_ms < before_ms); }),
                cands.end());
    if (cands.empty() && proposed > 0)
      no_predicted_gain = "no rewritten graph is predicted faster than the input under the " + outcome.kind + " cost (" +
                          std::to_string(r.best_cost) + " ms at best, " + std::to_string(before_ms) + " ms for the input)";
    cost_json = {{"model", outcome.kind}, {"before_ms", before_ms}, {"after_ms", r.best_cost},
                 {"speedup", r.best_cost > 0 ? before_ms / r.best_cost : 1.0}, {"predicted", true},
                 {"known_error", outcome.model->known_error()}};
    if (auto* an = dynamic_cast<cost::AnalyticCostModel*>(outcome.model.get())) cost_json["profile"] = an->profile().name;
    if (auto* rec = cost::as_recorded(*outcome.model)) {
      const auto s = rec->stats();
      cost_json["table"] = {{"path", s.table}, {"device", s.device}, {"entries", s.entries}, {"hits", s.hits}, {"misses", s.misses}};
    }
    search_json = {{"strategy", o.search},
                   {"stop_reason", search::stop_reason_name(r.stop)},
                   {"rules", outcome.num_rules},
                   {"expanded", r.report.expanded},
                   {"generated", r.report.generated},
                   {"unique_graphs", r.report.unique_graphs},
                   {"pruned", r.report.pruned},
                   {"rejected", r.report.rejected},
                   {"rejections", rejections_json(r.report.rejections)},
                   {"peak_states", r.report.peak_states},
                   {"polish", {{"steps", r.report.polish_steps}, {"gain_ms", r.report.polish_gain}}},
                   {"fallback", o.never_below_greedy ? json{{"ran", r.report.fallback_ran}, {"agent_ms", r.report.agent_cost},
                                                            {"greedy_ms", r.report.fallback_cost}, {"greedy_returned", r.report.fallback_won}}
                                                     : json(nullptr)},
                   {"peak_state_mb", static_cast<double>(r.report.peak_state_bytes) / (1 << 20)},
                   {"seconds", {{"match", r.report.seconds_match}, {"apply", r.report.seconds_apply},
                                {"cost", r.report.seconds_cost}, {"total", r.report.seconds_total}}}};
    spdlog::info("search {}: cost {:.4f} -> {:.4f} ms in {:.2f}s ({})", o.search, r.initial_cost, r.best_cost, t_search,
                 search::stop_reason_name(r.stop));
  }
  const bool rewritten = result && (!result->steps.empty() || composites.total() > 0) && no_predicted_gain.empty();

  // Measuring: only a rewritten graph needs it, and never under --deterministic unless asked.
  std::unique_ptr<bench::Runner> runner;
  size_t base_id = 0;
  json measured = nullptr;
  std::string not_measured;  // why the result is only predicted
  const bool want_measure = rewritten && (o.measure == "on" || (o.measure == "auto" && !o.deterministic));
  if (!rewritten) not_measured = no_predicted_gain.empty() ? "no rewrite was applied" : "no rewritten graph is predicted faster than the input";
  else if (!want_measure) not_measured = o.measure == "off" ? "--measure off" : "--deterministic (add --measure on to measure)";
  else if (!target->measurable) not_measured = target->why_not;
  else if (const auto why = measurement_memory(*original, cands.size(), o.memory_mb); !why.empty()) not_measured = why;
  else {
    bench::RunnerOptions ro;
    ro.target = target->bench_target;
    ro.threads = o.bench_threads;
    ro.seed = o.seed;
    auto r = bench::make_runner(ro);
    if (r) {
      auto id = (*r)->load({o.model, *original});
      if (id) {
        runner = std::move(*r);
        base_id = *id;
      } else {
        not_measured = id.error().message;
      }
    } else {
      not_measured = r.error().message;
    }
  }
  if (!runner && want_measure && o.measure == "on")
    return report_error(g, Error::unsupported("--measure on: cannot measure on target " + o.target + ": " + not_measured));
  if (!runner && rewritten) spdlog::warn("the speedup is predicted, not measured: {}", not_measured);

  // Verification re-imports the temporary output file, so it checks exactly the bytes that land.
  onnxio::ExportOptions eo;
  eo.evaluator = &ex;
  json verification = {{"enabled", o.verify}};
  // A model with symbolic dims was specialised to representative sizes; verification also runs at
  // a second set (each size halved, a size of 1 doubled), and the written file keeps the dims.
  std::map<std::string, int64_t> second_sizes;
  for (const auto& [dim, size] : stats.dynamic_dims) second_sizes[dim] = size == 1 ? 2 : std::max<int64_t>(1, size / 2);
  std::string size_specific;  // why the last rewritten candidate failed at the second sizes
  bool writing_input = false;
  std::string unverifiable;  // why the last rewritten candidate could not be verified
  std::string failed_verification;  // why the last rewritten candidate failed verification
  double t_verify = 0, t_measure = 0;
  auto import_written = [&](const std::string& tmp_path) -> Expected<ir::Graph> {
    onnxio::ImportOptions io;
    io.evaluator = &ex;
    io.dim_values = stats.dynamic_dims;  // the sizes the input was optimised at
    io.share_weights_with = &*original;  // equal weights are held once
    auto written = onnxio::import_model_file(tmp_path, io);
    if (!written) return Error::internal("re-importing the exported model failed: " + written.error().message);
    return written;
  };
  auto verify_written = [&](const std::string& tmp_path, const ir::Graph& written_graph) -> Status {
    const auto tv = std::chrono::steady_clock::now();
    const ir::Graph* written = &written_graph;
    exec::CompareOptions co;
    co.seed = o.seed;
    co.atol = o.atol;
    co.rtol = o.rtol;
    auto cmp = exec::compare_graphs(*original, *written, co);
    t_verify += seconds_since(tv);
    if (!cmp) {
      if (cmp.error().code == ErrorCode::kUnsupported && ir::structurally_equal(*original, *written)) {
        verification["method"] = "structural";
        verification["ok"] = true;
        verification["note"] = cmp.error().message;
        return {};
      }
      if (cmp.error().code == ErrorCode::kUnsupported) {
        unverifiable = cmp.error().message;
        return Error::internal(kUnverifiableMarker);
      }
      return Error{ErrorCode::kVerificationFailed,
                   "cannot verify the result: " + cmp.error().message + "; nothing was written (use --no-verify to skip)"};
    }
    verification["method"] = "reference executor";
    verification["ok"] = cmp->ok;
    verification["max_abs_diff"] = cmp->max_abs_diff;
    double atol = o.atol, rtol = o.rtol;  // widened for half-typed outputs (exec::CompareOptions::half_ulps)
    for (const auto& od : cmp->outputs) atol = std::max(atol, od.atol), rtol = std::max(rtol, od.rtol);
    verification["atol"] = atol;
    verification["rtol"] = rtol;
    if (atol != o.atol || rtol != o.rtol) verification["tolerance_note"] = "widened for half-precision outputs";
    verification["seed"] = o.seed;
    if (!cmp->ok) return Error{ErrorCode::kVerificationFailed, "verification failed: " + cmp->message + "; nothing was written"};
    if (!second_sizes.empty()) {
      // A dynamic model is checked again at other sizes: a rewrite that baked in a size fails here.
      const auto tv2 = std::chrono::steady_clock::now();
      onnxio::ImportOptions io2;
      io2.evaluator = &ex;
      io2.dim_values = second_sizes;
      auto orig2 = onnxio::import_model_file(o.model, io2);
      auto written2 = onnxio::import_model_file(tmp_path, io2);
      Expected<exec::Comparison> cmp2 = Error::internal("not compared");
      if (orig2 && written2) cmp2 = exec::compare_graphs(*orig2, *written2, co);
      t_verify += seconds_since(tv2);
      const std::string at = " at the second sizes (" + dims_str(second_sizes) + ")";
      if (!orig2) return Error::internal("re-importing the input" + at + " failed: " + orig2.error().message);
      std::string why = !written2 ? "the result does not run" + at + ": " + written2.error().message
                        : !cmp2   ? "cannot verify the result" + at + ": " + cmp2.error().message
                        : !cmp2->ok ? "verification failed" + at + ": " + cmp2->message
                                    : std::string();
      if (!why.empty()) {
        // A rewrite that holds only at the sizes it was found at: that candidate is not written,
        // the next one is tried. The input graph itself must hold at every size.
        if (writing_input) return Error{ErrorCode::kVerificationFailed, why + "; nothing was written"};
        size_specific = why;
        return Error::internal(kSizeSpecificMarker);
      }
      verification["second_sizes"] = second_sizes;
      verification["second_max_abs_diff"] = cmp2->max_abs_diff;
    }
    return {};
  };

  // A prediction describes the file actually written: each candidate's file is re-imported and priced
  // by the search's cost model, and only a file predicted faster than the input is kept.
  std::optional<cost::MemoCost> memo;
  if (outcome.model) memo.emplace(*outcome.model);
  const double before_ms = cost_json.is_object() ? cost_json["before_ms"].get<double>() : 0;
  double written_ms = before_ms;
  std::string no_written_gain;  // why the last rewritten candidate's file was not kept
  auto price_written = [&](const ir::Graph& w) -> Status {
    if (!memo) return {};
    auto c = memo->cost(w);
    if (!c) return c.error().with_context("pricing the written file");
    written_ms = *c;
    return {};
  };

  json tried = json::array();
  const Candidate* chosen = nullptr;
  bench::BenchOptions bo;
  bo.rounds = o.bench_rounds;
  bo.warmup = 2;
  bo.seed = o.seed;
  bo.max_seconds = o.bench_max_seconds;
  const auto te = std::chrono::steady_clock::now();
  for (const auto& c : cands) {
    if (c.steps == 0 && composites.total() == 0) continue;
    json entry{{"candidate", c.label}, {"steps", c.steps}, {"predicted_ms", c.predicted_ms}};
    auto check = [&](const std::string& tmp) -> Status {
      auto w = import_written(tmp);
      if (!w) return w.error();
      if (o.verify) RLFLOW_TRY_STATUS(verify_written(tmp, *w));
      RLFLOW_TRY_STATUS(price_written(*w));
      entry["written_ms"] = written_ms;
      if (memo && !(written_ms < before_ms)) {
        no_written_gain = "the file as written is predicted at " + std::to_string(written_ms) + " ms against the input's " +
                          std::to_string(before_ms) + " ms under the " + outcome.kind + " cost (the search priced it at " +
                          std::to_string(c.predicted_ms) + " ms)";
        return Error::internal(kNoWrittenGainMarker);
      }
      if (!runner) return {};
      const auto tm = std::chrono::steady_clock::now();
      auto id = runner->load({tmp, c.graph});
      if (!id) return id.error().with_context("measuring the result");
      auto v = bench::judge(*runner, base_id, *id, bo);
      t_measure += seconds_since(tm);
      if (!v) return v.error().with_context("measuring the result");
      entry["measured"] = {{"before_ms", v->base_ms}, {"after_ms", v->ms}, {"speedup", v->speedup.estimate},
                           {"speedup_ci", {v->speedup.ci.lo, v->speedup.ci.hi}}, {"ci_coverage", v->speedup.ci.coverage},
                           {"rounds", v->rounds}, {"accepted", v->accepted}};
      if (measured.is_null()) measured = {{"target", o.target}, {"runner", v->runner}, {"min_lower_bound", bench::kMinSpeedupLowerBound}};
      spdlog::info("{}: measured {:.3f} -> {:.3f} ms, speedup {:.3f}x [{:.3f}, {:.3f}]{}", c.label, v->base_ms, v->ms,
                   v->speedup.estimate, v->speedup.ci.lo, v->speedup.ci.hi, v->accepted ? "" : ": rejected");
      if (!v->accepted) return Error::internal(kSlowerMarker);
      return {};
    };
    auto st = onnxio::write_model_file(c.graph, o.output, eo, o.model, check);
    tried.push_back(entry);
    if (st.ok()) {
      chosen = &c;
      break;
    }
    if (st.error().code == ErrorCode::kVerificationFailed) {
      // A rewrite exact only in exact arithmetic can miss the model's precision (a half model
      // rounds at other points): that candidate is not written, and the next one is tried.
      failed_verification = st.error().message;
      entry["verification_failed"] = failed_verification;
      tried.back() = entry;
      spdlog::warn("{}: {}; trying the next candidate", c.label, failed_verification);
      continue;
    }
    if (st.error().message != kSlowerMarker && st.error().message != kUnverifiableMarker &&
        st.error().message != kSizeSpecificMarker && st.error().message != kNoWrittenGainMarker)
      return report_error(g, st.error());
  }
  // Every rewritten candidate failed verification: nothing is written, and the exit code says so.
  if (!chosen && !failed_verification.empty()) return report_error(g, Error{ErrorCode::kVerificationFailed, failed_verification});
  std::string kept_reason;
  if (!chosen) {
    // Nothing rewritten, or every candidate measured slower: the input's graph is written as it is.
    if (!no_predicted_gain.empty())
      kept_reason = no_predicted_gain;
    else if (!unverifiable.empty())
      kept_reason = "the rewritten graph cannot be verified (" + unverifiable + "), and only a verified graph is written";
    else if (!size_specific.empty())
      kept_reason = "the rewritten graph holds only at the sizes it was optimised at (" + size_specific +
                    "), and the output keeps the input's dynamic axes";
    else if (!no_written_gain.empty())
      kept_reason = no_written_gain;
    else if (rewritten)
      kept_reason = "no rewritten graph measured at least " + std::to_string(bench::kMinSpeedupLowerBound).substr(0, 4) +
                    "x (lower 95% bound) against the input on " + o.target;
    writing_input = true;
    auto st = onnxio::write_model_file(*original, o.output, eo, o.model, [&](const std::string& tmp) -> Status {
      auto w = import_written(tmp);
      if (!w) return w.error();
      if (o.verify) RLFLOW_TRY_STATUS(verify_written(tmp, *w));
      return price_written(*w);
    });
    if (!st.ok()) return report_error(g, st.error());
  }
  const ir::Graph& written = chosen ? chosen->graph : *original;
  const double t_export = seconds_since(te) - t_verify - t_measure;
  const double total = seconds_since(t0);
  if (!measured.is_null()) {
    measured["candidates"] = tried;
    measured["decision"] = chosen ? "rewritten graph written" : "input graph written";
    if (chosen) measured.update(tried.back()["measured"]);
    else if (!tried.empty() && tried.front().contains("measured")) measured.update(tried.front()["measured"]);
  }
  std::map<std::string, int> applied;
  json steps_json = json::array();
  if (chosen)
    for (size_t k = 0; k < chosen->steps; ++k) {
      applied[result->steps[k].rule]++;
      steps_json.push_back({{"rule", result->steps[k].rule}, {"nodes", result->steps[k].nodes}});
    }
  if (cost_json.is_object()) {
    // The claim is the written file's cost; the search's own figure for it is kept beside it.
    cost_json["after_ms"] = written_ms;
    cost_json["speedup"] = written_ms > 0 ? before_ms / written_ms : 1.0;
    cost_json["search_after_ms"] = chosen ? chosen->predicted_ms : before_ms;
    cost_json["describes"] = "the file written, re-imported";
  }
  const auto before = ir::summarize(*original);
  const auto after = ir::summarize(written);
  if (g.json) {
    json j{{"ok", true},
           {"model", o.model},
           {"output", o.output},
           {"search", o.search},
           {"target", o.target},
           {"before", summary_json(before)},
           {"after", summary_json(after)},
           {"verification", verification},
           {"cost", cost_json},
           {"search_report", search_json},
           {"rules_applied", applied},
           {"composites", composites_json(chosen ? composites : ir::CompositeStats{})},
           {"steps", steps_json},
           {"time_s", {{"import", t_import}, {"search", t_search}, {"export", t_export}, {"verify", t_verify},
                       {"measure", t_measure}, {"total", total}}}};
    if (!stats.dynamic_dims.empty()) j["dynamic_dims"] = stats.dynamic_dims;
    j["opset"] = {{"input", input_opset}, {"output", written.meta().opset("")}};
    if (!measured.is_null()) j["measured"] = measured;
    else if (rewritten) j["predicted"] = {{"reason", not_measured}, {"cost_model", cost_json["model"]}, {"known_error", cost_json["known_error"]}};
    if (!kept_reason.empty()) j["kept_input"] = kept_reason;
    std::cout << j.dump(2) << std::endl;
    return kOk;
  }
  std::printf("rlflow optimise %s -> %s  (search: %s, target: %s)\n", o.model.c_str(), o.output.c_str(), o.search.c_str(), o.target.c_str());
  if (!stats.dynamic_dims.empty())
    std::printf("dynamic dims kept in the output; optimised at %s%s\n", dims_str(stats.dynamic_dims).c_str(),
                o.verify ? (", verified also at " + dims_str(second_sizes)).c_str() : "");
  print_op_table(before, &after);
  if (result) {
    std::printf("predicted by the %s cost model: %.4f ms -> %.4f ms, %.3fx (a prediction, not a measurement)\n",
                cost_json["model"].get<std::string>().c_str(), cost_json["before_ms"].get<double>(), cost_json["after_ms"].get<double>(),
                cost_json["speedup"].get<double>());
    std::printf("search %s: %lld graphs expanded, %lld unique, %.2fs, stopped: %s\n", o.search.c_str(),
                static_cast<long long>(search_json["expanded"].get<int64_t>()),
                static_cast<long long>(search_json["unique_graphs"].get<int64_t>()), t_search,
                search_json["stop_reason"].get<std::string>().c_str());
    if (!search_json["rejections"].empty()) {
      std::printf("matches refused:");
      for (const auto& [why, n] : search_json["rejections"].items()) std::printf(" %s %lld", why.c_str(), static_cast<long long>(n.get<int64_t>()));
      std::printf("\n");
    }
    if (chosen && composites.total() > 0)
      std::printf("composites fused: %d GELU, %d tanh-GELU, %d LayerNorm, %d HardSwish (%d nodes removed)\n", composites.gelu,
                  composites.gelu_tanh, composites.layer_norm, composites.hard_swish, composites.removed_nodes);
    if (applied.empty()) std::printf("rules applied: none\n");
    else {
      std::printf("rules applied:");
      for (const auto& [rule, n] : applied) std::printf(" %s x%d", rule.c_str(), n);
      std::printf("\n");
    }
  }
  if (!measured.is_null() && measured.contains("speedup")) {
    const auto ci = measured["speedup_ci"];
    std::printf("measured on %s (%s, %d rounds, interleaved): %.3f ms -> %.3f ms, speedup %.3fx [95%% CI %.3f, %.3f]\n",
                o.target.c_str(), measured["runner"].get<std::string>().c_str(), measured["rounds"].get<int>(),
                measured["before_ms"].get<double>(), measured["after_ms"].get<double>(), measured["speedup"].get<double>(),
                ci[0].get<double>(), ci[1].get<double>());
  } else if (rewritten) {
    std::printf("not measured (%s): the speedup above is predicted; known error: %s\n", not_measured.c_str(),
                cost_json["known_error"].get<std::string>().c_str());
  }
  if (!kept_reason.empty()) std::printf("kept the input graph: %s\n", kept_reason.c_str());
  if (o.verify) {
    if (verification["method"] == "structural")
      std::printf("verified: structurally identical to the original (%s)\n", verification["note"].get<std::string>().c_str());
    else
      std::printf("verified: max abs diff %.3g against the original (atol %g, rtol %g, seed %llu)\n",
                  verification["max_abs_diff"].get<double>(), verification["atol"].get<double>(), verification["rtol"].get<double>(),
                  static_cast<unsigned long long>(o.seed));
  } else {
    std::printf("not verified (--no-verify)\n");
  }
  std::printf("time: %.2fs (import %.2fs, search %.2fs, export %.2fs, verify %.2fs, measure %.2fs)\n", total, t_import, t_search,
              t_export, t_verify, t_measure);
  return kOk;
}

}  // namespace rlflow::cli
