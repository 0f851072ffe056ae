#include "checkpoint.h"

#include <sstream>

#include "rlflow/util/file_io.h"

namespace rlflow::rl::checkpoint {

namespace {

std::string first_line(const std::string& s, size_t n) {
  auto line = s.substr(0, s.find('\n'));
  return line.size() > n ? line.substr(0, n) + "..." : line;
}

constexpr const char* kFormat = "rlflow-agent";

Expected<std::unique_ptr<torch::serialize::InputArchive>> open(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.error();
  auto archive = std::make_unique<torch::serialize::InputArchive>();
  try {
    std::istringstream is(*bytes);
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
  return save(path, Modules{{"model", net.get()}}, opt, m);
}

Status load(const std::string& path, nets::PolicyNet& net, torch::optim::Optimizer* opt) {
  return load(path, Modules{{"model", net.get()}}, opt);
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
  return write_file_atomic(path, os.str());
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

}  // namespace rlflow::rl::checkpoint
