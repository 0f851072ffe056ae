#include "judge.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

#include "rlflow/util/clock.h"
#include "rlflow/exec/compare.h"
#include "rlflow/ir/summary.h"
#include "rlflow/onnx/model_io.h"

namespace rlflow::pipeline {

namespace {

// Returned from a write's check when the candidate is refused: the write is abandoned and the
// verdict says why.
Error refused() { return Error::internal("candidate refused"); }

// A candidate that passes after another replaces it only if measured faster than it: the lower
// bound of its speedup over that one at least kFasterThanChosen. An upper bound under
// kFasterThanChosenMargin decides a tie for the one chosen first (the better predicted), so the
// written file does not change with noise between candidates that are equally fast.
constexpr double kFasterThanChosen = 1.0;
constexpr double kFasterThanChosenMargin = 1.02;

}  // namespace

Judge::Judge(const OptimiseOptions& o, std::map<std::string, int64_t> fixed_dims, std::map<std::string, int64_t> min_dims, const exec::Executor& ex, const ir::Graph& original, std::map<std::string, int64_t> dynamic_dims,
             cost::CostModel* model, std::string cost_kind, double before_ms, Measurer* measurer, OptimiseReport& report)
    : o_(o), ex_(ex), original_(original), dynamic_dims_(std::move(dynamic_dims)), fixed_dims_(std::move(fixed_dims)),
      cost_kind_(std::move(cost_kind)),
      before_ms_(before_ms), written_ms_(before_ms), measurer_(measurer), report_(report) {
  // A prediction describes the file actually written: each file is re-imported and priced by the
  // search's cost model.
  if (model) memo_.emplace(*model);
  // A model with symbolic dims was specialised to representative sizes; the candidate is made
  // again, written and verified at bindings that cannot coincide with them (all ones, odd primes,
  // a decode step), and the written file keeps the dims.
  bindings_ = ir::verification_bindings(dynamic_dims_, min_dims);
  // The short binding measured beside the representative one (a decode step, else sequence 1).
  short_ = ir::short_binding(bindings_, dynamic_dims_);
  inputs_at_.resize(bindings_.size());
  report_.verification.enabled = o.verify;
  report_.verification.seed = o.seed;
}

Expected<ir::Graph> Judge::import_at(const std::string& path, const std::map<std::string, int64_t>& sizes) const {
  onnxio::ImportOptions io;
  io.evaluator = &ex_;
  io.dim_values = sizes;
  io.fixed_dims = fixed_dims_;
  io.share_weights_with = &original_;  // equal weights are held once
  return onnxio::import_model_file(path, io);
}

Expected<ir::Graph> Judge::import_written(const std::string& tmp_path) const {
  auto written = import_at(tmp_path, dynamic_dims_);  // the sizes the input was optimised at
  if (!written) return Error::internal("re-importing the exported model failed: " + written.error().message);
  return written;
}

Expected<Verdict> Judge::verify(const std::string& tmp_path, const ir::Graph& written, bool is_input, std::string& why) {
  auto& v = report_.verification;
  const auto tv = std::chrono::steady_clock::now();
  exec::CompareOptions co = o_.compare;
  co.seed = o_.seed;
  auto cmp = exec::compare_graphs(original_, written, co);
  t_verify_ += seconds_since(tv);
  if (!cmp) {
    if (cmp.error().code == ErrorCode::kUnsupported && ir::structurally_equal(original_, written)) {
      v.method = "structural";
      v.ok = true;
      v.note = cmp.error().message;
      return Verdict::kWritten;
    }
    why = cmp.error().message;
    if (cmp.error().code == ErrorCode::kUnsupported) return Verdict::kUnverifiable;
    if (cmp.error().code == ErrorCode::kBadInput) return Error::bad_input(o_.model + ": " + why);
    // A rewritten candidate that fails gives way to the next, and at last to the input.
    why = "cannot verify the result: " + why + (is_input ? "; nothing was written (use --no-verify to skip)" : "");
    return Verdict::kVerificationFailed;
  }
  v.method = "reference executor";
  v.ok = cmp->ok;
  v.max_abs_diff = cmp->max_abs_diff;
  v.atol = co.atol;
  v.rtol = co.rtol;
  for (const auto& od : cmp->outputs) v.atol = std::max(v.atol, od.atol), v.rtol = std::max(v.rtol, od.rtol);
  v.widened = v.atol != co.atol || v.rtol != co.rtol;  // half-typed outputs (exec::CompareOptions::half_ulps)
  if (!cmp->ok) {
    why = "verification failed: " + cmp->message + (is_input ? "; nothing was written" : "");
    return Verdict::kVerificationFailed;
  }
  report_.verification.bindings.clear();
  for (size_t k = 0; k < bindings_.size(); ++k) {
    auto in = input_at(k);
    if (!in) return in.error();
    VerificationReport::Binding entry{bindings_[k].label, bindings_[k].sizes, false, 0, inputs_at_[k].fails};
    if (!*in) {
      report_.verification.bindings.push_back(std::move(entry));
      continue;
    }
    // A dynamic model is checked again at each binding: a rewrite that baked in a size fails here.
    const auto tv2 = std::chrono::steady_clock::now();
    auto written2 = import_at(tmp_path, bindings_[k].sizes);
    Expected<exec::Comparison> cmp2 = Error::internal("not compared");
    if (written2) cmp2 = exec::compare_graphs(**in, *written2, co);
    t_verify_ += seconds_since(tv2);
    const std::string at = " at " + bindings_[k].str();
    why = !written2  ? "the result does not run" + at + ": " + written2.error().message
          : !cmp2    ? "cannot verify the result" + at + ": " + cmp2.error().message
          : !cmp2->ok ? "verification failed" + at + ": " + cmp2->message
                      : std::string();
    if (!why.empty()) {
      // The input graph itself must hold at every size; a rewrite that holds only at the sizes it
      // was found at is not written, and the next candidate is tried.
      if (is_input) {
        why += "; nothing was written";
        return Verdict::kVerificationFailed;
      }
      return Verdict::kSizeSpecific;
    }
    entry.checked = true;
    entry.max_abs_diff = cmp2->max_abs_diff;
    report_.verification.bindings.push_back(std::move(entry));
  }
  return Verdict::kWritten;
}

Expected<const ir::Graph*> Judge::input_at(size_t k) {
  auto& at = inputs_at_[k];
  if (!at.tried) {
    at.tried = true;
    auto g = import_at(o_.model, bindings_[k].sizes);
    if (g && o_.opset > 0) {
      if (auto st = onnxio::set_output_opset(&*g, o_.opset); !st.ok()) g = st.error();
    }
    // The input itself may not run at every binding (a conv stack longer than one token, a
    // position table shorter than the primes): that binding is then not checked, and said so.
    if (!g) {
      at.fails = "the input does not import at these sizes: " + g.error().message;
      spdlog::warn("not verifying at {}: {}", bindings_[k].str(), at.fails);
    } else {
      at.graph = std::move(*g);
    }
  }
  return at.graph ? &*at.graph : nullptr;
}

Expected<Verdict> Judge::at_every_binding(const Candidate& c, std::vector<ir::Graph>& made, std::string& why) {
  made.clear();
  for (size_t k = 0; k < bindings_.size(); ++k) {
    auto in = input_at(k);
    if (!in) return in.error();
    if (!*in) continue;
    auto g = c.rebuild ? c.rebuild(**in) : Expected<ir::Graph>(**in);
    if (!g) {
      why = "the rewrites do not hold at " + bindings_[k].str() + ": " + g.error().message;
      return Verdict::kSizeSpecific;
    }
    made.push_back(std::move(*g));
  }
  // No constant written may depend on the sizes: the candidate is written at the representative
  // binding and at another, and every shape operand must come out the same.
  if (made.empty()) return Verdict::kWritten;
  onnxio::ExportOptions eo;
  eo.evaluator = &ex_;
  for (size_t k = 1; k < made.size(); ++k) eo.bindings.push_back(&made[k]);
  auto diff = onnxio::size_dependent_constants(c.graph, made[0], eo);
  if (!diff) {
    if (diff.error().code != ErrorCode::kUnsupported) return diff.error();
    why = "it cannot be written for every size: " + diff.error().message;
    return Verdict::kSizeSpecific;
  }
  if (!diff->empty()) {
    why = "it writes constants that hold only at the sizes it was optimised at: " + diff->front() +
          (diff->size() > 1 ? " (and " + std::to_string(diff->size() - 1) + " more)" : "");
    return Verdict::kSizeSpecific;
  }
  return Verdict::kWritten;
}

Expected<Verdict> Judge::verify_in_ort(const std::string& tmp_path, std::string& why) {
  const auto tv = std::chrono::steady_clock::now();
  if (!ort_check_) {
    auto h = bench::Helper::start(bench::ort_helper_script());
    if (!h) return h.error().with_context("starting onnxruntime to verify the result");
    ort_check_ = std::move(*h);
  }
  auto& v = report_.verification;
  v.onnxruntime_checked = 0;
  for (size_t k = 0; k <= bindings_.size(); ++k) {
    const ir::Graph* in = &original_;
    if (k > 0) {
      auto g = input_at(k - 1);
      if (!g) return g.error();
      if (!*g) continue;
      in = *g;
    }
    const std::string where = k == 0 ? std::string("the representative sizes") : bindings_[k - 1].str();
    auto r = ort_check_->call({{"cmd", "check"}, {"reference", o_.model}, {"candidate", tmp_path}, {"inputs", bench::input_shapes_json(*in)},
                               {"seed", o_.seed}, {"atol", o_.compare.atol}, {"rtol", o_.compare.rtol}});
    if (!r) return r.error().with_context("verifying the result in onnxruntime at " + where);
    if ((*r)["reference_error"].is_string()) {
      spdlog::info("not verifying in onnxruntime at {}: the input fails there: {}", where, (*r)["reference_error"].get<std::string>());
      continue;
    }
    std::string fail = (*r)["candidate_error"].is_string() ? "it does not run there: " + (*r)["candidate_error"].get<std::string>()
                       : !(*r).value("match", false)      ? (*r).value("message", std::string("outputs differ"))
                                                           : std::string();
    if (!fail.empty()) {
      t_verify_ += seconds_since(tv);
      why = "onnxruntime runs it differently from the input at " + where + ": " + fail;
      return Verdict::kVerificationFailed;
    }
    ++v.onnxruntime_checked;
  }
  t_verify_ += seconds_since(tv);
  return Verdict::kWritten;
}

Status Judge::price(const ir::Graph& written) {
  if (!memo_) return {};
  auto c = memo_->cost(written);
  if (!c) return c.error().with_context("pricing the written file");
  priced_ms_ = *c;
  return {};
}

namespace {

Measurement measurement_of(const bench::Verdict& v) {
  return Measurement{v.runner, v.base_ms, v.ms, v.speedup.estimate, v.speedup.ci.lo, v.speedup.ci.hi, v.speedup.ci.coverage, v.rounds,
                     v.accepted, v.decided, v.base_samples_ms, v.samples_ms};
}

std::string speedup_text(const Measurement& m) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.3fx [%.3f, %.3f] in %d rounds", m.speedup, m.ci_lo, m.ci_hi, m.rounds);
  return buf;
}

}  // namespace

