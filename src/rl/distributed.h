#pragma once
// Internal to rl: data-parallel training across processes on libtorch's c10d (ProcessGroupGloo
// over a TCPStore rendezvous). The c10d and gloo headers stay in distributed.cpp; a build without
// gloo's headers (RLFLOW_HAVE_C10D off) still compiles, and connecting is then a clean error.
#include <memory>
#include <string>
#include <vector>

#include "rlflow/util/expected.h"
#include "torch_pch.h"

namespace rlflow::rl::dist {

struct Options {
  int world_size = 1;
  int rank = 0;
  std::string master = "127.0.0.1:29500";  // ADDR:PORT of rank 0's store
  double timeout_s = 300;                   // rendezvous and every collective
};

// "ADDR:PORT" -> its parts; a bad or missing port is an error naming `what`.
Expected<std::pair<std::string, uint16_t>> parse_master(const std::string& master, const std::string& what);
// Whether this build can connect (c10d with gloo compiled in).
bool available();

class Comm {
 public:
  // Joins the group: rank 0 serves the store at `master`, every rank connects to it.
  static Expected<std::unique_ptr<Comm>> connect(const Options& o);
  ~Comm();
  int rank() const { return rank_; }
  int size() const { return size_; }
  // In place: every rank's tensors summed, on every rank. Tensors must be float32 or float64, contiguous.
  Status allreduce_sum(torch::Tensor& t);
  // Every rank's [n_r, ...] rows, concatenated in rank order (n_r may differ between ranks).
  Expected<torch::Tensor> allgather_rows(const torch::Tensor& local);
  // Rank `root`'s values into every rank's `t`, in place.
  Status broadcast(torch::Tensor& t, int root = 0);

 private:
  struct Impl;
  Comm(std::unique_ptr<Impl> impl, int rank, int size);
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, size_ = 1;
};

// Gradients of `params` summed over ranks (flattened into one collective), then `extra` too, so
// one round trip carries a minibatch's gradients and its statistics. Parameters without a
// gradient contribute zeros.
Status allreduce_grads(Comm& comm, const std::vector<torch::Tensor>& params, torch::Tensor& extra);
// Rank 0's parameter values to every rank.
Status broadcast_params(Comm& comm, const std::vector<torch::Tensor>& params);

}  // namespace rlflow::rl::dist
