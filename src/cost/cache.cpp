#include "rlflow/cost/cache.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "rlflow/util/file_io.h"
#include "table_entries.h"

namespace rlflow::cost {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// File layout: {"format": kFormat, "version": kVersion,
//               "devices": {fingerprint: {hex signature hash: {"ms": x, "sig": "..."}}}}
constexpr const char* kFormat = "rlflow-cost-cache";
constexpr int kVersion = 1;
// Long measuring runs save now and then, so an interrupted run keeps most of its work.
constexpr auto kAutosaveInterval = std::chrono::seconds(5);

std::string hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The parsed file, or an error saying why it cannot be used. A missing file is an empty cache.
Expected<json> read_cache(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return json{{"format", kFormat}, {"version", kVersion}, {"devices", json::object()}};
  auto text = rlflow::read_file(path);
  if (!text) return text.error();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::bad_input(path + ": not valid JSON");
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat) return Error::bad_input(path + ": not an rlflow cost cache");
  if (!j.contains("version") || j["version"] != kVersion)
    return Error::bad_input(path + ": cache version " + (j.contains("version") ? j["version"].dump() : "missing") + ", expected " +
                            std::to_string(kVersion));
  if (!j.contains("devices") || !j["devices"].is_object()) return Error::bad_input(path + ": no 'devices' object");
  return j;
}

}  // namespace

std::string default_cache_path() {
  if (const char* env = std::getenv("RLFLOW_COST_CACHE"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "rlflow" / "cost-cache.json").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / ".cache" / "rlflow" / "cost-cache.json").string();
}

CachedCostModel::CachedCostModel(std::unique_ptr<CostModel> inner, std::string path)
    : ForwardingCostModel(*inner), owned_(std::move(inner)), path_(std::move(path)), fingerprint_(inner_->device_fingerprint()),
      last_save_(std::chrono::steady_clock::now()) {
  auto j = read_cache(path_);
  if (!j) {
    warning_ = j.error().message + "; the cache is kept in memory for this run and that file is left as it is (delete it, or "
               "choose another cache file)";
    keep_file_ = true;
    spdlog::warn("cost cache: {}", warning_);
    return;
  }
  const auto& devices = (*j)["devices"];
  if (!devices.contains(fingerprint_)) return;
  for (auto& [h, e] : parse_table_entries(devices[fingerprint_])) entries_[h] = Entry{e.ms, std::move(e.sig), false};
  loaded_ = entries_.size();
}

CachedCostModel::~CachedCostModel() {
  std::lock_guard lock(mu_);
  if (!dirty_) return;
  auto st = save_locked();
  if (!st.ok()) spdlog::warn("cost cache: could not save: {}", st.error().message);
}

Expected<double> CachedCostModel::op_cost(const OpSignature& sig) {
  const uint64_t h = sig.hash();
  std::lock_guard lock(mu_);
  std::string s;
  if (auto it = entries_.find(h); it != entries_.end()) {
    // Searches look the same signatures up again and again: format and compare only once.
    if (it->second.verified) {
      ++hits_;
      return it->second.ms;
    }
    s = sig.str();
    if (it->second.sig.empty() || it->second.sig == s) {
      it->second.verified = true;
      ++hits_;
      return it->second.ms;
    }
    spdlog::debug("cost cache: hash collision between '{}' and '{}'; measuring", s, it->second.sig);
  }
  ++misses_;
  // Measured under the lock: measurements must not overlap or they disturb each other.
  auto ms = inner_->op_cost(sig);
  if (!ms) return ms.error();
  if (s.empty()) s = sig.str();
  entries_[h] = Entry{*ms, std::move(s), true};
  dirty_ = true;
  if (!save_failed_ && std::chrono::steady_clock::now() - last_save_ > kAutosaveInterval) {
    auto st = save_locked();
    if (!st.ok()) {
      save_failed_ = true;  // warn once; the destructor tries again
      spdlog::warn("cost cache: could not save: {}", st.error().message);
    }
  }
  return *ms;
}

CacheStats CachedCostModel::stats() const {
  std::lock_guard lock(mu_);
  return CacheStats{hits_, misses_, entries_.size(), loaded_, path_, warning_};
}

Status CachedCostModel::save() {
  std::lock_guard lock(mu_);
  return save_locked();
}

Status CachedCostModel::save_locked() {
  if (keep_file_) {
    dirty_ = false;
    return {};
  }
  auto disk = read_cache(path_);
  // Written only over a missing file or a cost cache: a file that became something else since (or
  // that another process wrote) is never replaced.
  std::error_code ec;
  if (!disk && fs::exists(path_, ec)) {
    keep_file_ = true;
    dirty_ = false;
    return Error::bad_input("cost cache: " + disk.error().message + "; not replaced");
  }
  json j = disk ? std::move(*disk) : json{{"format", kFormat}, {"version", kVersion}, {"devices", json::object()}};
  json& mine = j["devices"][fingerprint_];
  if (!mine.is_object()) mine = json::object();
  for (const auto& [h, e] : entries_) mine[hex(h)] = json{{"ms", e.ms}, {"sig", e.sig}};
  RLFLOW_TRY_STATUS(rlflow::ensure_parent_dir(path_));
  RLFLOW_TRY_STATUS(rlflow::write_file_atomic(path_, j.dump(1)));
  dirty_ = false;
  last_save_ = std::chrono::steady_clock::now();
  return {};
}

CachedCostModel* as_cached(CostModel& model) { return dynamic_cast<CachedCostModel*>(&model); }

}  // namespace rlflow::cost
