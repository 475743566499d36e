// DataParallel: one model trained by the N ranks of a Communicator, each on its own contiguous
// shard of the global batch (PyTorch's DistributedDataParallel, on MPI).
//
//   DataParallel dp(model.named_parameters(), Communicator::world());
//   dp.broadcast_parameters();                      // rank 0's initial values everywhere
//   const Shard s = dp.shard(global_batch, "--batch");  // rows [s.begin, s.begin + s.rows)
//   loss = cross_entropy(model(rows of the batch), ...); // the mean over this rank's shard
//   dp.backward(loss);                              // grads = mean over ranks of the shard grads
//   ... clip, optimizer step: identical on every rank
//
// The gradient average: every parameter gets a grad-ready hook (autograd's
// Variable::set_grad_ready_hook). Parameters are grouped, in reverse registration order (the
// order backward finishes them), into buckets of about bucket_bytes. As soon as every gradient
// of a bucket is final, the bucket is copied into one flat buffer and its sum over ranks starts
// (non-blocking), while backward goes on with the layers below. Buckets start in index order on
// every rank (MPI needs the same order of collectives everywhere). After backward, the sums are
// waited for and each gradient becomes sum / N. Since the ranks' shards have equal size and the
// loss is a mean, that is the gradient of the mean over the global batch, as one process would
// compute it but for the order of the sum.
//
// A parameter the pass does not reach takes part with zeros and keeps an undefined gradient (the
// optimizer then skips it, as in one process). overlap() reports how much of the reductions'
// time backward hid.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "attograd/autograd/variable.h"
#include "attograd/core/indices.h"
#include "attograd/train/dist/communicator.h"

namespace ag {

struct DataParallelOptions {
  int64_t bucket_bytes = int64_t{2} << 20;  // a bucket closes once it holds at least this many bytes
};

// The rows of a global batch that one rank trains on.
struct Shard {
  int64_t begin = 0;
  int64_t rows = 0;
};

// Rank `rank` of `size`: rows [rank B/N, (rank + 1) B/N). B % N != 0 throws std::invalid_argument
// naming `what` (the flag or option of the batch), B and N, with advice: the process counts that
// divide B and, when `batch_can_change` (a fresh run; a resumed one keeps its checkpoint's batch,
// the trajectory depends on it), the nearest multiple of N. The split stays even: with uneven
// shards the average of the ranks' mean losses would no longer be the batch's mean.
Shard shard_of(int64_t global_batch, int rank, int size, const char* what, bool batch_can_change = true);
// Rows [s.begin, s.begin + s.rows) of a (B, ...) batch.
Indices shard_rows(const Indices& x, const Shard& s);

// How the reductions of the steps so far overlapped backward.
struct OverlapStats {
  int64_t steps = 0;          // backward() calls: one exchange of the gradients each
  int64_t buckets = 0;        // per step
  int64_t sums = 0;           // bucket sums started over the ranks, all steps together
  int64_t started_during_backward = 0;  // bucket sums started before backward had finished
  double backward_s = 0;      // wall time inside backward, summed over steps
  double in_flight_s = 0;     // of that, the time during which a bucket's sum was in flight
  double exposed_s = 0;       // time spent waiting for sums after backward had finished
  double reduce_s = 0;        // from each step's first start to its last sum's arrival
  // in_flight_s / backward_s: the share of backward that overlapped communication.
  double share() const { return backward_s > 0 ? in_flight_s / backward_s : 0; }
};

class DataParallel {
 public:
  // Installs a grad-ready hook on every parameter (std::invalid_argument if one is not a
  // contiguous f32/f64 leaf that requires grad); the destructor removes them. The parameters
  // and `comm` must outlive this object.
  DataParallel(const NamedVariables& params, Communicator& comm, DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }
  Shard shard(int64_t global_batch, const char* what) const { return shard_of(global_batch, rank(), size(), what); }

  // The generator step of update n on this rank: n * N + rank. Dropout masks are keyed by
  // (seed, step, call) and the element's index within this rank's tensor; with the same step on
  // every rank, the k-th row of every shard would be dropped alike. Distinct steps give each
  // rank its own masks (in one process, N = 1, it is n, as before). The masks of a run over N
  // processes are therefore not those of one process: runs agree with one process at dropout 0.
  uint64_t dropout_step(int64_t update) const {
    return static_cast<uint64_t>(update) * static_cast<uint64_t>(size()) + static_cast<uint64_t>(rank());
  }
  // Every parameter takes rank 0's value.
  void broadcast_parameters();
  // loss.backward() with the gradient average described above. Every rank must call it once per
  // update, with the same model (the same graph). Gradients already present before the call are
  // averaged along with what this pass adds (the trainers zero them first).
  void backward(const Variable& loss);
  // The mean over ranks of a per-rank value (each rank's loss on its shard: the global loss).
  double mean(double local);
  // Element-wise sums over ranks (e.g. evaluation counts), in place.
  void sum(std::vector<double>& values);

  const OverlapStats& overlap() const { return stats_; }
  // One line for the end of a run: processes, gradient exchanges (one per update), buckets, the
  // overlap share, the wait after backward.
  std::string report() const;
  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Bucket {
    std::vector<size_t> params;  // indices into params_, in the order of the flat buffer
    std::vector<int64_t> offsets;
    Tensor flat;                 // (numel of all its parameters), their dtype
    int64_t waiting = 0;         // gradients not yet final in this pass
    Communicator::Pending pending;
    Clock::time_point started, arrived;
    bool launched = false;
    bool has_arrived = false;
  };

  void on_ready(size_t param);
  void launch(Bucket& b);
  void poll();

  NamedVariables params_;
  std::vector<size_t> bucket_of_;  // per parameter
  std::vector<Bucket> buckets_;
  Communicator& comm_;
  size_t next_launch_ = 0;
  bool in_backward_ = false;
  OverlapStats stats_;
};

}  // namespace ag
