// The optimise pipeline's stages: import -> fuse -> search -> candidates -> write (judge.cpp).
#include "rlflow/util/clock.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/pipeline/target.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <any>
#include <map>
#include <chrono>
#include <filesystem>

#include "judge.h"
#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/cost/device.h"
#include "rlflow/cost/memo.h"
#include "rlflow/cost/recorded.h"
#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/report_html.h"
#include "rlflow/pipeline/rl_module.h"
#include "rlflow/pipeline/setup.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/search/registry.h"
#include "rlflow/util/file_io.h"

namespace rlflow::pipeline {

namespace {

// What the search leaves behind: its result, the cost model it priced with, and the rules its steps name.
struct SearchOutcome {
  search::Result result;
  std::unique_ptr<cost::CostModel> model;
  std::string kind;  // the resolved cost model
  rules::RuleLibrary library;
  std::vector<const rules::Rule*> replay_rules;  // every rule the steps may name
  size_t num_rules = 0;
  std::string agent_note;  // --search rl: the agent was trained under another target (or does not say)
};

// The settings of the strategies registered from modules above search (search::StrategyInputs::
// settings): today the agent's, with the run's seed and target.
std::any strategy_settings(const OptimiseOptions& o) {
  rl::RlSearchOptions ro = o.rl;
  ro.seed = o.seed;
  ro.target = o.target;
  return ro;
}

Expected<SearchOutcome> run_search(const OptimiseOptions& o, const ir::Graph& start, const OptimiseHooks& hooks) {
  SearchOutcome out;
  // A strategy that brings its own rules (an agent's checkpoint names them) may find none selected.
  const search::Strategy* strategy = search::find_strategy(o.search);
  SetupOptions so;
  so.load_rules = true;
  so.rules_file = o.rules_file;
  so.all_rules = o.all_rules;
  so.rules_needed_for = !strategy || strategy->needs_rules ? "search with" : "";
  so.build_cost = true;
  so.target = o.target;
  so.cost = o.cost;
  auto set = setup(so);
  if (!set) return set.error();
  out.library = std::move(set->library);
  out.kind = set->cost_kind;
  out.model = std::move(set->cost);
  out.replay_rules = select_rules(out.library, /*all_rules=*/true);
  search::StrategyInputs in;
  in.rules = std::move(set->rules);
  in.library = &out.library;
  in.model = out.model.get();
  in.options = o.strategy;
  in.settings = strategy_settings(o);
  auto built = search::make_strategy(o.search, in);
  if (!built) return built.error();
  out.num_rules = built->rules;
  out.agent_note = built->warning;
  if (!out.agent_note.empty()) spdlog::warn("{}", out.agent_note);
  auto& opt = built->optimizer;
  if (hooks.progress) opt->set_progress(hooks.progress);
  search::Limits lim;
  lim.budget = o.budget;
  lim.time_limit_s = o.time_limit_s >= 0 ? o.time_limit_s : (o.cost.deterministic ? 0 : kInteractiveTimeLimitS);
  // Stored search graphs are a cache (released and replayed beyond the cap): a quarter of the run's
  // memory, and no more than 256 MiB, which the zoo's searches never need.
  const int64_t run_mb = o.memory_mb > 0 ? o.memory_mb : default_memory_limit_mb();
  lim.memory_bytes = std::min<int64_t>(256, std::max<int64_t>(1, run_mb / 4)) << 20;
  auto res = opt->run(start, lim);
  if (!res) return res.error();
  out.result = std::move(*res);
  return out;
}

// The best graph, then the graphs on the way to it (prefixes of its steps) that the cost model
// also predicts cheaper than the input, cheapest first: what to fall back on when the best one
// fails a check. `start_differs`: the search started from a graph that already differs from the
// input (composites fused), so the start itself is a fallback too.
Expected<std::vector<Candidate>> candidates(const ir::Graph& start, const SearchOutcome& s, int max_candidates, bool start_differs) {
  const auto& r = s.result;
  std::vector<Candidate> out;
  out.push_back({"best found", r.steps.size(), r.best_cost, r.best});
  if (max_candidates <= 1) return out;
  cost::MemoCost memo(*s.model);
  std::vector<Candidate> earlier;
  ir::Graph g = start;
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
  if (keep_composites) out.push_back({"composites fused, no rewrite", 0, r.initial_cost, start});
  return out;
}

CostReport cost_report(const SearchOutcome& s, double before_ms) {
  CostReport c;
  c.model = s.kind;
  c.before_ms = before_ms;
  c.after_ms = c.search_after_ms = s.result.best_cost;
  c.known_error = s.model->known_error();
  if (auto* an = dynamic_cast<cost::AnalyticCostModel*>(s.model.get())) c.profile = an->profile().name;
  if (auto* rec = cost::as_recorded(*s.model)) c.table = rec->stats();
  return c;
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

// Measuring: only a rewritten graph needs it, and never under --deterministic unless asked. Returns
// the runner with the input loaded, or none with the reason in `report.not_measured`.
Expected<std::optional<Measurer>> prepare_measurement(const OptimiseOptions& o, const TargetRecord& target, const ir::Graph& original,
                                                      size_t num_candidates, const OptimiseHooks& hooks, OptimiseReport& report) {
  const bool want = o.measure == "on" || (o.measure == "auto" && !o.cost.deterministic);
  std::string& why = report.not_measured;
  if (!want) why = o.measure == "off" ? "--measure off" : "--deterministic (add --measure on to measure)";
  else if (auto here = measurability(target); !here.measurable && !hooks.make_runner) why = here.why_not;
  else if (auto m = measurement_memory(original, num_candidates, o.memory_mb); !m.empty()) why = m;
  else {
    bench::RunnerOptions ro;
    ro.target = target.bench;
    ro.threads = o.bench_threads;
    ro.clock = o.bench_clock;
    ro.seed = o.seed;
    auto r = hooks.make_runner ? hooks.make_runner(ro) : bench::make_runner(ro);
    if (r) {
      auto id = (*r)->load({o.model, original});
      if (id) return std::optional<Measurer>(Measurer{std::move(*r), *id});
      why = id.error().message;
    } else {
      why = r.error().message;
    }
  }
  if (want && o.measure == "on") return Error::unsupported("--measure on: cannot measure on target " + o.target + ": " + why);
  spdlog::warn("the speedup is predicted, not measured: {}", why);
  return std::optional<Measurer>();
}

// Why the input graph was written, from what the candidates met, most telling first.
std::string kept_input_reason(const OptimiseReport& r, const std::string& no_predicted_gain) {
  if (!no_predicted_gain.empty()) return no_predicted_gain;
  auto last = [&](Verdict v) -> const CandidateReport* {
    for (auto it = r.candidates.rbegin(); it != r.candidates.rend(); ++it)
      if (it->verdict == v) return &*it;
    return nullptr;
  };
  const bool all_failed = !r.candidates.empty() && std::all_of(r.candidates.begin(), r.candidates.end(), [](const CandidateReport& c) {
    return c.verdict == Verdict::kVerificationFailed;
  });
  if (auto* c = last(Verdict::kVerificationFailed); c && all_failed)
    return "every rewritten candidate failed verification (the last: " + c->why + "), so the input is written as it is";
  if (auto* c = last(Verdict::kUnverifiable))
    return "the rewritten graph cannot be verified (" + c->why + "), and only a verified graph is written";
  if (auto* c = last(Verdict::kSizeSpecific))
    return "the rewritten graph holds only at the sizes it was optimised at (" + c->why + "), and the output keeps the input's dynamic axes";
  if (auto* c = last(Verdict::kNoWrittenGain)) return c->why;
  if (r.rewritten)
    return "no rewritten graph measured at least " + std::to_string(bench::kMinSpeedupLowerBound).substr(0, 4) +
           "x (lower 95% bound) against the input on " + r.target;
  return {};
}


// The report's account of what changed, predicted by the search's cost model: each chain fused (its
// nodes' cost in the input, the fused node's in `fused`, the graph the rewrites started from), each
// rewrite (the whole graph's cost before and after it, replayed from `fused`), and the cost by ONNX
// op type of the input and of the written graph.
Status explain_changes(const ir::Graph& original, const ir::Graph& fused, const ir::Graph& written, const ir::CompositeStats& composites,
                       const std::vector<rules::Match>& steps, const SearchOutcome& s, OptimiseReport& report) {
  cost::MemoCost memo(*s.model);
  auto by_op = [&](const ir::Graph& g, std::vector<double>& per_node, std::map<std::string, double>& into) -> Status {
    auto total = memo.node_costs(g, per_node);
    if (!total) return total.error();
    for (size_t i = 0; i < per_node.size() && i < g.size(); ++i)
      if (per_node[i] > 0) into[ir::op_display_name(g.node(static_cast<ir::NodeId>(i)))] += per_node[i];
    return {};
  };
  std::vector<double> in_costs, out_costs, fused_costs;
  RLFLOW_TRY_STATUS(by_op(original, in_costs, report.cost->by_op_before));
  RLFLOW_TRY_STATUS(by_op(written, out_costs, report.cost->by_op_after));
  auto ref = [](const ir::Graph& g, ir::NodeId id) {
    const auto& n = g.node(id);
    return ChangeRecord::NodeRef{n.name, ir::op_display_name(n)};
  };
  if (!composites.records.empty()) {
    auto total = memo.node_costs(fused, fused_costs);
    if (!total) return total.error();
    std::map<std::string, ir::NodeId> by_name;
    for (size_t i = 0; i < fused.size(); ++i) by_name.emplace(fused.node(static_cast<ir::NodeId>(i)).name, static_cast<ir::NodeId>(i));
    for (const auto& r : composites.records) {
      ChangeRecord c;
      c.what = r.fusion;
      double before = 0;
      for (auto id : r.chain) {
        c.replaced.push_back(ref(original, id));
        if (static_cast<size_t>(id) < in_costs.size()) before += in_costs[static_cast<size_t>(id)];
      }
      c.node = original.node(r.chain.front()).name;
      if (auto it = by_name.find(c.node); it != by_name.end()) {
        c.op = ir::op_display_name(fused.node(it->second));
        c.cost_before_ms = before;
        if (static_cast<size_t>(it->second) < fused_costs.size()) c.cost_after_ms = fused_costs[static_cast<size_t>(it->second)];
      }
      report.fusions.push_back(std::move(c));
    }
  }
  ir::Graph g = fused;
  for (const auto& step : steps) {
    ChangeRecord c;
    c.what = step.rule;
    for (auto id : step.nodes)
      if (static_cast<size_t>(id) < g.size()) c.replaced.push_back(ref(g, id));
    auto before = memo.cost(g);
    if (!before) return before.error();
    auto next = search::replay(g, s.replay_rules, {step});
    if (!next) return next.error().with_context("replaying the written graph's rewrites for the report");
    g = std::move(*next);
    auto after = memo.cost(g);
    if (!after) return after.error();
    c.cost_before_ms = *before;
    c.cost_after_ms = *after;
    report.rewrites.push_back(std::move(c));
  }
  return {};
}
}  // namespace

std::vector<std::string> search_names() {
  register_rl_strategy();
  auto names = search::strategy_names();
  names.push_back("none");
  return names;
}

std::string search_help() {
  register_rl_strategy();
  return search::strategy_help() + ", or none (no search: the input verified and written back)";
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kWritten: return "written";
    case Verdict::kVerificationFailed: return "verification failed";
    case Verdict::kUnverifiable: return "unverifiable";
    case Verdict::kSizeSpecific: return "size-specific";
    case Verdict::kNoWrittenGain: return "no gain as written";
    case Verdict::kMeasuredSlower: return "measured slower";
    case Verdict::kNotFastest: return "not the fastest";
  }
  return "?";
}

namespace {

Expected<OptimiseReport> optimise_once(const OptimiseOptions& o, const OptimiseHooks& hooks) {
  const auto t0 = std::chrono::steady_clock::now();
  OptimiseReport report;
  report.model = o.model;
  report.output = o.output;
  report.search = o.search;
  report.target = o.target;

  // Every path is checked before any work: the output (and the weights file written beside it for a
  // model over protobuf's limit) must not be the model, its external weights, the rules or the agent.
  auto inputs = onnxio::model_files(o.model);
  if (!o.rules_file.empty()) inputs.push_back(o.rules_file);
  // The cost model's files too (issue 57, item 14): the table, a profile given as a path, the cache.
  for (const auto* p : {&o.cost.cost_table, &o.cost.device_profile, &o.cost.cache_path})
    if (!p->empty() && (p != &o.cost.device_profile || std::filesystem::exists(*p))) inputs.push_back(*p);
  if (const auto* s = search::find_strategy(o.search); s && s->reads)
    for (auto& path : s->reads(strategy_settings(o))) inputs.push_back(std::move(path));
  for (const auto& [path, role] : {std::pair{o.output, std::string("-o")}, std::pair{o.output + ".data", std::string("-o (its weights file)")}})
    RLFLOW_TRY_STATUS(check_output_path(path, inputs, role));
  if (!o.report_html.empty()) {
    auto with_output = inputs;
    with_output.push_back(o.output);
    RLFLOW_TRY_STATUS(check_output_path(o.report_html, with_output, "--report"));
  }
  auto target = find_target(o.target);
  if (!target) return target.error();
  report.target_info = *target;
  // A cost timed on this machine's GPU needs one: refused up front, as a model rlflow cannot serve
  // here, not as an internal error from the CUDA runtime.
  if ((*target)->cost_model == "cudnn" && o.cost.kind == "auto")
    if (auto here = measurability(**target); !here.measurable)
      return Error::unsupported("--target " + o.target + " prices kernels timed on this machine's GPU: " + here.why_not +
                                " (--target h100 prices them with the recorded H100 timings)");
  if (o.measure != "auto" && o.measure != "on" && o.measure != "off") return Error{ErrorCode::kUsage, "--measure must be auto, on or off"};
  for (const auto& f : o.disabled_fusions)
    if (std::find(ir::fusion_names().begin(), ir::fusion_names().end(), f) == ir::fusion_names().end()) {
      std::string known;
      for (const auto& n : ir::fusion_names()) known += (known.empty() ? "" : ", ") + n;
      return Error{ErrorCode::kUsage, "--disable-fusion: no fusion named '" + f + "' (fusions: " + known + ")"};
    }

  // import
  exec::Executor ex;
  onnxio::ImportStats stats;
  auto fixed = parse_fixed_dims(o.fixed_dims);
  if (!fixed) return fixed.error();
  auto original = load_model(o.model, o.input_shapes, ex, &stats, o.memory_mb, *fixed, /*keep_static_dims=*/true);
  if (!original) return original.error();
  report.fixed_dims = *fixed;
  report.time.import = seconds_since(t0);
  report.dynamic_dims = stats.dynamic_dims;
  report.min_dims = stats.min_dims;
  report.input_opset = original->meta().opset("");
  spdlog::info("imported {}: {} ops ({} ONNX nodes, {} folded) in {:.2f}s", o.model, original->num_ops(), stats.onnx_nodes,
               stats.folded_nodes, report.time.import);
  // --opset: the output is written at the opset the target's runtime runs (auto), the input's
  // (keep) or the one asked for, where the fused ops exist (LayerNormalization 17, Gelu 20, RMSNorm,
  // rotary and Attention 23): composites are then fused and written as one op, and priced as what is
  // written. Under auto, an input written as it is keeps its own opset.
  // The fusions this run may make (--no-composites: none), which decide whether a newer opset pays.
  ir::FusionSet off = o.disabled_fusions;
  if (!o.composites) off.insert(ir::fusion_names().begin(), ir::fusion_names().end());
  auto opset = choose_output_opset(*original, **target, o.opset, o.search != "none" ? &off : nullptr);
  if (!opset) return opset.error();
  const ir::ModelMeta input_meta = original->meta();
  if (opset->opset != report.input_opset) RLFLOW_TRY_STATUS(onnxio::set_output_opset(&*original, opset->opset));
  report.opset_reason = opset->why;
  if (stats.ir_version_read_as_known) {
    report.input_ir_version = stats.ir_version_read_as_known;
    report.output_ir_version = original->meta().ir_version;
  }
  report.searched_opset = opset->opset;
  OptimiseOptions at_opset = o;  // what the Judge imports other bindings at
  at_opset.opset = opset->opset;

  // fuse: the search starts from the graph with composite chains fused; verification and the
  // "kept the input" fallback use the graph as imported, so a wrong fusion cannot pass unnoticed.
  ir::CompositeStats composites;
  // The candidates without one of the target's doubtful fusions: by label, the fusion left out and
  // what the others fused.
  struct Without {
    std::string fusion;
    ir::CompositeStats composites;
  };
  std::map<std::string, Without> without_of;
  const ir::Graph start =
      o.search != "none" && o.composites ? ir::recognise_composites(*original, &composites, std::nullopt, o.disabled_fusions) : *original;
  if (composites.total() > 0)
    spdlog::info("fused chains into single ops: {} ({} nodes removed)", composites.summary(), composites.removed_nodes);
  for (const auto& r : composites.rejections)
    spdlog::debug("fusion {}: node '{}' not fused: {}", r.fusion, original->node(r.root).name, r.why);
  if (o.search != "none" && o.composites) {
    for (const auto& name : ir::fusion_names())
      if (o.disabled_fusions.count(name) == 0) report.fusion_attempts[name];
    for (const auto& r : composites.records) ++report.fusion_attempts[r.fusion].fused;
    for (const auto& r : composites.rejections) report.fusion_attempts[r.fusion].refused[r.why].push_back(original->node(r.root).name);
  }

  // search -> candidates
  std::vector<Candidate> cands;
  SearchOutcome outcome;
  std::string no_predicted_gain;  // why no candidate is left: none is predicted faster than the input
  if (o.search != "none") {
    auto found = run_search(o, start, hooks);
    if (!found) return found.error();
    outcome = std::move(*found);
    const auto& r = outcome.result;
    report.time.search = r.report.seconds_total;
    spdlog::info("search {}: cost {:.4f} -> {:.4f} ms in {:.2f}s ({})", o.search, r.initial_cost, r.best_cost, report.time.search,
                 search::stop_reason_name(r.stop));
    auto cs = candidates(start, outcome, std::max(1, o.candidates), composites.total() > 0);
    if (!cs) return cs.error();
    cands = std::move(*cs);
    // The other fusions without one the target doubts (TargetRecord::doubtful_fusions: onnxruntime's
    // CPU Attention kernel), so a measured target can keep the fusions that pay. Each goes last, or
    // before the candidates it is predicted cheaper than, since they are measured in order and a
    // later one replaces an earlier only if measured faster.
    for (const auto& doubted : (*target)->doubtful_fusions) {
      if (composites.count(doubted) == 0) continue;
      ir::FusionSet without = o.disabled_fusions;
      without.insert(doubted);
      Without w{doubted, {}};
      ir::Graph g = ir::recognise_composites(*original, &w.composites, std::nullopt, without);
      if (w.composites.total() == 0) continue;
      cost::MemoCost memo(*outcome.model);
      auto c = memo.cost(g);
      if (!c) return c.error();
      const std::string label = "composites fused but " + doubted + ", no rewrite";
      auto at = std::find_if(cands.begin(), cands.end(), [&](const Candidate& x) { return *c < x.predicted_ms; });
      cands.insert(at, {label, 0, *c, std::move(g)});
      without_of.emplace(label, std::move(w));
    }
    // Each candidate can be made again from the input imported at other sizes, the same way.
    // `disabled`: the fusions left out of the composites fused (none fused: nullopt).
    const bool fused = o.search != "none" && o.composites;
    for (auto& c : cands) {
      const auto w = without_of.find(c.label);
      const bool without = w != without_of.end();
      std::optional<ir::FusionSet> disabled;
      if (fused) disabled = o.disabled_fusions;
      if (without) disabled->insert(w->second.fusion);
      std::vector<rules::Match> steps(r.steps.begin(), r.steps.begin() + static_cast<std::ptrdiff_t>(without ? 0 : c.steps));
      c.rebuild = [disabled, steps = std::move(steps), rules = &outcome.replay_rules, &ex](const ir::Graph& in) -> Expected<ir::Graph> {
        auto replayed = search::replay(disabled ? ir::recognise_composites(in, nullptr, std::nullopt, *disabled) : in, *rules, steps);
        if (!replayed) return replayed.error();
        return ir::fold_constants(*replayed, ex);
      };
    }
    // Weight-only subgraphs the rewrites created (concatenated or enlarged kernels) fold now, so
    // the summary describes the model as written.
    for (auto& c : cands) {
      auto folded = ir::fold_constants(c.graph, ex);
      if (!folded) return folded.error().with_context("folding the optimised graph");
      c.graph = std::move(*folded);
    }
    // "before" is the model as imported; the search started from it with composites fused.
    double before_ms = r.initial_cost;
    if (composites.total() > 0) {
      cost::MemoCost memo(*outcome.model);
      auto c = memo.cost(*original);
      if (!c) return c.error();
      before_ms = *c;
    }
    // Only a graph predicted faster than the input is worth writing: the composites the search
    // started from may cost more than the input's chains under this model.
    const bool proposed = std::any_of(cands.begin(), cands.end(), [&](const Candidate& c) { return c.steps > 0 || composites.total() > 0; });
    std::erase_if(cands, [&](const Candidate& c) { return !(c.predicted_ms < before_ms) || (c.steps == 0 && composites.total() == 0); });
    if (cands.empty() && proposed)
      no_predicted_gain = "no rewritten graph is predicted faster than the input under the " + outcome.kind + " cost (" +
                          std::to_string(r.best_cost) + " ms at best, " + std::to_string(before_ms) + " ms for the input)";
    report.cost = cost_report(outcome, before_ms);
    report.search_rules = outcome.num_rules;
    report.agent_note = outcome.agent_note;
    report.search_result = outcome.result;
    report.rewritten = !cands.empty();
  }

  // write: each candidate, best first, is written, verified, priced as written and measured; the
  // fastest that passes is the output (unmeasured: the first that passes), else the input graph is
  // written as it is.
  std::optional<Measurer> measurer;
  if (report.rewritten) {
    auto m = prepare_measurement(o, **target, *original, cands.size(), hooks, report);
    if (!m) return m.error();
    measurer = std::move(*m);
  } else {
    report.not_measured = no_predicted_gain.empty() ? "no rewrite was applied" : "no rewritten graph is predicted faster than the input";
  }
  report.measured = measurer.has_value();
  report.deploy = o.deploy;
  const auto tw = std::chrono::steady_clock::now();
  Judge judge(at_opset, *fixed, stats.min_dims, ex, *original, stats.dynamic_dims, outcome.model.get(), outcome.kind, report.cost ? report.cost->before_ms : 0,
              measurer ? &*measurer : nullptr, report);
  std::string failed_verification;  // the last candidate's failure, when every one failed
  for (const auto& c : cands) {
    if (hooks.stage)
      hooks.stage("checking candidate " + std::to_string(report.candidates.size() + 1) + " of " + std::to_string(cands.size()) + " (" +
                  c.label + "): write, verify" + (measurer ? ", measure" : ""));
    auto verdict = judge.try_candidate(c);
    if (!verdict) {
      // A candidate written before this one is on disk: no output after an error.
      if (judge.chosen()) {
        std::error_code ec;
        std::filesystem::remove(o.output, ec);
      }
      return verdict.error();
    }
    // Measured: every candidate is measured and the fastest that passes is written. Not
    // measured: the first that passes (the best predicted).
    if (*verdict == Verdict::kWritten && !measurer) break;
    if (*verdict == Verdict::kVerificationFailed) {
      failed_verification = report.candidates.back().why;
      spdlog::warn("{}: {}; trying the next candidate", c.label, failed_verification);
    }
  }
  // Every rewritten candidate failed verification: the input is written as it is, verified like
  // any output (exit 4 only when the input itself does not verify), with the reason.
  report.chosen = judge.chosen();
  if (!report.chosen && !failed_verification.empty() &&
      std::all_of(report.candidates.begin(), report.candidates.end(), [](const CandidateReport& c) { return c.verdict == Verdict::kVerificationFailed; }))
    spdlog::warn("every rewritten candidate failed verification (the last: {}); writing the input graph as it is", failed_verification);
  if (!report.chosen) {
    report.kept_input = kept_input_reason(report, no_predicted_gain);
    if (o.opset == kOpsetAuto && original->meta().opset("") != report.input_opset) {
      original->meta() = input_meta;  // only the opset changed: nothing to gain from a newer one
      report.opset_reason = "the input's: the input is written as it is";
    }
    if (hooks.stage) hooks.stage("writing the input graph, verified");
    RLFLOW_TRY_STATUS(judge.write_input());
  }
  const ir::Graph& written = report.chosen ? cands[*report.chosen].graph : *original;
  // Which candidate of `cands` was written: candidates are tried in order, one report each.
  if (report.chosen) {
    const auto& c = cands[*report.chosen];
    report.steps.assign(outcome.result.steps.begin(), outcome.result.steps.begin() + static_cast<std::ptrdiff_t>(c.steps));
    const auto w = without_of.find(c.label);
    report.composites = w != without_of.end() ? w->second.composites : composites;
  }
  if (report.cost) {
    // The claim is the written file's cost; the search's own figure for it is kept beside it.
    report.cost->after_ms = judge.written_ms();
    report.cost->search_after_ms = report.chosen ? cands[*report.chosen].predicted_ms : report.cost->before_ms;
  }
  if (report.cost && outcome.model) {
    // The fusions of the chosen candidate: one without a doubted fusion fused all but that one.
    const bool without = report.chosen && without_of.count(cands[*report.chosen].label) > 0;
    const ir::Graph& fused = report.chosen ? (without ? cands[*report.chosen].graph : start) : *original;
    RLFLOW_TRY_STATUS(explain_changes(*original, fused, written, report.chosen ? report.composites : ir::CompositeStats{}, report.steps,
                                      outcome, report));
  }
  report.before = ir::summarize(*original);
  report.after = ir::summarize(written);
  report.output_opset = written.meta().opset("");
  report.time.verify = judge.seconds_verify();
  report.time.measure = judge.seconds_measure();
  report.time.write = seconds_since(tw) - report.time.verify - report.time.measure;
  report.time.total = seconds_since(t0);
  return report;
}

// --opset auto writes at the target's opset; where nothing can be written there (every candidate
// refused: a fusion that holds at one size only, a verification or measurement that fails), the
// input's opset is tried too, since the rewrites found there may hold.
Expected<OptimiseReport> optimise_at_opsets(const OptimiseOptions& o, const OptimiseHooks& hooks) {
  auto first = optimise_once(o, hooks);
  if (!first || o.opset != kOpsetAuto || first->chosen || !first->rewritten || first->searched_opset == first->input_opset) return first;
  auto keep = o;
  keep.opset = kOpsetKeep;
  auto second = optimise_once(keep, hooks);
  if (!second || !second->chosen) return first;
  second->opset_reason = "the input's: at the target's opset no candidate could be written (" + first->kept_input + ")";
  second->time.total += first->time.total;
  return second;
}

}  // namespace

Expected<OptimiseReport> optimise(const OptimiseOptions& o, const OptimiseHooks& hooks) {
  register_rl_strategy();  // --search rl: the agent, from the RL module
  auto report = optimise_at_opsets(o, hooks);
  // The path was checked before any work; a page that cannot be written after all leaves the model
  // written (it passed every check) and says so.
  if (report && !o.report_html.empty())
    if (auto st = write_file_atomic(o.report_html, report_html(report->to_json())); !st.ok())
      spdlog::error("--report: the page was not written: {}", st.error().message);
  return report;
}

}  // namespace rlflow::pipeline
