#pragma once
// Internal to cost: the entries of one device in a cost cache / cost table file, shared by the
// cache and the recorded backend.
#include <nlohmann/json.hpp>

#include "rlflow/cost/recorded.h"

namespace rlflow::cost {

// {hex signature hash: {"ms": x, "sig": "..."}} -> entries; malformed ones are skipped.
std::unordered_map<uint64_t, CostTable::Entry> parse_table_entries(const nlohmann::json& device_entries);

}  // namespace rlflow::cost
