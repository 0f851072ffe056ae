#pragma once
// A Python helper process spoken to in JSON lines (one request, one reply): onnxruntime behind the
// runners (configs/runtime/ort_runner.py) and the peer tools behind `rlflow compare`
// (configs/runtime/peers.py). A reply {"ok": false, "error": E} is an error with E as its message.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/ir/graph.h"
#include "rlflow/util/expected.h"

namespace rlflow::bench {

class LineProcess;

class Helper {
 public:
  // Starts `python_interpreter() script`.
  static Expected<std::unique_ptr<Helper>> start(const std::string& script);
  ~Helper();
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;

  Expected<nlohmann::json> call(const nlohmann::json& request);
  const std::string& script() const { return script_; }

 private:
  Helper() = default;
  std::unique_ptr<LineProcess> proc_;
  std::string script_;
};

// [{"name": N, "shape": [...]}, ...] of a graph's inputs: the static shapes the helpers feed.
nlohmann::json input_shapes_json(const ir::Graph& g);

// configs/runtime/peers.py, found like ort_runner.py ($RLFLOW_PEERS_HELPER overrides).
std::string peers_helper_script();

}  // namespace rlflow::bench
