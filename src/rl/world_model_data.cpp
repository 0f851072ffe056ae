#include "world_model_data.h"

#include <cstring>

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

}  // namespace

int64_t DataSet::steps() const {
  int64_t n = 0;
  for (const auto& e : episodes) n += e.T;
  return n;
}

Status write_data(const std::string& path, const DataSet& d) {
  nlohmann::json h = d.header;
  h["format"] = kFormat;
  h["version"] = 1;
  h["episodes"] = d.episodes.size();
  std::string out = h.dump() + "\n";
  for (const auto& e : d.episodes) {
    put(out, std::vector<int32_t>{e.T, e.model});
    put(out, e.z);
    put(out, e.mask);
    put(out, e.count);
    put(out, e.xfer);
    put(out, e.location);
    put(out, e.reward);
    put(out, e.done);
  }
  return write_file_atomic(path, out);
}

Expected<DataSet> read_data(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  const auto nl = bytes->find('\n');
  DataSet d;
  if (nl == std::string::npos) return Error::bad_input(path + ": not a world-model data file");
  d.header = nlohmann::json::parse(bytes->substr(0, nl), nullptr, false);
  if (d.header.is_discarded() || d.header.value("format", "") != kFormat) return Error::bad_input(path + ": not a world-model data file");
  const size_t Z = d.header.value("z_dim", 0), N = d.header.value("num_xfers", 0);
  const size_t count = d.header.value("episodes", 0);
  size_t pos = nl + 1;
  for (size_t k = 0; k < count; ++k) {
    EpisodeData e;
    std::vector<int32_t> head;
    if (!get(*bytes, pos, head, 2)) return Error::bad_input(path + ": truncated at episode " + std::to_string(k));
    e.T = head[0];
    e.model = head[1];
    const size_t S = static_cast<size_t>(e.T) + 1, T = static_cast<size_t>(e.T);
    if (e.T < 0 || !get(*bytes, pos, e.z, S * Z) || !get(*bytes, pos, e.mask, S * N) || !get(*bytes, pos, e.count, S * N) ||
        !get(*bytes, pos, e.xfer, T) || !get(*bytes, pos, e.location, T) || !get(*bytes, pos, e.reward, T) || !get(*bytes, pos, e.done, T))
      return Error::bad_input(path + ": truncated at episode " + std::to_string(k));
    d.episodes.push_back(std::move(e));
  }
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
