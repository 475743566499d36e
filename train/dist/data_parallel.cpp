#include "attograd/train/dist/data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "attograd/core/kernels.h"

namespace ag {

namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Shard shard_of(int64_t global_batch, int rank, int size, const char* what, bool batch_can_change) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::invalid_argument("data parallel: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                " is not a rank of the run");
  }
  if (global_batch < size || global_batch % size != 0) {
    // The process counts that split it (the first few), e.g. "1, 2, 4, 8 or 16".
    std::vector<int64_t> counts;
    for (int64_t d = 1; d <= global_batch && counts.size() < 8; ++d) {
      if (global_batch % d == 0) counts.push_back(d);
    }
    std::string list;
    for (size_t i = 0; i < counts.size(); ++i) {
      list += (i == 0 ? "" : i + 1 == counts.size() ? " or " : ", ") + std::to_string(counts[i]);
    }
    const int64_t multiple = (global_batch + size - 1) / size * size;
    throw std::invalid_argument(std::string("data parallel: ") + what + " " + std::to_string(global_batch) +
                                " (the global batch) cannot be split evenly over " + std::to_string(size) +
                                " processes; run with mpirun -np " + list +
                                (counts.back() < global_batch ? " (a count that divides it)" : "") +
                                (batch_can_change ? ", or make it a multiple of " + std::to_string(size) + " (e.g. " +
                                                        std::to_string(multiple) + ")"
                                                  : ""));
  }
  const int64_t rows = global_batch / size;
  return {.begin = rows * rank, .rows = rows};
}

Indices shard_rows(const Indices& x, const Shard& s) {
  if (x.shape.rank() < 1 || s.begin < 0 || s.rows < 0 || s.begin + s.rows > x.shape[0]) {
    throw std::invalid_argument("shard_rows: rows [" + std::to_string(s.begin) + ", " +
                                std::to_string(s.begin + s.rows) + ") of a batch of shape " + x.shape.str());
  }
  std::vector<int64_t> dims = x.shape.dims();
  const int64_t row = x.shape[0] > 0 ? x.shape.numel() / x.shape[0] : 0;
  dims[0] = s.rows;
  return Indices(Shape(dims), std::vector<int64_t>(x.data.begin() + s.begin * row,
                                                   x.data.begin() + (s.begin + s.rows) * row));
}

DataParallel::DataParallel(const NamedVariables& params, Communicator& comm, DataParallelOptions options)
    : params_(params), bucket_of_(params.size()), comm_(comm) {
  if (options.bucket_bytes < 1) {
    throw std::invalid_argument("DataParallel: bucket_bytes must be positive, got " +
                                std::to_string(options.bucket_bytes));
  }
  for (const auto& [name, p] : params_) {
    if (!p.defined() || !p.is_leaf() || !p.requires_grad() || !p.value().is_contiguous()) {
      throw std::invalid_argument("DataParallel: parameter '" + name +
                                  "' must be a contiguous leaf that requires grad");
    }
  }
  // Backward finishes the last layers first: buckets follow the reverse registration order.
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Variable& p = params_[k].second;
    const bool fresh = buckets_.empty() || bytes >= options.bucket_bytes ||
                       params_[buckets_.back().params.front()].second.dtype() != p.dtype();
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].second.numel());
    b.params.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += p.numel() * static_cast<int64_t>(dtype_size(p.dtype()));
  }
  for (Bucket& b : buckets_) {
    const Variable& last = params_[b.params.back()].second;
    b.flat = Tensor(Shape{b.offsets.back() + last.numel()}, last.dtype(), "DataParallel bucket");
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    params_[k].second.set_grad_ready_hook([this, k](const Variable&) { on_ready(k); });
  }
  stats_.buckets = static_cast<int64_t>(buckets_.size());
}

DataParallel::~DataParallel() {
  for (auto& [name, p] : params_) p.set_grad_ready_hook({});
}

void DataParallel::broadcast_parameters() {
  for (auto& [name, p] : params_) comm_.broadcast(p.mutable_value());
}

void DataParallel::on_ready(size_t param) {
  if (!in_backward_) return;  // a backward() not driven by this object: nothing to reduce
  Bucket& b = buckets_[bucket_of_[param]];
  if (--b.waiting == 0) {
    // Start every bucket that is complete, in index order.
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].waiting == 0) launch(buckets_[next_launch_++]);
  }
  poll();
}

