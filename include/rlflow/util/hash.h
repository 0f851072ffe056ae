#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace rlflow {

// 64-bit mixing hash; stable across runs and platforms (no std::hash, no addresses).
class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0x9E3779B97F4A7C15ull) : h_(seed) {}
  Hasher& add(uint64_t v) {
    h_ ^= mix(v + 0x9E3779B97F4A7C15ull + (h_ << 6) + (h_ >> 2));
    return *this;
  }
  Hasher& add_i(int64_t v) { return add(static_cast<uint64_t>(v)); }
  Hasher& add_f(double v);
  Hasher& add(std::string_view s);
  Hasher& add(const std::vector<int64_t>& v) {
    add(v.size());
    for (auto x : v) add_i(x);
    return *this;
  }
  uint64_t digest() const { return mix(h_); }

  static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
  }
  static uint64_t bytes(const void* data, size_t n);

 private:
  uint64_t h_;
};

}  // namespace rlflow
