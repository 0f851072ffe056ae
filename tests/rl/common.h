#pragma once
// Fixtures shared by the rl test files: the shipped rule library, the fire-module graph whose
// optimum needs a cost-increasing step first, its rules, and the analytic H100 cost model.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "rlflow/cost/factory.h"
#include "rlflow/ir/builder.h"
#include "rlflow/rules/library_io.h"

namespace rltest {

using namespace rlflow;

inline const rules::RuleLibrary& library() {
  static const rules::RuleLibrary lib = [] {
    auto l = rules::load_library(std::string(RLFLOW_SOURCE_DIR) + "/configs/rules/default.json");
    if (!l) throw std::runtime_error(l.error().message);
    return std::move(*l);
  }();
  return lib;
}

inline std::vector<const rules::Rule*> pick(const std::vector<std::string>& names) {
  std::vector<const rules::Rule*> out;
  for (const auto& n : names) {
    const auto* r = library().find(n);
    if (!r) throw std::runtime_error("no rule " + n);
    out.push_back(r);
  }
  return out;
}

// SqueezeNet-like fire modules: a 1x1 and a 3x3 conv of one input, concatenated. The cheapest
// form (one merged conv per module, no split/concat) needs the 1x1 kernel enlarged first, which
// alone makes the graph more expensive: greedy cannot find it.
inline ir::Graph fire_modules(int modules) {
  using namespace rlflow::ir;
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 16, 14, 14}});
  for (int m = 0; m < modules; ++m) {
    auto w1 = b.weight("w1_" + std::to_string(m), random_tensor({8, 16, 1, 1}, 10 + m));
    auto w3 = b.weight("w3_" + std::to_string(m), random_tensor({8, 16, 3, 3}, 20 + m));
    auto a = b.conv(x, w1, {1, 1}, {0, 0, 0, 0});
    auto c = b.conv(x, w3, {1, 1}, {1, 1, 1, 1});
    x = b.op(OpKind::kConcat, {c, a}, AxisParams{1});
  }
  b.output(x, "y");
  return b.build();
}

inline std::vector<const rules::Rule*> fire_rules() {
  return pick({"gen_conv__enlarge_conv_9eff64", "merge_parallel_conv", "split_concat_identity", "gen_enlarge_conv__conv_ac2953",
               "conv_relu_fuse"});
}

inline std::unique_ptr<cost::CostModel> analytic() {
  cost::CostOptions o;
  o.kind = "analytic";
  o.deterministic = true;
  o.device_profile = std::string(RLFLOW_SOURCE_DIR) + "/configs/devices/h100-datasheet.yaml";
  auto m = cost::make_cost_model(o);
  if (!m) throw std::runtime_error(m.error().message);
  return std::move(*m);
}

// The analytic model with a runtime that runs a Conv's activation in the Conv's kernel but does not
// fuse the file's separate Relu into it: Conv+Relu fusion pays, one step each, the toy problem the
// imitation tests teach. (Under the plain profile a fused Conv is priced as the two kernels the
// written file runs, so fusing earns nothing.)
class ConvActivationFusionPays : public cost::ForwardingCostModel {
 public:
  explicit ConvActivationFusionPays(std::unique_ptr<cost::CostModel> m) : ForwardingCostModel(*m), own_(std::move(m)) {}
  bool fuses_conv_activation(ir::Activation) const override { return true; }

 private:
  std::unique_ptr<cost::CostModel> own_;
};

inline std::unique_ptr<cost::CostModel> fusion_paying_analytic() { return std::make_unique<ConvActivationFusionPays>(analytic()); }

inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("rlflow_rl_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// A TCP port that was free a moment ago on 127.0.0.1 (the kernel's pick for port 0); 0 if none.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

}  // namespace rltest
