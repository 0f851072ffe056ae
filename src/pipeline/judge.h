#pragma once
// Internal to the pipeline: the checks each candidate meets before it may be the output. The file
// is written to a temporary path, re-imported, verified against the input, priced as written and
// measured; the bytes that pass are the bytes that land.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "rlflow/bench/helper.h"
#include "rlflow/bench/runner.h"
#include "rlflow/cost/memo.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/dim_expr.h"
#include "rlflow/pipeline/optimise.h"

namespace rlflow::pipeline {

// How a candidate is made from the input graph, so that it can be made again from the input
// imported at other sizes: the composites fused, the same rewrites replayed, folded.
using Rebuild = std::function<Expected<ir::Graph>(const ir::Graph& input_at_binding)>;

struct Candidate {
  std::string label;
  size_t steps = 0;  // rewrites applied from the input
  double predicted_ms = 0;
  ir::Graph graph;
  Rebuild rebuild{};  // empty: the input graph itself
};

// A runner with the input graph loaded as the baseline.
struct Measurer {
  std::unique_ptr<bench::Runner> runner;
  size_t base_id = 0;
};

class Judge {
 public:
  // `model` (may be null: nothing is priced) is the search's cost model, `before_ms` the input's
  // cost under it; `measurer` may be null (not measured). Results go into `report`.
  Judge(const OptimiseOptions& o, std::map<std::string, int64_t> fixed_dims, std::map<std::string, int64_t> min_dims, const exec::Executor& ex, const ir::Graph& original, std::map<std::string, int64_t> dynamic_dims,
        cost::CostModel* model, std::string cost_kind, double before_ms, Measurer* measurer, OptimiseReport& report);

  // Writes the candidate if it passes every check; appends its CandidateReport either way. An error
  // is one no other candidate could escape (an I/O failure, an internal error). When candidates
  // are measured, a candidate that passes after another did must also measure faster than that
  // one (the chosen so far) to replace it on disk; the one it replaces becomes kNotFastest.
  Expected<Verdict> try_candidate(const Candidate& c);
  // The index in report.candidates of the candidate written, if any.
  std::optional<size_t> chosen() const { return chosen_ ? std::optional<size_t>(chosen_->index) : std::nullopt; }
  // Writes the input graph, verified (the dynamic sizes must hold) and priced as written.
  Status write_input();

  double written_ms() const { return written_ms_; }
  double seconds_verify() const { return t_verify_; }
  double seconds_measure() const { return t_measure_; }

 private:
  // A file imported at these sizes of its symbols (and the --fix ones), sharing the input's weights.
  Expected<ir::Graph> import_at(const std::string& path, const std::map<std::string, int64_t>& sizes) const;
  Expected<ir::Graph> import_written(const std::string& tmp_path) const;
  // The input imported at binding k (null where it does not import there: that binding is not
  // checked, and the report says why).
  Expected<const ir::Graph*> input_at(size_t k);
  // The candidate made again at every binding the input imports at (kWritten), or the verdict and
  // `why` when it cannot be made there or writes a constant that depends on the sizes.
  Expected<Verdict> at_every_binding(const Candidate& c, std::vector<ir::Graph>& made, std::string& why);
  // kWritten: passed. Another verdict: `why` says what failed.
  Expected<Verdict> verify(const std::string& tmp_path, const ir::Graph& written, bool is_input, std::string& why);
  // The ort target, when measured: the file against the input as onnxruntime runs both, at the
  // representative sizes and every binding the input imports at (onnxruntime's kernels may differ
  // from the ONNX semantics the reference executor runs: its Attention writes zeros for a row the
  // mask hides wholly). kWritten, or kVerificationFailed with `why`.
  Expected<Verdict> verify_in_ort(const std::string& tmp_path, std::string& why);
  Status price(const ir::Graph& written);
  Expected<Verdict> measure(const std::string& tmp_path, const Candidate& c, CandidateReport& entry);
  // Whether the candidate just measured is faster than the chosen one, at the binding the
  // deployment cares most for (the short one unless --deploy prefill).
  Expected<bool> faster_than_chosen(CandidateReport& entry);
  // Why a measured candidate is refused, with the speedup at each binding measured.
  static std::string measured_slower_why(const CandidateReport& e);

  // The short binding's index in bindings_ (a decode step, or sequence 1; -1: none), and the
  // input loaded there for measuring.
  int short_ = -1;
  std::optional<size_t> short_base_id_;
  const OptimiseOptions& o_;
  const exec::Executor& ex_;
  const ir::Graph& original_;
  std::map<std::string, int64_t> dynamic_dims_, fixed_dims_;
  std::vector<ir::Binding> bindings_;  // besides the representative one
  // The input at each binding, imported on first use; `fails` says why it does not import there.
  struct InputAt {
    bool tried = false;
    std::optional<ir::Graph> graph;
    std::string fails;
  };
  std::vector<InputAt> inputs_at_;
  std::optional<cost::MemoCost> memo_;
  std::string cost_kind_;
  double before_ms_ = 0, written_ms_ = 0, priced_ms_ = 0;
  // The runner's ids of the last candidate measured (at the representative and the short binding).
  std::optional<size_t> last_id_, last_short_id_;
  struct Chosen {
    size_t index = 0;  // in report.candidates
    std::optional<size_t> id, short_id;
  };
  std::optional<Chosen> chosen_;
  Measurer* measurer_;
  std::unique_ptr<bench::Helper> ort_check_;  // onnxruntime for verify_in_ort, started on first use
  OptimiseReport& report_;
  double t_verify_ = 0, t_measure_ = 0;
};

}  // namespace rlflow::pipeline
