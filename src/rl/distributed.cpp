#include "distributed.h"

#include <chrono>
#include <cstdlib>
#include <exception>

#ifdef RLFLOW_HAVE_C10D
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace rlflow::rl::dist {

Expected<std::pair<std::string, uint16_t>> parse_master(const std::string& master, const std::string& what) {
  const auto colon = master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == master.size())
    return Error::bad_input(what + " '" + master + "': expected ADDR:PORT, e.g. 127.0.0.1:29500");
  const std::string port = master.substr(colon + 1);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (end == port.c_str() || *end != '\0' || p < 1 || p > 65535)
    return Error::bad_input(what + " '" + master + "': the port must be a number in 1..65535");
  return std::make_pair(master.substr(0, colon), static_cast<uint16_t>(p));
}

#ifdef RLFLOW_HAVE_C10D

bool available() { return true; }

struct Comm::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

namespace {

template <class F>
Status guarded(const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    // c10d's messages carry a C++ backtrace after the first line; keep the first line.
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    return Error::internal(std::string("distributed ") + what + " failed: " + msg);
  }
  return {};
}

}  // namespace

Expected<std::unique_ptr<Comm>> Comm::connect(const Options& o) {
  if (o.world_size < 1) return Error::bad_input("--world-size must be at least 1");
  if (o.rank < 0 || o.rank >= o.world_size)
    return Error::bad_input("--rank " + std::to_string(o.rank) + " is outside 0.." + std::to_string(o.world_size - 1));
  auto addr = parse_master(o.master, "--master");
  if (!addr) return addr.error();
  auto impl = std::make_unique<Impl>();
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1e3));
  auto st = guarded("rendezvous", [&] {
    c10d::TCPStoreOptions so;
    so.port = addr->second;
    so.isServer = o.rank == 0;
    so.numWorkers = static_cast<size_t>(o.world_size);
    so.waitWorkers = true;
    so.timeout = timeout;
    impl->store = c10::make_intrusive<c10d::TCPStore>(addr->first, so);
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    const bool loopback = addr->first == "127.0.0.1" || addr->first == "localhost";
    opts->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 1;
    impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, o.rank, o.world_size, opts);
  });
  if (!st.ok()) return st.error();
  return std::unique_ptr<Comm>(new Comm(std::move(impl), o.rank, o.world_size));
}

Status Comm::allreduce_sum(torch::Tensor& t) {
  if (size_ == 1) return {};
  return guarded("all-reduce", [&] {
    std::vector<at::Tensor> v{t};
    impl_->pg->allreduce(v)->wait();
  });
}

Expected<torch::Tensor> Comm::allgather_rows(const torch::Tensor& local) {
  if (size_ == 1) return local.clone();
  torch::Tensor out;
  auto st = guarded("all-gather", [&] {
    // Row counts first, then every rank's rows padded to the longest.
    std::vector<at::Tensor> n_in{torch::full({1}, local.size(0), torch::kInt64)};
    std::vector<std::vector<at::Tensor>> n_out(1);
    for (int r = 0; r < size_; ++r) n_out[0].push_back(torch::zeros({1}, torch::kInt64));
    impl_->pg->allgather(n_out, n_in)->wait();
    int64_t most = 0;
    for (const auto& n : n_out[0]) most = std::max(most, n.item<int64_t>());
    auto shape = local.sizes().vec();
    shape[0] = most;
    auto padded = torch::zeros(shape, local.options());
    if (local.size(0) > 0) padded.narrow(0, 0, local.size(0)).copy_(local);
    std::vector<at::Tensor> in{padded};
    std::vector<std::vector<at::Tensor>> rows(1);
    for (int r = 0; r < size_; ++r) rows[0].push_back(torch::zeros(shape, local.options()));
    impl_->pg->allgather(rows, in)->wait();
    std::vector<torch::Tensor> parts;
    for (int r = 0; r < size_; ++r) parts.push_back(rows[0][static_cast<size_t>(r)].narrow(0, 0, n_out[0][static_cast<size_t>(r)].item<int64_t>()));
    out = torch::cat(parts, 0);
  });
  if (!st.ok()) return st.error();
  return out;
}

Status Comm::broadcast(torch::Tensor& t, int root) {
  if (size_ == 1) return {};
  return guarded("broadcast", [&] {
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    impl_->pg->broadcast(v, bo)->wait();
  });
}

#else  // no c10d/gloo in this build

bool available() { return false; }

struct Comm::Impl {};

Expected<std::unique_ptr<Comm>> Comm::connect(const Options& o) {
  if (o.world_size == 1) return std::unique_ptr<Comm>(new Comm(std::make_unique<Impl>(), 0, 1));
  return Error::unsupported("this rlflow was built without c10d's gloo backend (gloo headers not found at configure "
                            "time), so --world-size > 1 is not available");
}
Status Comm::allreduce_sum(torch::Tensor&) { return {}; }
Expected<torch::Tensor> Comm::allgather_rows(const torch::Tensor& local) { return local.clone(); }
Status Comm::broadcast(torch::Tensor&, int) { return {}; }

#endif

Comm::Comm(std::unique_ptr<Impl> impl, int rank, int size) : impl_(std::move(impl)), rank_(rank), size_(size) {}
Comm::~Comm() = default;

Status allreduce_grads(Comm& comm, const std::vector<torch::Tensor>& params, torch::Tensor& extra) {
  if (comm.size() == 1) return {};
  std::vector<torch::Tensor> flat;
  for (const auto& p : params) flat.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  flat.push_back(extra.reshape({-1}).to(torch::kFloat));
  auto buf = torch::cat(flat).contiguous();
  RLFLOW_TRY_STATUS(comm.allreduce_sum(buf));
  int64_t at = 0;
  for (const auto& p : params) {
    auto part = buf.narrow(0, at, p.numel()).view(p.sizes());
    if (p.grad().defined())
      p.mutable_grad().copy_(part);
    else
      p.mutable_grad() = part.clone();
    at += p.numel();
  }
  extra.copy_(buf.narrow(0, at, extra.numel()).view(extra.sizes()).to(extra.scalar_type()));
  return {};
}

Status broadcast_params(Comm& comm, const std::vector<torch::Tensor>& params) {
  if (comm.size() == 1) return {};
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> flat;
  for (const auto& p : params) flat.push_back(p.detach().reshape({-1}));
  auto buf = torch::cat(flat).contiguous();
  RLFLOW_TRY_STATUS(comm.broadcast(buf, 0));
  int64_t at = 0;
  for (const auto& p : params) {
    p.detach().copy_(buf.narrow(0, at, p.numel()).view(p.sizes()));
    at += p.numel();
  }
  return {};
}

}  // namespace rlflow::rl::dist
