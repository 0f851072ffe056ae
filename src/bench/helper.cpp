#include "rlflow/bench/helper.h"

#include "rlflow/bench/runner.h"
#include "rlflow/util/file_io.h"
#include "subprocess.h"

namespace rlflow::bench {

using json = nlohmann::json;

Expected<std::unique_ptr<Helper>> Helper::start(const std::string& script) {
  auto proc = LineProcess::start({python_interpreter(), script});
  if (!proc) return proc.error();
  std::unique_ptr<Helper> h(new Helper());
  h->proc_ = std::move(*proc);
  h->script_ = script;
  return h;
}

Helper::~Helper() = default;

Expected<json> Helper::call(const json& request) {
  auto line = proc_->request(request.dump());
  if (!line) return line.error();
  json reply = json::parse(*line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) return Error::internal("unexpected reply from " + script_ + ": " + *line);
  if (!reply.value("ok", false)) return Error::bad_input(reply.value("error", std::string("unknown error")));
  return reply;
}

json input_shapes_json(const ir::Graph& g) {
  json inputs = json::array();
  for (auto id : g.inputs()) inputs.push_back({{"name", g.node(id).name}, {"shape", g.node(id).outputs[0].shape}});
  return inputs;
}

std::string peers_helper_script() { return find_shipped("configs/runtime/peers.py", "RLFLOW_PEERS_HELPER"); }

}  // namespace rlflow::bench