Expected<Verdict> Judge::measure(const std::string& tmp_path, const Candidate& c, CandidateReport& entry) {
  bench::BenchOptions bo = o_.bench;
  bo.seed = o_.seed;
  // The short binding (a decode step, or sequence 1), where the deployment runs it.
  const bool at_short = short_ >= 0 && o_.deploy != "prefill";
  const bool at_representative = o_.deploy != "decode" || !at_short;
  last_id_.reset();
  last_short_id_.reset();
  if (at_representative) {
    const auto tm = std::chrono::steady_clock::now();
    auto id = measurer_->runner->load({tmp_path, c.graph});
    if (!id) return id.error().with_context("measuring the result");
    last_id_ = *id;
    auto v = bench::judge(*measurer_->runner, measurer_->base_id, *id, bo);
    t_measure_ += seconds_since(tm);
    if (!v) return v.error().with_context("measuring the result");
    entry.measured = measurement_of(*v);
    if (report_.measure_runner.empty()) report_.measure_runner = v->runner;
    spdlog::info("{}: measured {:.3f} -> {:.3f} ms, speedup {:.3f}x [{:.3f}, {:.3f}] in {} rounds{}", c.label, v->base_ms, v->ms,
                 v->speedup.estimate, v->speedup.ci.lo, v->speedup.ci.hi, v->rounds, v->accepted ? "" : ": rejected");
    if (!v->accepted || !at_short) return v->accepted ? Verdict::kWritten : Verdict::kMeasuredSlower;
  }
  // A decoder runs most of its life one token at a time: the file must be no slower at a decode
  // step either (the runner feeds inputs of the shapes of the graph it is given).
  const auto k = static_cast<size_t>(short_);
  auto in = input_at(k);
  if (!in) return in.error();
  if (!*in) return Verdict::kWritten;  // the input does not import there: reported with the bindings
  const auto td = std::chrono::steady_clock::now();
  if (!short_base_id_) {
    auto base = measurer_->runner->load({o_.model, **in});
    if (!base) return base.error().with_context("measuring the input at the " + bindings_[k].str());
    short_base_id_ = *base;
  }
  auto w = import_at(tmp_path, bindings_[k].sizes);
  if (!w) return Error::internal("re-importing the result at the " + bindings_[k].str() + ": " + w.error().message);
  auto cand = measurer_->runner->load({tmp_path, *w});
  if (!cand) return cand.error().with_context("measuring the result at the " + bindings_[k].str());
  last_short_id_ = *cand;
  auto vd = bench::judge(*measurer_->runner, *short_base_id_, *cand, bo);
  t_measure_ += seconds_since(td);
  if (!vd) return vd.error().with_context("measuring the result at the " + bindings_[k].str());
  entry.measured_decode = measurement_of(*vd);
  entry.decode_binding = bindings_[k].str();
  if (report_.measure_runner.empty()) report_.measure_runner = vd->runner;
  spdlog::info("{}: measured at the {}: {:.3f} -> {:.3f} ms, speedup {:.3f}x [{:.3f}, {:.3f}] in {} rounds{}", c.label, bindings_[k].str(),
               vd->base_ms, vd->ms, vd->speedup.estimate, vd->speedup.ci.lo, vd->speedup.ci.hi, vd->rounds, vd->accepted ? "" : ": rejected");
  return vd->accepted ? Verdict::kWritten : Verdict::kMeasuredSlower;
}

