// `rlflow cost` end to end: the real binary on the small test models.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common.h"

using json = nlohmann::json;
using rlflow::cost::testing::TempDir;

namespace {

const std::string kData = RLFLOW_TEST_DATA;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Result {
  int code = -1;
  std::string out, err;
};

Result rlflow(const std::vector<std::string>& args) {
  TempDir io;
  std::string cmd = quote(RLFLOW_BINARY);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >" + quote(io.file("stdout")) + " 2>" + quote(io.file("stderr")) + " </dev/null";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(io.file("stdout")), slurp(io.file("stderr"))};
}

json parse(const Result& r) {
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not one JSON document: " << e.what() << "\n" << r.out << "\nstderr: " << r.err;
    return json::object();
  }
}

TEST(CostCli, DeterministicTableJsonAndOpaqueRows) {
  auto a = rlflow({"cost", kData + "/tiny_cnn.onnx", "--deterministic", "--json"});
  ASSERT_EQ(a.code, 0) << a.err;
  auto j = parse(a);
  EXPECT_EQ(j["cost_model"]["kind"], "analytic");
  double sum = 0;
  for (const auto& op : j["ops"]) sum += op["ms"].get<double>();
  EXPECT_GT(j["total_ms"].get<double>(), 0);
  EXPECT_NEAR(sum, j["total_ms"].get<double>(), 1e-12);
  EXPECT_TRUE(j["cache"].is_null());  // analytic is not cached

  auto text = rlflow({"cost", kData + "/opaque_op.onnx", "--cost-model", "analytic", "--device-profile", "h100"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("Softplus"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("fixed, cancels in comparisons"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 opaque ops"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("analytic/h100/"), std::string::npos) << text.out;
}

TEST(CostCli, CpuBackendCachesAndMeasuresTheGraph) {
  TempDir dir;
  const auto cache = dir.file("cache.json");
  const std::vector<std::string> args = {"cost", kData + "/tiny_residual.onnx", "--cost-model", "cpu", "--cache", cache,
                                         "--repeats", "3", "--warmup", "1", "--json"};
  auto first = rlflow(args);
  ASSERT_EQ(first.code, 0) << first.err;
  auto f = parse(first);
  EXPECT_GT(f["cache"]["misses"].get<int>(), 0);
  auto second_args = args;
  second_args.push_back("--measure-graph");
  auto second = rlflow(second_args);
  ASSERT_EQ(second.code, 0) << second.err;
  auto s = parse(second);
  EXPECT_EQ(s["cache"]["misses"], 0);
  EXPECT_EQ(s["total_ms"], f["total_ms"]);
  EXPECT_GT(s["measure"]["measured_ms"].get<double>(), 0);
  EXPECT_GT(s["measure"]["ratio"].get<double>(), 0);
}

TEST(CostCli, UsageErrors) {
  auto none = rlflow({"cost"});
  EXPECT_EQ(none.code, 2) << none.err;
  auto calib = rlflow({"cost", "calibrate", "--cost-model", "analytic"});
  EXPECT_EQ(calib.code, 2) << calib.err;
}

}  // namespace
