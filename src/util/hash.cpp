#include "rlflow/util/hash.h"

#include <cstring>

namespace rlflow {

Hasher& Hasher::add_f(double v) {
  if (v == 0.0) v = 0.0;  // -0.0 and 0.0 hash alike
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return add(bits);
}

Hasher& Hasher::add(std::string_view s) { return add(bytes(s.data(), s.size())); }

uint64_t Hasher::bytes(const void* data, size_t n) {
  // FNV-1a over 8-byte words, finished with the mixer: fast enough for weight buffers.
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return mix(h);
}

}  // namespace rlflow
