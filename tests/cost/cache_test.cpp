// The persistent cost cache: hits and misses, persistence, device separation, damaged files.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common.h"
#include "rlflow/cost/cache.h"

using namespace rlflow;
using namespace rlflow::cost;
using namespace rlflow::cost::testing;
using ir::OpKind;

namespace {

// A backend that counts how often it is asked and answers a value derived from the signature.
class CountingModel : public CostModel {
 public:
  CountingModel(std::string fingerprint, int* calls) : fp_(std::move(fingerprint)), calls_(calls) {}
  Expected<double> op_cost(const OpSignature& s) override {
    ++*calls_;
    if (s.kind == OpKind::kSqrt) return Error::internal("sqrt is broken today");
    return 0.001 * static_cast<double>(s.outputs[0].numel() % 1000 + 1);
  }
  std::string device_fingerprint() const override { return fp_; }
  std::string name() const override { return "counting"; }

 private:
  std::string fp_;
  int* calls_;
};

std::vector<OpSignature> three_sigs() {
  return {sig(OpKind::kRelu, {}, {{{1, 8, 4, 4}}}), sig(OpKind::kAdd, {}, {{{2, 3}}, {{3}, true}}),
          sig(OpKind::kConv, conv2d(3), {{{1, 3, 8, 8}}, {{4, 3, 3, 3}, true}})};
}

std::unique_ptr<CachedCostModel> cached(const std::string& path, const std::string& fp, int* calls) {
  return std::make_unique<CachedCostModel>(std::make_unique<CountingModel>(fp, calls), path);
}

TEST(Cache, HitsAndMisses) {
  TempDir dir;
  int calls = 0;
  auto c = cached(dir.file("c.json"), "dev", &calls);
  const auto sigs = three_sigs();
  for (const auto& s : sigs) ASSERT_TRUE(c->op_cost(s).ok());
  for (const auto& s : sigs) ASSERT_TRUE(c->op_cost(s).ok());
  EXPECT_EQ(calls, 3);
  const auto st = c->stats();
  EXPECT_EQ(st.misses, 3);
  EXPECT_EQ(st.hits, 3);
  EXPECT_EQ(st.entries, 3u);
  EXPECT_EQ(st.loaded, 0u);
  EXPECT_TRUE(st.warning.empty());
  EXPECT_EQ(c->device_fingerprint(), "dev");
  EXPECT_EQ(c->name(), "counting");
  EXPECT_EQ(as_cached(*c), c.get());
  CountingModel plain("x", &calls);
  EXPECT_EQ(as_cached(plain), nullptr);
}

TEST(Cache, SecondRunMeasuresNothing) {
  TempDir dir;
  const auto path = dir.file("nested/folder/cache.json");
  const auto sigs = three_sigs();
  std::vector<double> first;
  int calls = 0;
  {
    auto c = cached(path, "dev", &calls);
    for (const auto& s : sigs) first.push_back(*c->op_cost(s));
  }  // saved by the destructor
  ASSERT_TRUE(std::filesystem::exists(path));
  calls = 0;
  auto c = cached(path, "dev", &calls);
  EXPECT_EQ(c->stats().loaded, 3u);
  for (size_t i = 0; i < sigs.size(); ++i) EXPECT_EQ(*c->op_cost(sigs[i]), first[i]);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(c->stats().hits, 3);
  EXPECT_EQ(c->stats().misses, 0);
}

TEST(Cache, ExplicitSaveIsAtomicJson) {
  TempDir dir;
  const auto path = dir.file("cache.json");
  int calls = 0;
  auto c = cached(path, "dev", &calls);
  ASSERT_TRUE(c->op_cost(three_sigs()[0]).ok());
  ASSERT_TRUE(c->save().ok());
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["format"], "rlflow-cost-cache");
  ASSERT_EQ(j["devices"]["dev"].size(), 1u);
  EXPECT_TRUE(j["devices"]["dev"].begin().value().contains("sig"));
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) files += !e.is_directory();
  EXPECT_EQ(files, 1);
}

TEST(Cache, DevicesAreSeparate) {
  TempDir dir;
  const auto path = dir.file("cache.json");
  const auto sigs = three_sigs();
  int calls_a = 0, calls_b = 0;
  {
    auto a = cached(path, "gpu-a", &calls_a);
    for (const auto& s : sigs) ASSERT_TRUE(a->op_cost(s).ok());
  }
  {
    auto b = cached(path, "gpu-b", &calls_b);
    EXPECT_EQ(b->stats().loaded, 0u);
    for (const auto& s : sigs) ASSERT_TRUE(b->op_cost(s).ok());
    EXPECT_EQ(calls_b, 3);  // another fingerprint: everything is a miss
    EXPECT_EQ(b->stats().misses, 3);
  }
  // Saving device b kept device a's entries.
  calls_a = 0;
  auto a = cached(path, "gpu-a", &calls_a);
  EXPECT_EQ(a->stats().loaded, 3u);
  for (const auto& s : sigs) ASSERT_TRUE(a->op_cost(s).ok());
  EXPECT_EQ(calls_a, 0);
}

