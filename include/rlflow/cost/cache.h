#pragma once
// A persistent cache in front of any measuring backend: op costs are keyed by the signature hash
// and the backend's device fingerprint and kept in one JSON file, so a second run on the same
// device measures nothing.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

// ~/.cache/rlflow/cost-cache.json, or $RLFLOW_COST_CACHE when set.
std::string default_cache_path();

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;     // each one ran the backend
  size_t entries = 0;     // entries held for this device fingerprint
  size_t loaded = 0;      // of which came from the file at start
  std::string path;
  std::string warning;    // why the file was ignored at start (unreadable, corrupt), if it was
};

class CachedCostModel : public ForwardingCostModel {
 public:
  // Reads `path` now. A missing file is an empty cache; an unreadable, corrupt or foreign file is
  // ignored with a warning (logged, and kept in stats().warning) and replaced by the next save.
  CachedCostModel(std::unique_ptr<CostModel> inner, std::string path);
  // Saves when there are unsaved entries; a failure is logged, never thrown.
  ~CachedCostModel() override;

  Expected<double> op_cost(const OpSignature& sig) override;
  std::string device_fingerprint() const override { return fingerprint_; }

  CacheStats stats() const;
  // Merges with what is on disk now (another process may have added entries, for this device or
  // others), then writes atomically.
  Status save();

 private:
  struct Entry {
    double ms;
    std::string sig;        // OpSignature::str(), to tell a hash collision from a hit
    bool verified = false;  // sig compared once (entries from the file); later hits skip the compare
  };
  Status save_locked();

  std::unique_ptr<CostModel> owned_;  // the wrapped model (ForwardingCostModel::inner())
  std::string path_, fingerprint_, warning_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
  size_t loaded_ = 0;
  int64_t hits_ = 0, misses_ = 0;
  bool dirty_ = false;
  // The path names a file that is not an rlflow cost cache (a model, a note, a damaged cache): it is
  // never replaced, and the cache lives in memory for this run only.
  bool keep_file_ = false;
  bool save_failed_ = false;
  std::chrono::steady_clock::time_point last_save_;
};

// The cache layer of a model built by make_cost_model, or nullptr when it has none.
CachedCostModel* as_cached(CostModel& model);

}  // namespace rlflow::cost
