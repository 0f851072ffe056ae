#pragma once
// `rlflow compare` as a library: the peer tools a user already has (onnxslim, onnxsim,
// onnxoptimizer, onnxscript's ort_fusions, onnxruntime's transformer optimizer, or a script of
// their own) and rlflow itself each rewrite the same model; every file is checked against the input
// in onnxruntime at every binding of its symbolic dims (optimise's verification bindings); the
// right ones are timed interleaved at the representative binding and at the short one (a decode
// step, else sequence 1), paired by round, each over the input and rlflow over the fastest peer.
// A wrong file is marked wrong and not timed; a peer that is missing, fails, crashes or times out
// is recorded, never fatal. The report prints itself as text or JSON; its JSON, under the optimise
// report's "comparison", draws the HTML page's comparison section.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/bench/bench.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

// The peers compared when none are named, in the table's order; the last, "resaved" (the input
// loaded and saved by onnx, unchanged), is a noise control: never the fastest peer.
const std::vector<std::string>& default_peers();

struct ComparePeersOptions {
  std::string model;
  std::vector<std::string> peers;       // empty: default_peers(); also ort-transformers:TYPE, script:PATH
  double timeout_s = 600;               // per peer tool
  int threads = 1;                      // onnxruntime intra-op threads of the timing (0: every core)
  // Interleaved rounds at each timed binding; 1 thread is timed in thread CPU time.
  bench::BenchOptions bench{.warmup = 3, .rounds = 40, .max_seconds = 120};  // its seed is `rlflow.seed`
  double atol = 1e-4, rtol = 1e-3;      // the onnxruntime check of every file
  std::string keep_dir;                 // --keep: every file written is kept there (else a temporary folder)
  std::string report_html;              // --report: rlflow's optimise page with the comparison added
  // rlflow's own run: optimise's defaults (model, output and report are set by compare).
  OptimiseOptions rlflow;
};

struct ToolResult {
  std::string name;     // "rlflow", "onnxslim", ..., "script:PATH"
  std::string version;  // empty when not installed
  // ok, wrong (a check failed), failed, crashed, timed out, not installed
  std::string status;
  std::string error;    // why, when not ok
  double seconds = 0;   // the tool's own run
  int64_t nodes = -1;   // nodes of its file's main graph
  std::string path;     // its file, where kept
  struct Check {
    std::string binding;  // "representative (batch=1 sequence=128)"
    bool checked = false, match = false;
    double max_abs_diff = 0;
    std::string message;
  };
  std::vector<Check> checks;
  struct Timing {
    double median_ms = 0;
    bench::Speedup over_input;
  };
  std::vector<Timing> timings;  // one per CompareReport::timed, when the file is right
};

struct CompareReport {
  std::string model;
  int64_t input_nodes = 0;
  std::vector<std::string> checked_at;       // the bindings of the check, in words
  std::vector<std::string> input_fails;      // "the input fails in onnxruntime at ...: why"
  std::vector<std::string> timed;            // the timed bindings ("prefill (batch=1 sequence=128)", "decode step (...)")
  std::vector<std::string> timed_labels;     // their short names: "prefill", "decode step", "sequence 1"
  std::vector<double> input_ms;              // the input's median at each
  std::string runner;                        // what timed them
  int threads = 1;
  std::vector<int> rounds;                   // at each timed binding
  double confidence = 0.95;
  std::vector<ToolResult> tools;             // the peers in the order asked, then rlflow
  // rlflow over the fastest right peer at each timed binding (paired by round); empty name when
  // no peer is right or rlflow is not.
  struct VsPeer {
    std::string peer;
    bench::Speedup speedup;
  };
  std::vector<VsPeer> rlflow_vs_fastest_peer;
  nlohmann::json rlflow_report;  // optimise's JSON, when rlflow ran

  nlohmann::json to_json() const;
  void print(std::FILE* out) const;
};

struct CompareHooks {
  std::function<void(const std::string&)> stage;  // "running onnxslim", "checking onnxsim at ...", "timing at ..."
  std::function<void(int done, int planned)> round;
  OptimiseHooks rlflow;                           // rlflow's own run
};

// Errors: a model rlflow cannot import, an unknown peer name (usage), no onnxruntime.
Expected<CompareReport> compare_peers(const ComparePeersOptions& o, const CompareHooks& hooks = {});

}  // namespace rlflow::pipeline
