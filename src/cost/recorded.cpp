#include "rlflow/cost/recorded.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "rlflow/util/file_io.h"
#include "rlflow/util/hash.h"
#include "table_entries.h"

namespace rlflow::cost {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string default_cost_table() { return (fs::path(devices_dir()) / "h100-cost-table.json").string(); }

Expected<CostTable> read_cost_table(const std::string& path, const std::string& device) {
  auto text = rlflow::read_file(path);
  if (!text) return text.error();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("devices") || !j["devices"].is_object())
    return Error::bad_input(path + ": not a cost table (expected the cost cache's format: {\"devices\": {fingerprint: {hash: {\"ms\", \"sig\"}}}})");
  const auto& devices = j["devices"];
  std::string chosen = device;
  if (chosen.empty()) {
    size_t most = 0;
    for (const auto& [fp, entries] : devices.items())
      if (entries.is_object() && entries.size() > most) {
        most = entries.size();
        chosen = fp;
      }
    if (chosen.empty()) return Error::bad_input(path + ": the cost table holds no timings");
  } else if (!devices.contains(chosen)) {
    return Error::bad_input(path + ": no timings for device '" + chosen + "'");
  }
  CostTable t;
  t.device = chosen;
  t.entries = parse_table_entries(devices[chosen]);
  if (j.contains("known_error") && j["known_error"].is_string()) t.known_error = j["known_error"].get<std::string>();
  return t;
}

std::unordered_map<uint64_t, CostTable::Entry> parse_table_entries(const nlohmann::json& device_entries) {
  std::unordered_map<uint64_t, CostTable::Entry> out;
  if (!device_entries.is_object()) return out;
  for (const auto& [key, v] : device_entries.items()) {
    // Skip malformed entries one by one: a hand-edited file should not cost the whole table.
    uint64_t h = 0;
    if (key.size() != 16) continue;
    if (auto [p, ec] = std::from_chars(key.data(), key.data() + key.size(), h, 16); ec != std::errc() || p != key.data() + key.size())
      continue;
    if (!v.is_object() || !v.contains("ms") || !v["ms"].is_number()) continue;
    const double ms = v["ms"].get<double>();
    if (!std::isfinite(ms) || ms < 0) continue;
    out[h] = {ms, v.contains("sig") && v["sig"].is_string() ? v["sig"].get<std::string>() : std::string()};
  }
  return out;
}

RecordedCostModel::RecordedCostModel(CostTable table, std::string table_path, DeviceProfile fallback)
    : table_(std::move(table)), path_(std::move(table_path)), fallback_(std::move(fallback)) {}

Expected<double> RecordedCostModel::op_cost(const OpSignature& sig) {
  if (auto it = table_.entries.find(sig.hash()); it != table_.entries.end()) {
    // The signature text guards against a hash collision; a table without texts is trusted.
    if (it->second.sig.empty() || it->second.sig == sig.str()) {
      ++hits_;
      return it->second.ms;
    }
  }
  ++misses_;
  return fallback_.op_cost(sig);
}

std::string RecordedCostModel::device_fingerprint() const {
  uint64_t h = 0;
  for (const auto& [k, e] : table_.entries) h ^= Hasher().add(k).add(std::bit_cast<uint64_t>(e.ms)).digest();
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return "recorded/" + table_.device + "/table:" + buf + "/fallback:" + fallback_.device_fingerprint();
}

RecordedStats RecordedCostModel::stats() const {
  return {hits_.load(), misses_.load(), table_.entries.size(), path_, table_.device, fallback_.profile().name};
}

std::string RecordedCostModel::known_error() const {
  const auto s = stats();
  std::string e = "recorded per-op timings from " + s.device + " (" + std::to_string(s.hits) + " lookups hit the table, " +
                  std::to_string(s.misses) + " were priced by profile '" + s.fallback + "'";
  if (!fallback().calibration.empty()) e += "; " + fallback().calibration;
  e += ")";
  if (!table_.known_error.empty()) e += "; " + table_.known_error;
  return e;
}

RecordedCostModel* as_recorded(CostModel& model) { return dynamic_cast<RecordedCostModel*>(&model); }

}  // namespace rlflow::cost
