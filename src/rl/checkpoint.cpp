#include "checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string_view>

#include "rlflow/util/file_io.h"
#include "rlflow/util/hash.h"

namespace rlflow::rl::checkpoint {

namespace {

std::string first_line(const std::string& s, size_t n) {
  auto line = s.substr(0, s.find('\n'));
  return line.size() > n ? line.substr(0, n) + "..." : line;
}

constexpr const char* kFormat = "rlflow-agent";

// The file is a header line, kMagic + 16 hex digits of Hasher::bytes over the payload + "\n",
// then the payload: the torch archive (a zip file). torch does not check the zip's CRCs when it
// reads a record, so without the checksum a flipped byte in a weight loads silently.
constexpr std::string_view kMagic = "rlflow-checkpoint-v2 ";
constexpr size_t kHeaderSize = 21 + 16 + 1;  // kMagic, the digest in hex, '\n'
static_assert(kMagic.size() == 21);

std::string header_for(const std::string& payload) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Hasher::bytes(payload.data(), payload.size())));
  return std::string(kMagic) + hex + "\n";
}

// The verified payload of a checkpoint file's bytes.
Expected<std::string> payload_of(const std::string& path, std::string bytes) {
  // Checkpoints written before the checksum existed are bare torch archives (zip files, "PK\3\4"):
  // still loaded, unverified. A damaged header cannot pass for one: no single flipped byte turns
  // kMagic into the zip signature, and anything else that is neither is refused.
  if (bytes.compare(0, 4, std::string("PK\x03\x04", 4)) == 0) return bytes;
  if (bytes.compare(0, kMagic.size(), kMagic) != 0) return Error::bad_input(path + ": not an rlflow agent checkpoint");
  if (bytes.size() < kHeaderSize || bytes[kHeaderSize - 1] != '\n')
    return Error::bad_input(path + ": damaged checkpoint (truncated or corrupt header)");
  const std::string stored = bytes.substr(kMagic.size(), 16);
  bytes.erase(0, kHeaderSize);
  if (header_for(bytes).compare(kMagic.size(), 16, stored) != 0)
    return Error::bad_input(path + ": damaged checkpoint (checksum mismatch: the file was changed or truncated after it was written)");
  return bytes;
}

Expected<std::unique_ptr<torch::serialize::InputArchive>> open(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  auto payload = payload_of(path, std::move(*bytes));
  if (!payload) return payload.error();
  auto archive = std::make_unique<torch::serialize::InputArchive>();
  try {
    std::istringstream is(*payload);
    archive->load_from(is);
  } catch (const std::exception& e) {
    return Error::bad_input(path + ": not an rlflow agent checkpoint (" + first_line(e.what(), 120) + ")");
  }
  return archive;
}

}  // namespace

Status save(const std::string& path, nets::PolicyNet& net, const torch::optim::Optimizer* opt, const nlohmann::json& meta) {
  nlohmann::json m = meta;
  if (!m.contains("kind")) m["kind"] = "policy";
  m["op_vocab"] = net->encoder->op_vocab;
  return save(path, Modules{{"model", net.get()}}, opt, m);
}

Status load(const std::string& path, nets::PolicyNet& net, torch::optim::Optimizer* opt) {
  return load(path, Modules{{"model", net.get()}}, opt);
}

Expected<int> op_vocab(const nlohmann::json& meta, const std::string& path) {
  const auto v = meta.value("op_vocab", int64_t{kLegacyOpVocab});
  if (v < 1 || v > op_vocab_size())
    return Error::bad_input(path + ": the checkpoint knows " + std::to_string(v) + " op kinds, this build " +
                            std::to_string(op_vocab_size()) + " (written by a newer rlflow?)");
  return static_cast<int>(v);
}

Status save(const std::string& path, const Modules& modules, const torch::optim::Optimizer* opt, const nlohmann::json& meta) {
  std::ostringstream os;
  try {
    torch::serialize::OutputArchive root, optim;
    for (const auto& [name, module] : modules) {
      torch::serialize::OutputArchive a;
      module->save(a);
      root.write(name, a);
    }
    if (opt) {
      opt->save(optim);
      root.write("optimizer", optim);
    }
    nlohmann::json m = meta;
    m["format"] = kFormat;
    m["version"] = 1;
    const std::string text = m.dump();
    root.write("meta", torch::from_blob(const_cast<char*>(text.data()), {static_cast<int64_t>(text.size())}, torch::kUInt8).clone());
    root.write("torch_rng", at::detail::getDefaultCPUGenerator().get_state());
    root.save_to(os);
  } catch (const std::exception& e) {
    return Error::internal("saving checkpoint " + path + ": " + e.what());
  }
  const std::string payload = os.str();
  return write_file_atomic(path, header_for(payload) + payload);
}

Expected<nlohmann::json> read_meta(const std::string& path) {
  auto a = open(path);
  if (!a) return a.error();
  torch::Tensor t;
  try {
    (*a)->read("meta", t);
  } catch (const std::exception&) {
    return Error::bad_input(path + ": not an rlflow agent checkpoint (no meta record)");
  }
  std::string text(reinterpret_cast<const char*>(t.data_ptr<uint8_t>()), static_cast<size_t>(t.numel()));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || j.value("format", "") != kFormat) return Error::bad_input(path + ": not an rlflow agent checkpoint");
  return j;
}

Status load(const std::string& path, const Modules& modules, torch::optim::Optimizer* opt) {
  auto a = open(path);
  if (!a) return a.error();
  try {
    for (const auto& [name, module] : modules) {
      torch::serialize::InputArchive m;
      (*a)->read(name, m);
      module->load(m);
    }
    if (opt) {
      torch::serialize::InputArchive optim;
      (*a)->read("optimizer", optim);
      opt->load(optim);
      torch::Tensor rng;
      (*a)->read("torch_rng", rng);
      auto gen = at::detail::getDefaultCPUGenerator();
      gen.set_state(rng);
    }
  } catch (const std::exception& e) {
    return Error::bad_input(path + ": checkpoint does not fit this network (" + first_line(e.what(), 160) + ")");
  }
  return {};
}

Status open_log(std::ofstream& log, const std::string& path, bool resume, const std::string& key, int64_t upto) {
  if (path.empty()) return {};
  if (resume && std::filesystem::exists(path)) {
    auto text = read_file(path);
    if (!text) return text.error();
    std::string kept;
    std::istringstream is(*text);
    for (std::string line; std::getline(is, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains(key) || !j[key].is_number_integer()) continue;
      if (j[key].get<int64_t>() <= upto) kept += line + "\n";
    }
    if (kept.size() != text->size()) RLFLOW_TRY_STATUS(write_file_atomic(path, kept));
    log.open(path, std::ios::app);
  } else {
    log.open(path, std::ios::trunc);
  }
  if (!log) return Error::bad_input(path + ": cannot open the training log");
  return {};
}

}  // namespace rlflow::rl::checkpoint
