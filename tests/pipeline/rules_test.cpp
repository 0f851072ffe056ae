// `rlflow rules` as library calls (pipeline/rules.h): list, verify (through the rule tools table,
// handed over as the Python module does) and bench, on a rule file with one true and one false rule.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "printed.h"
#include "rlflow/pipeline/rules.h"
#include "rlflow/rules/tools_module.h"

namespace {

namespace fs = std::filesystem;
using namespace rlflow;

const fs::path kData = RLFLOW_TEST_DATA;

// Relu twice is Relu (true); Relu is Sigmoid (false: every instance differs).
const char* kTwoRules = R"({"format": "rlflow-rules", "version": 1, "rules": [
  {"name": "relu_relu", "provenance": "hand-written", "status": "unverified", "default": true,
   "source": [{"id": "r1", "op": "Relu", "inputs": ["x"]}, {"id": "r2", "op": "Relu", "inputs": ["r1"]}],
   "target": [{"id": "r", "op": "Relu", "inputs": ["x"]}], "outputs": {"r2": "r"},
   "instances": [{"shapes": {"x": [3, 4]}}, {"shapes": {"x": [7]}}, {"shapes": {"x": [2, 2, 2]}}]},
  {"name": "relu_is_sigmoid", "provenance": "hand-written", "status": "unverified", "default": false,
   "source": [{"id": "r", "op": "Relu", "inputs": ["x"]}],
   "target": [{"id": "s", "op": "Sigmoid", "inputs": ["x"]}], "outputs": {"r": "s"},
   "instances": [{"shapes": {"x": [5, 2]}}, {"shapes": {"x": [3]}}, {"shapes": {"x": [1, 4]}}]}
]})";

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/rlflow_rules_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string write_rules(const fs::path& dir) {
  const auto p = dir / "two.json";
  std::ofstream(p) << kTwoRules;
  return p.string();
}

// The false rule fails, the true one passes, and --write records both statuses in the file, which
// list then counts.
TEST(RulesVerify, RefutesTheFalseRuleAndRecordsBothStatuses) {
  rules::use_tools_module(&rules::tools_table());
  TempDir dir;
  pipeline::RulesVerifyOptions o;
  o.file = write_rules(dir.path);
  o.write = true;
  auto r = pipeline::verify_rules(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->rules.size(), 2u);
  EXPECT_EQ(r->passed, 1);
  EXPECT_EQ(r->failed, 1);
  EXPECT_FALSE(r->ok());
  EXPECT_TRUE(r->written);
  EXPECT_EQ(r->rules[0].rule, "relu_relu");
  EXPECT_TRUE(r->rules[0].ok());
  EXPECT_EQ(r->rules[0].instances, 3u);
  EXPECT_EQ(r->rules[0].status, rules::VerifyStatus::kNumeric);
  EXPECT_FALSE(r->rules[1].ok());
  EXPECT_EQ(r->rules[1].status, rules::VerifyStatus::kRefuted);
  EXPECT_GT(r->rules[1].max_abs_diff, 0.01);
  const auto j = r->to_json();
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["rules"][1]["status"], "refuted");
  EXPECT_FALSE(j.contains("proved"));  // no --prove
  const auto text = printed(*r);
  EXPECT_NE(text.find("FAIL relu_is_sigmoid"), std::string::npos) << text;
  EXPECT_NE(text.find("1 passed, 1 failed"), std::string::npos) << text;

  pipeline::RulesListOptions lo;
  lo.file = o.file;
  auto list = pipeline::list_rules(lo);
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->library.rules.size(), 2u);
  EXPECT_EQ(list->by_status.at("refuted"), 1);
  EXPECT_EQ(list->by_status.at(std::string(rules::status_name(rules::VerifyStatus::kNumeric))), 1);
  EXPECT_EQ(list->default_set, 1);
  EXPECT_EQ(list->default_set_in_use, 0);  // marked, but not proved
  EXPECT_EQ(list->to_json()["rules"].size(), 2u);
  lo.summary = true;
  EXPECT_EQ(pipeline::list_rules(lo)->to_json()["rules"].size(), 0u);
}

// --rule and --sample choose what is checked; a missing file is bad input.
TEST(RulesVerify, ChecksOnlyTheChosenRules) {
  rules::use_tools_module(&rules::tools_table());
  TempDir dir;
  pipeline::RulesVerifyOptions o;
  o.file = write_rules(dir.path);
  o.only = {"relu_relu"};
  auto r = pipeline::verify_rules(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->rules.size(), 1u);
  EXPECT_TRUE(r->ok());
  o.only.clear();
  o.sample = 1;
  r = pipeline::verify_rules(o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->rules.size(), 1u);
  o.file = (dir.path / "none.json").string();
  r = pipeline::verify_rules(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kBadInput);
}

// Random chains of the shipped rules on a small CNN end where they started numerically.
TEST(RulesBench, ChainsOfTheShippedRulesKeepTheModelsOutputs) {
  pipeline::RulesBenchOptions o;
  o.models = {(kData / "tiny_cnn.onnx").string()};
  o.applications = 30;
  o.chain = 10;
  o.repeats = 1;
  auto r = pipeline::bench_rules(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->models.size(), 1u);
  const auto& m = r->models[0];
  EXPECT_GT(m.nodes, 0u);
  EXPECT_GT(m.matches, 0u);
  EXPECT_GT(m.applications, 0);
  EXPECT_GT(m.executor_runs, 0);
  EXPECT_EQ(r->failures(), 0) << m.first_failure;
  EXPECT_EQ(r->to_json()["models"][0]["failures"], 0);
}

}  // namespace