void DataParallel::launch(Bucket& b) {
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Variable& p = params_[b.params[j]].second;
    Tensor part = b.flat.narrow(0, b.offsets[j], p.numel());
    if (p.grad().defined()) part.copy_(p.grad().contiguous().view(Shape{p.numel()}));
    else part.fill_(0.0);
  }
  b.started = Clock::now();
  if (in_backward_) ++stats_.started_during_backward;
  ++stats_.sums;
  b.pending = comm_.start_all_reduce_sum(b.flat);
  b.launched = true;
}

// Lets MPI move the sums in flight along, and notes when each arrived.
void DataParallel::poll() {
  for (size_t i = 0; i < next_launch_; ++i) {
    Bucket& b = buckets_[i];
    if (!b.has_arrived && b.pending.test()) {
      b.has_arrived = true;
      b.arrived = Clock::now();
    }
  }
}

void DataParallel::backward(const Variable& loss) {
  for (Bucket& b : buckets_) {
    b.waiting = static_cast<int64_t>(b.params.size());
    b.launched = false;
    b.has_arrived = false;
  }
  next_launch_ = 0;
  in_backward_ = true;
  const Clock::time_point t0 = Clock::now();
  try {
    loss.backward();
  } catch (...) {
    in_backward_ = false;
    throw;
  }
  in_backward_ = false;
  const Clock::time_point t1 = Clock::now();
  // Parameters the pass did not reach: their buckets start now, still in index order.
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  for (Bucket& b : buckets_) {
    b.pending.wait();
    if (!b.has_arrived) {
      b.has_arrived = true;
      b.arrived = Clock::now();
    }
  }
  const Clock::time_point t2 = Clock::now();

  // The share of [t0, t1] covered by some [started, arrived): buckets start in index order, so
  // a sweep over them in that order merges the intervals.
  double covered = 0;
  Clock::time_point reach = t0;
  for (const Bucket& b : buckets_) {
    const Clock::time_point from = std::max(b.started, reach), to = std::min(b.arrived, t1);
    if (to > from) covered += seconds(to - from);
    reach = std::max(reach, std::min(b.arrived, t1));
  }
  ++stats_.steps;
  stats_.backward_s += seconds(t1 - t0);
  stats_.in_flight_s += covered;
  stats_.exposed_s += seconds(t2 - t1);
  stats_.reduce_s += seconds(t2 - buckets_.front().started);

  // The average: sum / N, back into each gradient that this pass defined.
  const double n = static_cast<double>(comm_.size());
  for (Bucket& b : buckets_) {
    dispatch(b.flat.dtype(), [&]<typename T>(T) {
      T* f = b.flat.data<T>();
      const T divisor = static_cast<T>(n);
      for (int64_t i = 0; i < b.flat.numel(); ++i) f[i] /= divisor;
    });
    for (size_t j = 0; j < b.params.size(); ++j) {
      Variable& p = params_[b.params[j]].second;
      if (!p.grad().defined()) continue;
      p.set_grad(b.flat.narrow(0, b.offsets[j], p.numel()).view(p.shape()).clone());
    }
  }
}

double DataParallel::mean(double local) {
  std::vector<double> v{local};
  sum(v);
  return v[0] / static_cast<double>(comm_.size());
}

void DataParallel::sum(std::vector<double>& values) {
  if (values.empty()) return;
  Tensor t = from_vector(values, Shape{static_cast<int64_t>(values.size())}, DType::f64);
  comm_.all_reduce_sum(t);
  values = t.to_vector();
}

std::string DataParallel::report() const {
  const double steps = stats_.steps > 0 ? static_cast<double>(stats_.steps) : 1.0;
  char line[320];
  std::snprintf(line, sizeof line,
                "data parallel: %d processes, %lld gradient exchange%s of %lld bucket%s; during backward a sum was in "
                "flight %.0f%% of the time; after backward %.2f ms per update waited for the sums (backward %.2f ms "
                "per update)",
                comm_.size(), static_cast<long long>(stats_.steps), stats_.steps == 1 ? "" : "s",
                static_cast<long long>(stats_.buckets), stats_.buckets == 1 ? "" : "s", 100 * stats_.share(),
                1e3 * stats_.exposed_s / steps, 1e3 * stats_.backward_s / steps);
  return line;
}

}  // namespace ag