TEST(Cache, ConcurrentWritersMerge) {
  TempDir dir;
  const auto path = dir.file("cache.json");
  const auto sigs = three_sigs();
  int calls = 0;
  auto first = cached(path, "dev", &calls);
  auto second = cached(path, "dev", &calls);  // opened before `first` saved anything
  ASSERT_TRUE(first->op_cost(sigs[0]).ok());
  ASSERT_TRUE(second->op_cost(sigs[1]).ok());
  ASSERT_TRUE(first->save().ok());
  ASSERT_TRUE(second->save().ok());
  auto third = cached(path, "dev", &calls);
  EXPECT_EQ(third->stats().loaded, 2u);
}

TEST(Cache, DamagedFilesAreIgnoredWithAWarning) {
  TempDir dir;
  const auto sigs = three_sigs();
  const std::vector<std::string> damaged = {
      "this is not json",
      R"({"format": "rlflow-cost-cache", "version": 1, "devices": {"dev": {"00000000)",  // truncated
      R"({"format": "something-else", "version": 1, "devices": {}})",
      R"({"format": "rlflow-cost-cache", "version": 99, "devices": {}})",
      R"({"format": "rlflow-cost-cache", "version": "1", "devices": {}})",
      R"({"format": "rlflow-cost-cache", "version": 1, "devices": []})",
      R"([1, 2, 3])",
      std::string("\0\xff\xfe binary", 10),
  };
  for (const auto& text : damaged) {
    SCOPED_TRACE(text);
    const auto path = dir.file("damaged.json");
    { std::ofstream(path, std::ios::binary) << text; }
    int calls = 0;
    {
      auto c = cached(path, "dev", &calls);
      EXPECT_FALSE(c->stats().warning.empty());
      EXPECT_EQ(c->stats().loaded, 0u);
      auto ms = c->op_cost(sigs[0]);
      ASSERT_TRUE(ms.ok());
      ASSERT_TRUE(c->save().ok());  // kept in memory: the file is not replaced
    }
    // A file that is not a cost cache (a damaged one, or a model the cache path named by mistake)
    // is never overwritten: it may be anyone's data.
    std::ifstream in(path, std::ios::binary);
    std::string now((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(now, text);
    auto again = cached(path, "dev", &calls);
    EXPECT_FALSE(again->stats().warning.empty());
    EXPECT_EQ(again->stats().loaded, 0u);
  }
}

TEST(Cache, MalformedEntriesAreSkippedOneByOne) {
  TempDir dir;
  const auto path = dir.file("cache.json");
  const auto s = three_sigs()[0];
  char key[20];
  std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(s.hash()));
  nlohmann::json j{{"format", "rlflow-cost-cache"},
                   {"version", 1},
                   {"devices",
                    {{"dev",
                      {{key, {{"ms", 0.5}, {"sig", s.str()}}},
                       {"zzzzzzzzzzzzzzzz", {{"ms", 1.0}}},
                       {"0000000000000001", {{"ms", "fast"}}},
                       {"0000000000000002", {{"ms", -1.0}}},
                       {"0000000000000003", 7}}}}}};
  { std::ofstream(path) << j.dump(); }
  int calls = 0;
  auto c = cached(path, "dev", &calls);
  EXPECT_TRUE(c->stats().warning.empty());
  EXPECT_EQ(c->stats().loaded, 1u);
  EXPECT_EQ(*c->op_cost(s), 0.5);
  EXPECT_EQ(calls, 0);
}

TEST(Cache, CollisionIsTreatedAsAMiss) {
  TempDir dir;
  const auto path = dir.file("cache.json");
  const auto s = three_sigs()[0];
  char key[20];
  std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(s.hash()));
  nlohmann::json j{{"format", "rlflow-cost-cache"},
                   {"version", 1},
                   {"devices", {{"dev", {{key, {{"ms", 123.0}, {"sig", "some other op"}}}}}}}};
  { std::ofstream(path) << j.dump(); }
  int calls = 0;
  auto c = cached(path, "dev", &calls);
  EXPECT_NE(*c->op_cost(s), 123.0);
  EXPECT_EQ(calls, 1);
}

TEST(Cache, BackendErrorsAreNotCached) {
  TempDir dir;
  int calls = 0;
  auto c = cached(dir.file("cache.json"), "dev", &calls);
  const auto s = sig(OpKind::kSqrt, {}, {{{4}}});
  EXPECT_FALSE(c->op_cost(s).ok());
  EXPECT_FALSE(c->op_cost(s).ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(c->stats().entries, 0u);
}

TEST(Cache, UnwritableLocationIsAnErrorNotACrash) {
  TempDir dir;
  const auto blocker = dir.file("file");
  { std::ofstream(blocker) << "x"; }
  int calls = 0;
  auto c = cached(blocker + "/cache.json", "dev", &calls);  // a folder that cannot exist
  ASSERT_TRUE(c->op_cost(three_sigs()[0]).ok());
  EXPECT_FALSE(c->save().ok());
}  // the destructor's failed save only logs

TEST(Cache, DefaultPathHonoursTheEnvironment) {
  const char* old = std::getenv("RLFLOW_COST_CACHE");
  const std::string saved = old ? old : "";
  setenv("RLFLOW_COST_CACHE", "/tmp/somewhere/c.json", 1);
  EXPECT_EQ(default_cache_path(), "/tmp/somewhere/c.json");
  unsetenv("RLFLOW_COST_CACHE");
  EXPECT_NE(default_cache_path().find("rlflow/cost-cache.json"), std::string::npos);
  if (!saved.empty()) setenv("RLFLOW_COST_CACHE", saved.c_str(), 1);
}

}  // namespace
