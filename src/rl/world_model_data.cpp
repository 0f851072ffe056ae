#include "world_model_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <optional>
#include <string_view>

#include "rlflow/util/file_io.h"
#include "rlflow/util/hash.h"

namespace rlflow::rl::wm {

namespace {

constexpr const char* kFormat = "rlflow-wm-data";

template <class T>
void put(std::string& out, const std::vector<T>& v) {
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
bool get(const std::string& in, size_t& pos, std::vector<T>& v, size_t n) {
  if (pos + n * sizeof(T) > in.size()) return false;
  v.resize(n);
  std::memcpy(v.data(), in.data() + pos, n * sizeof(T));
  pos += n * sizeof(T);
  return true;
}

// Over the header (without this field) and every byte after it: a flipped byte anywhere, or a
// header count changed to one that still parses, is refused instead of trained on (issue 41).
std::string checksum(const std::string& header, std::string_view body) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(Hasher().add(header).add(body).digest()));
  return buf;
}

}  // namespace

int64_t DataSet::steps() const {
  int64_t n = 0;
  for (const auto& e : episodes) n += e.T;
  return n;
}

Status write_data(const std::string& path, const DataSet& d) {
  nlohmann::json h = d.header;
  h["format"] = kFormat;
  // Features are written only when every episode has them (a file of an older version topped up
  // with new episodes has none).
  const bool feat = std::all_of(d.episodes.begin(), d.episodes.end(), [](const EpisodeData& e) {
    return e.feat.size() == static_cast<size_t>(e.T) * kMatchFeatures;
  });
  h["version"] = 2;
  h["match_features"] = feat ? kMatchFeatures : 0;
  h["episodes"] = d.episodes.size();
  h.erase("checksum");
  std::string out;
  for (const auto& e : d.episodes) {
    put(out, std::vector<int32_t>{e.T, e.model});
    put(out, e.z);
    put(out, e.mask);
    put(out, e.count);
    put(out, e.xfer);
    put(out, e.location);
    put(out, e.reward);
    put(out, e.done);
    if (feat) put(out, e.feat);
  }
  h["checksum"] = checksum(h.dump(), out);
  return write_file_atomic(path, h.dump() + "\n" + out);
}

Expected<DataSet> read_data(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  const auto nl = bytes->find('\n');
  DataSet d;
  if (nl == std::string::npos) return Error::bad_input(path + ": not a world-model data file");
  d.header = nlohmann::json::parse(bytes->substr(0, nl), nullptr, false);
  if (d.header.is_discarded() || !d.header.is_object() || d.header.value("format", "") != kFormat)
    return Error::bad_input(path + ": not a world-model data file");
  {
    const auto it = d.header.find("checksum");
    if (it == d.header.end() || !it->is_string())
      return Error::bad_input(path + ": a world-model data file without a checksum (written by an older rlflow, or damaged): "
                              "collect the rollouts again with another --data path");
    const std::string want = it->get<std::string>();
    nlohmann::json bare = d.header;
    bare.erase("checksum");
    if (checksum(bare.dump(), std::string_view(*bytes).substr(nl + 1)) != want)
      return Error::bad_input(path + ": damaged world-model data file (checksum mismatch: the file was changed or truncated after it was written)");
  }
  // Header counts are bounded by the file's size before any product of them is formed, and every
  // product is checked: a header that says num_xfers 2^61 once wrapped S * N and crashed (issue 41).
  auto count_of = [&](const char* key) -> std::optional<size_t> {
    const auto it = d.header.find(key);
    if (it == d.header.end()) return size_t{0};
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) return std::nullopt;
    const auto v = it->get<uint64_t>();
    if (v > bytes->size()) return std::nullopt;
    return static_cast<size_t>(v);
  };
  const auto z = count_of("z_dim"), n = count_of("num_xfers"), c = count_of("episodes"), f = count_of("match_features");
  if (!z || !n || !c || !f) return Error::bad_input(path + ": a world-model data file with an impossible header");
  const size_t Z = *z, N = *n, count = *c, F = *f;
  if (F != 0 && F != static_cast<size_t>(kMatchFeatures))
    return Error::bad_input(path + ": match features of another layout (" + std::to_string(F) + " per match)");
  size_t pos = nl + 1;
  for (size_t k = 0; k < count; ++k) {
    EpisodeData e;
    std::vector<int32_t> head;
    if (!get(*bytes, pos, head, 2)) return Error::bad_input(path + ": truncated at episode " + std::to_string(k));
    e.T = head[0];
    e.model = head[1];
    const size_t S = static_cast<size_t>(e.T) + 1, T = static_cast<size_t>(e.T);
    size_t sz = 0, sn = 0, tf = 0;
    if (e.T < 0 || __builtin_mul_overflow(S, Z, &sz) || __builtin_mul_overflow(S, N, &sn) || __builtin_mul_overflow(T, F, &tf) ||
        sz > bytes->size() || sn > bytes->size() || tf > bytes->size())
      return Error::bad_input(path + ": episode " + std::to_string(k) + " is impossible for its header");
    if (!get(*bytes, pos, e.z, S * Z) || !get(*bytes, pos, e.mask, S * N) || !get(*bytes, pos, e.count, S * N) ||
        !get(*bytes, pos, e.xfer, T) || !get(*bytes, pos, e.location, T) || !get(*bytes, pos, e.reward, T) || !get(*bytes, pos, e.done, T) ||
        (F > 0 && !get(*bytes, pos, e.feat, T * F)))
      return Error::bad_input(path + ": truncated at episode " + std::to_string(k));
    d.episodes.push_back(std::move(e));
  }
  if (pos != bytes->size()) return Error::bad_input(path + ": " + std::to_string(bytes->size() - pos) + " bytes after the last episode");
  return d;
}