Expected<bool> Judge::faster_than_chosen(CandidateReport& entry) {
  const bool at_short = chosen_->short_id && last_short_id_ && o_.deploy != "prefill";
  const auto base = at_short ? chosen_->short_id : chosen_->id;
  const auto cand = at_short ? last_short_id_ : last_id_;
  if (!base || !cand) return false;  // not measured at a common binding: the one chosen stays
  bench::BenchOptions bo = o_.bench;
  bo.seed = o_.seed;
  bo.accept_at = kFasterThanChosen;
  bo.refuse_below = kFasterThanChosenMargin;
  const auto tm = std::chrono::steady_clock::now();
  auto v = bench::judge(*measurer_->runner, *base, *cand, bo);
  t_measure_ += seconds_since(tm);
  if (!v) return v.error().with_context("measuring the result against the candidate chosen before it");
  const auto& chosen = report_.candidates[chosen_->index];
  entry.measured_vs_chosen = measurement_of(*v);
  entry.vs_chosen = chosen.label;
  entry.vs_chosen_binding = at_short ? chosen.decode_binding : "representative sizes";
  spdlog::info("{}: against {} at the {}: speedup {:.3f}x [{:.3f}, {:.3f}] in {} rounds{}", entry.label, chosen.label, entry.vs_chosen_binding,
               v->speedup.estimate, v->speedup.ci.lo, v->speedup.ci.hi, v->rounds, v->accepted ? ": faster, it replaces it" : ": kept the other");
  return v->accepted;
}

