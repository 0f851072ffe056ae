#pragma once
// Internal to cost: whole-file reads and atomic whole-file writes (profiles and the cache).
#include <string>

#include "rlflow/util/expected.h"

namespace rlflow::cost::detail {

Expected<std::string> read_file(const std::string& path);
// Writes a temporary file next to `path` and renames it into place, creating missing parent
// folders: a reader sees the old file or the new one, never a torn write.
Status write_file_atomic(const std::string& path, const std::string& content);

}  // namespace rlflow::cost::detail