std::string encoder_fingerprint(nets::GraphEncoder& enc) {
  Hasher h;
  for (const auto& p : enc->named_parameters()) {
    h.add(p.key());
    auto t = p.value().contiguous();
    const auto* f = t.data_ptr<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, f + i, 4);
      h.add(static_cast<uint64_t>(bits));
    }
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.digest()));
  return buf;
}

torch::Tensor encode(nets::GraphEncoder& enc, const std::vector<const GraphFeatures*>& graphs) {
  torch::NoGradGuard ng;
  return enc->forward(nets::make_batch(graphs)).global;
}

void state_masks(const Observation& o, std::vector<uint8_t>& mask, std::vector<uint16_t>& count) {
  const size_t N = static_cast<size_t>(o.num_xfers());
  for (size_t x = 0; x < N; ++x) {
    mask.push_back(o.xfer_mask[x]);
    uint16_t c = 0;
    if (x < o.location_valid.size())
      for (auto v : o.location_valid[x]) c = static_cast<uint16_t>(c + (v ? 1 : 0));
    count.push_back(o.xfer_mask[x] ? c : 0);
  }
}

MatchRow match_row(const GraphFeatures& g, const rules::Match& m) {
  MatchRow r{};
  if (g.num_nodes <= 0 || m.nodes.empty()) return r;
  const size_t nd = g.nodes.size() / static_cast<size_t>(g.num_nodes);
  const size_t base = nd - 23;  // the node features after the op one-hot (features.cpp)
  double share = 0, us = 0, pos = 0;
  int counted = 0;
  for (auto id : m.nodes) {
    if (id < 0 || id >= g.num_nodes) continue;
    const float* x = &g.nodes[static_cast<size_t>(id) * nd + base];
    share += x[18];
    us += std::expm1(10.0 * static_cast<double>(x[19]));
    r[2] = std::max(r[2], x[16]);
    r[3] = std::max(r[3], x[4]);
    r[4] = std::max(r[4], x[13]);
    r[5] = std::max(r[5], x[14]);
    pos += id;
    ++counted;
  }
  r[0] = static_cast<float>(share);
  r[1] = static_cast<float>(std::log1p(std::max(0.0, us)) / 10.0);
  r[6] = static_cast<float>(counted) / 8.f;
  r[kMatchFeatures] = counted ? static_cast<float>(pos / counted / g.num_nodes) : 0.f;
  return r;
}

MatchRows match_rows(const Observation& o) {
  const size_t N = static_cast<size_t>(o.num_xfers());
  MatchRows rows(N);
  for (size_t x = 0; x < N && x < o.locations.size(); ++x) {
    if (!o.xfer_mask[x] || !o.graph) continue;  // state_masks counts 0 here
    for (size_t l = 0; l < o.locations[x].size(); ++l)
      if (l < o.location_valid[x].size() && o.location_valid[x][l]) rows[x].push_back(match_row(*o.graph, o.locations[x][l]));
  }
  return rows;
}