std::string Judge::measured_slower_why(const CandidateReport& e) {
  const auto verdict = [](const Measurement& m) {
    return std::string(m.accepted ? "no slower" : m.decided ? "slower" : "not shown to be no slower (undecided when the rounds or time ran out)") +
           " (" + speedup_text(m) + ")";
  };
  const std::string rep = "the representative sizes";
  if (e.measured && !e.measured->accepted) return "measured " + verdict(*e.measured) + " than the input at " + rep;
  if (e.measured_decode && !e.measured_decode->accepted) {
    std::string s = "measured " + verdict(*e.measured_decode) + " than the input at the " + e.decode_binding;
    if (e.measured) s += ", though " + speedup_text(*e.measured) + " at " + rep;
    return s;
  }
  return "measured slower than the input";
}

Expected<Verdict> Judge::try_candidate(const Candidate& c) {
  CandidateReport entry;
  entry.label = c.label;
  entry.steps = c.steps;
  entry.predicted_ms = c.predicted_ms;
  Verdict verdict = Verdict::kWritten;
  // The verification record describes the file written: a candidate refused gives back the one before.
  const VerificationReport verification_before = report_.verification;
  auto check = [&](const std::string& tmp) -> Status {
    auto w = import_written(tmp);
    if (!w) return w.error();
    if (o_.verify) {
      auto v = verify(tmp, *w, /*is_input=*/false, entry.why);
      if (!v) return v.error();
      if ((verdict = *v) != Verdict::kWritten) return refused();
    }
    RLFLOW_TRY_STATUS(price(*w));
    if (memo_) {
      entry.written_ms = priced_ms_;
      if (!(priced_ms_ < before_ms_)) {
        entry.why = "the file as written is predicted at " + std::to_string(priced_ms_) + " ms against the input's " +
                    std::to_string(before_ms_) + " ms under the " + cost_kind_ + " cost (the search priced it at " +
                    std::to_string(c.predicted_ms) + " ms)";
        verdict = Verdict::kNoWrittenGain;
        return refused();
      }
    }
    if (!measurer_) return {};
    // The runtime the file is measured on runs it as the input's twin, or it is not written
    // (after the cheap checks: a candidate priced at no gain never starts onnxruntime).
    if (o_.verify && o_.target == "ort") {
      auto vo = verify_in_ort(tmp, entry.why);
      if (!vo) return vo.error();
      if ((verdict = *vo) != Verdict::kWritten) return refused();
    }
    auto v = measure(tmp, c, entry);
    if (!v) return v.error();
    if ((verdict = *v) != Verdict::kWritten) {
      entry.why = measured_slower_why(entry);
      return refused();
    }
    if (chosen_) {
      auto faster = faster_than_chosen(entry);
      if (!faster) return faster.error();
      if (!*faster) {
        verdict = Verdict::kNotFastest;
        entry.why = "passed, but not measured faster than " + entry.vs_chosen + " at the " + entry.vs_chosen_binding + " (" +
                    speedup_text(*entry.measured_vs_chosen) + "), which stays the output";
        return refused();
      }
    }
    return {};
  };
  onnxio::ExportOptions eo;
  eo.evaluator = &ex_;
  std::vector<ir::Graph> made;
  if (!bindings_.empty()) {
    auto v = at_every_binding(c, made, entry.why);
    if (!v) return v.error();
    if (*v != Verdict::kWritten) {
      entry.verdict = *v;
      spdlog::info("{}: {}", c.label, entry.why);
      report_.candidates.push_back(entry);
      return *v;
    }
    for (const auto& g : made) eo.bindings.push_back(&g);
  }
  auto st = onnxio::write_model_file(c.graph, o_.output, eo, o_.model, check);
  if (st.ok() || verdict != Verdict::kWritten) {
    entry.verdict = verdict;
    report_.candidates.push_back(entry);
    if (!st.ok()) report_.verification = verification_before;
    if (st.ok()) {
      if (chosen_) {
        auto& before = report_.candidates[chosen_->index];
        before.verdict = Verdict::kNotFastest;
        before.why = "passed, but " + entry.label + " measured faster than it at the " + entry.vs_chosen_binding + " (" +
                     speedup_text(*entry.measured_vs_chosen) + ") and is written instead";
      }
      chosen_ = Chosen{report_.candidates.size() - 1, last_id_, last_short_id_};
      written_ms_ = priced_ms_;
    }
    return verdict;
  }
  return st.error();
}

