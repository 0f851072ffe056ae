#include "judge.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "rlflow/exec/compare.h"
#include "rlflow/ir/summary.h"
#include "rlflow/onnx/model_io.h"

namespace rlflow::pipeline {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string dims_str(const std::map<std::string, int64_t>& dims) {
  std::string s;
  for (const auto& [name, size] : dims) s += (s.empty() ? "" : " ") + name + "=" + std::to_string(size);
  return s;
}

// Returned from a write's check when the candidate is refused: the write is abandoned and the
// verdict says why.
Error refused() { return Error::internal("candidate refused"); }

}  // namespace

Judge::Judge(const OptimiseOptions& o, const exec::Executor& ex, const ir::Graph& original, std::map<std::string, int64_t> dynamic_dims,
             cost::CostModel* model, std::string cost_kind, double before_ms, Measurer* measurer, OptimiseReport& report)
    : o_(o), ex_(ex), original_(original), dynamic_dims_(std::move(dynamic_dims)), cost_kind_(std::move(cost_kind)),
      before_ms_(before_ms), written_ms_(before_ms), measurer_(measurer), report_(report) {
  // A prediction describes the file actually written: each file is re-imported and priced by the
  // search's cost model.
  if (model) memo_.emplace(*model);
  // A model with symbolic dims was specialised to representative sizes; verification also runs at
  // a second set (each size halved, a size of 1 doubled), and the written file keeps the dims.
  for (const auto& [dim, size] : dynamic_dims_) second_sizes_[dim] = size == 1 ? 2 : std::max<int64_t>(1, size / 2);
  report_.verification.enabled = o.verify;
  report_.verification.seed = o.seed;
}

Expected<ir::Graph> Judge::import_written(const std::string& tmp_path) const {
  onnxio::ImportOptions io;
  io.evaluator = &ex_;
  io.dim_values = dynamic_dims_;    // the sizes the input was optimised at
  io.share_weights_with = &original_;  // equal weights are held once
  auto written = onnxio::import_model_file(tmp_path, io);
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
    why = "cannot verify the result: " + why + "; nothing was written (use --no-verify to skip)";
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
    why = "verification failed: " + cmp->message + "; nothing was written";
    return Verdict::kVerificationFailed;
  }
  if (second_sizes_.empty()) return Verdict::kWritten;
  // A dynamic model is checked again at other sizes: a rewrite that baked in a size fails here.
  const auto tv2 = std::chrono::steady_clock::now();
  onnxio::ImportOptions io2;
  io2.evaluator = &ex_;
  io2.dim_values = second_sizes_;
  auto orig2 = onnxio::import_model_file(o_.model, io2);
  auto written2 = onnxio::import_model_file(tmp_path, io2);
  Expected<exec::Comparison> cmp2 = Error::internal("not compared");
  if (orig2 && written2) cmp2 = exec::compare_graphs(*orig2, *written2, co);
  t_verify_ += seconds_since(tv2);
  const std::string at = " at the second sizes (" + dims_str(second_sizes_) + ")";
  if (!orig2) return Error::internal("re-importing the input" + at + " failed: " + orig2.error().message);
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
  v.second_sizes = second_sizes_;
  v.second_max_abs_diff = cmp2->max_abs_diff;
  return Verdict::kWritten;
}

Status Judge::price(const ir::Graph& written) {
  if (!memo_) return {};
  auto c = memo_->cost(written);
  if (!c) return c.error().with_context("pricing the written file");
  written_ms_ = *c;
  return {};
}

Expected<Verdict> Judge::measure(const std::string& tmp_path, const Candidate& c, CandidateReport& entry) {
  const auto tm = std::chrono::steady_clock::now();
  auto id = measurer_->runner->load({tmp_path, c.graph});
  if (!id) return id.error().with_context("measuring the result");
  bench::BenchOptions bo = o_.bench;
  bo.seed = o_.seed;
  auto v = bench::judge(*measurer_->runner, measurer_->base_id, *id, bo);
  t_measure_ += seconds_since(tm);
  if (!v) return v.error().with_context("measuring the result");
  entry.measured = Measurement{v->runner, v->base_ms, v->ms, v->speedup.estimate, v->speedup.ci.lo, v->speedup.ci.hi,
                               v->speedup.ci.coverage, v->rounds, v->accepted};
  if (report_.measure_runner.empty()) report_.measure_runner = v->runner;
  spdlog::info("{}: measured {:.3f} -> {:.3f} ms, speedup {:.3f}x [{:.3f}, {:.3f}]{}", c.label, v->base_ms, v->ms, v->speedup.estimate,
               v->speedup.ci.lo, v->speedup.ci.hi, v->accepted ? "" : ": rejected");
  return v->accepted ? Verdict::kWritten : Verdict::kMeasuredSlower;
}

Expected<Verdict> Judge::try_candidate(const Candidate& c) {
  CandidateReport entry;
  entry.label = c.label;
  entry.steps = c.steps;
  entry.predicted_ms = c.predicted_ms;
  Verdict verdict = Verdict::kWritten;
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
      entry.written_ms = written_ms_;
      if (!(written_ms_ < before_ms_)) {
        entry.why = "the file as written is predicted at " + std::to_string(written_ms_) + " ms against the input's " +
                    std::to_string(before_ms_) + " ms under the " + cost_kind_ + " cost (the search priced it at " +
                    std::to_string(c.predicted_ms) + " ms)";
        verdict = Verdict::kNoWrittenGain;
        return refused();
      }
    }
    if (!measurer_) return {};
    auto v = measure(tmp, c, entry);
    if (!v) return v.error();
    if ((verdict = *v) != Verdict::kWritten) {
      entry.why = "measured slower than the input";
      return refused();
    }
    return {};
  };
  onnxio::ExportOptions eo;
  eo.evaluator = &ex_;
  auto st = onnxio::write_model_file(c.graph, o_.output, eo, o_.model, check);
  if (st.ok() || verdict != Verdict::kWritten) {
    entry.verdict = verdict;
    report_.candidates.push_back(entry);
    return verdict;
  }
  return st.error();
}

Status Judge::write_input() {
  onnxio::ExportOptions eo;
  eo.evaluator = &ex_;
  return onnxio::write_model_file(original_, o_.output, eo, o_.model, [&](const std::string& tmp) -> Status {
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
  });
}

}  // namespace rlflow::pipeline