MatchRow take_match(MatchRows& rows, const Action& a) {
  MatchRow r{};
  if (a.xfer < 0 || static_cast<size_t>(a.xfer) >= rows.size()) return r;  // NO-OP
  auto& v = rows[static_cast<size_t>(a.xfer)];
  if (a.location < 0 || static_cast<size_t>(a.location) >= v.size()) return r;
  r = v[static_cast<size_t>(a.location)];
  v.erase(v.begin() + a.location);
  return r;
}

void fit_matches(MatchRows& rows, const MatchRow& taken, const std::vector<uint16_t>& counts) {
  const float p = taken[kMatchFeatures];
  for (size_t y = 0; y < rows.size() && y < counts.size(); ++y) {
    auto& v = rows[y];
    const size_t target = counts[y];
    while (v.size() > target) {
      size_t best = 0;
      for (size_t k = 1; k < v.size(); ++k)
        if (std::fabs(v[k][kMatchFeatures] - p) < std::fabs(v[best][kMatchFeatures] - p)) best = k;
      v.erase(v.begin() + static_cast<int64_t>(best));
    }
    while (v.size() < target) {
      auto at = std::upper_bound(v.begin(), v.end(), p, [](float q, const MatchRow& r) { return q < r[kMatchFeatures]; });
      v.insert(at, taken);
    }
  }
}

Action random_action(const Observation& o, double noop_share, std::mt19937_64& rng) {
  const int N = o.num_xfers();
  std::vector<int> valid;
  for (int x = 0; x < N; ++x)
    if (o.xfer_mask[static_cast<size_t>(x)]) valid.push_back(x);
  Action a{N, 0};
  if (valid.empty() || std::uniform_real_distribution<double>(0.0, 1.0)(rng) < noop_share) return a;
  a.xfer = valid[std::uniform_int_distribution<size_t>(0, valid.size() - 1)(rng)];
  std::vector<int> locs;
  const auto& lv = o.location_valid[static_cast<size_t>(a.xfer)];
  for (size_t l = 0; l < lv.size(); ++l)
    if (lv[l]) locs.push_back(static_cast<int>(l));
  a.location = locs[std::uniform_int_distribution<size_t>(0, locs.size() - 1)(rng)];
  return a;
}

Expected<EpisodeData> record_episode(Environment& env, nets::GraphEncoder& enc, const ChooseAction& choose, double* seconds) {
  auto first = env.reset();
  if (!first) return first.error();
  std::vector<Observation> states{std::move(*first)};
  EpisodeData e;
  double secs = 0;
  for (;;) {
    auto chosen = choose(states.back());
    if (!chosen) return chosen.error();
    const Action a = *chosen;
    auto st = env.step(a);
    if (!st) return st.error();
    secs += st->info.seconds;
    e.xfer.push_back(a.xfer);
    e.location.push_back(a.location);
    e.reward.push_back(static_cast<float>(st->reward));
    e.done.push_back(st->done ? 1 : 0);
    states.push_back(std::move(st->observation));
    if (st->done) break;
  }
  e.T = static_cast<int32_t>(e.xfer.size());
  // The chosen matches' features as a dream would carry them (the real counts standing in for the
  // count head's), so the world model learns from the inputs the dream will give it.
  MatchRows rows = match_rows(states[0]);
  for (int32_t t = 0; t < e.T; ++t) {
    const auto k = static_cast<size_t>(t);
    const MatchRow r = take_match(rows, Action{e.xfer[k], e.location[k]});
    e.feat.insert(e.feat.end(), r.begin(), r.begin() + kMatchFeatures);
    std::vector<uint8_t> m;
    std::vector<uint16_t> c;
    state_masks(states[k + 1], m, c);
    fit_matches(rows, r, c);
  }
  std::vector<const GraphFeatures*> graphs;
  for (const auto& s : states) {
    graphs.push_back(s.graph.get());
    state_masks(s, e.mask, e.count);
  }
  auto z = encode(enc, graphs).contiguous();
  e.z.assign(z.data_ptr<float>(), z.data_ptr<float>() + z.numel());
  if (seconds) *seconds = secs;
  return e;
}

}  // namespace rlflow::rl::wm