Status Judge::write_input() {
  onnxio::ExportOptions eo;
  eo.evaluator = &ex_;
  for (size_t k = 0; k < bindings_.size(); ++k) {
    auto in = input_at(k);
    if (!in) return in.error();
    if (*in) eo.bindings.push_back(*in);
  }
  auto check = [&](const std::string& tmp) -> Status {
    auto w = import_written(tmp);
    if (!w) return w.error();
    if (o_.verify) {
      std::string why;
      auto v = verify(tmp, *w, /*is_input=*/true, why);
      if (!v) return v.error();
      if (*v == Verdict::kUnverifiable) return Error::internal("the input graph as written cannot be verified: " + why);
      if (*v != Verdict::kWritten) return Error{ErrorCode::kVerificationFailed, why};
    }
    return price(*w);
  };
  auto st = onnxio::write_model_file(original_, o_.output, eo, o_.model, check);
  // A shape operand that cannot be written for every size is written at its own, as imported.
  if (!st.ok() && st.error().code == ErrorCode::kUnsupported && !eo.bindings.empty()) {
    eo.bindings.clear();
    st = onnxio::write_model_file(original_, o_.output, eo, o_.model, check);
  }
  if (st.ok()) written_ms_ = priced_ms_;
  return st;
}

}  // namespace rlflow::pipeline
