// Data-parallel training across real ranks, run by tests/mpi/run_dp_checks.sh.
//   dp_check                               under mpirun -np 2: DataParallel on a SequenceModel in
//                                          float64 and float32 against one process training the
//                                          whole batch (rank 0 trains that reference itself), and
//                                          the overlap of the gradient sums with backward
//   dp_check --compare-params A B RTOL     two checkpoints: every parameter tensor agrees, each
//                                          element within RTOL times the tensor's largest |value|
//                                          (RTOL 0: bit for bit, optimizer state included);
//                                          prints the largest difference
//   dp_check --compare-params A B RTOL SUFFIX   the same, but tensors whose name ends in SUFFIX
//                                          are left out (named in the output)
//   dp_check --compare-metrics A B RTOL    two metrics logs: same steps; losses, accuracies, lr
//                                          and gradient norms within RTOL relative (not the times)
//   dp_check --compare-metrics A B RTOL ACC   the same, but the two accuracies may also differ
//                                          by up to ACC (a count of held-out predictions over its
//                                          total: a long float drift may flip one of them)
// Exit 0 when everything holds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "attograd/core/rng.h"
#include "attograd/models/toy/sequence_model.h"
#include "attograd/models/toy/sequence_tasks.h"
#include "attograd/train/clip.h"
#include "attograd/train/dist/communicator.h"
#include "attograd/train/dist/data_parallel.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/losses.h"
#include "attograd/train/optim.h"
#include "attograd/train/report/metrics_log.h"

namespace {

using namespace ag;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", Communicator::world().rank(), what.c_str());
    ++failures;
  }
}

// The largest |a - b| over a tensor, relative to the tensor's largest |b|.
double relative_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// SGD with momentum, not Adam: Adam divides each gradient element by its running RMS, so where
// the exact gradient is 0 and the computed one is rounding noise (the attention key projection's
// bias: softmax ignores a shift shared by all keys) it steps by about lr whatever the noise, and
// two sums in a different order drift apart by lr, not by rounding. SGD's step is linear in the
// gradient: what differs is the order of the gradient sum and nothing else.
struct Run {
  SequenceModel model;
  SGD optimizer;
  Run(const SequenceModelOptions& m, DType dtype, uint64_t seed)
      : model((manual_seed(seed), m)), optimizer(init(dtype), {.lr = 0.05, .momentum = 0.9}) {}
  NamedVariables init(DType dtype) {
    model.to(dtype);
    return model.named_parameters();
  }
};

// 20 updates with clipping: `comm` null trains the whole batch in this process; otherwise
// each rank trains its shard through DataParallel.
void train(Run& run, const SequenceTask& task, Communicator* comm, OverlapStats* overlap, int64_t bucket_bytes) {
  const NamedVariables params = run.model.named_parameters();
  std::unique_ptr<DataParallel> dp;
  Shard shard{.begin = 0, .rows = task.options().batch_size};
  if (comm != nullptr) {
    dp = std::make_unique<DataParallel>(params, *comm, DataParallelOptions{.bucket_bytes = bucket_bytes});
    dp->broadcast_parameters();
    shard = dp->shard(task.options().batch_size, "batch");
  }
  for (uint64_t step = 0; step < 20; ++step) {
    const SequenceBatch b = task.train_batch(step);
    run.model.train();
    run.optimizer.zero_grad();
    Variable logits = run.model(shard_rows(b.inputs, shard));
    const Variable loss = cross_entropy(logits, shard_rows(b.targets, shard));
    if (dp) dp->backward(loss);
    else loss.backward();
    clip_grad_norm(params, 1.0);
    run.optimizer.step();
  }
  if (dp && overlap != nullptr) *overlap = dp->overlap();
}

void check_equivalence(Communicator& comm, DType dtype, double rtol) {
  const SequenceModelOptions m{.vocab = 12, .max_len = 10, .d_model = 32, .n_head = 4, .d_ff = 64, .n_layers = 2,
                               .dropout = 0.0};
  const SequenceTask task({.kind = SequenceTaskKind::sort, .vocab_size = 12, .seq_len = 10, .batch_size = 8, .seed = 3});
  Run parallel(m, dtype, 7);
  OverlapStats overlap;
  train(parallel, task, &comm, &overlap, 4096);  // small buckets: several per step
  const std::string what = std::string(dtype_name(dtype)) + ": ";
  expect(overlap.buckets > 1, what + "more than one bucket");
  expect(overlap.started_during_backward > 0, what + "bucket sums start while backward still runs");

  // Every rank must hold the very same parameters: compare each with rank 0's.
  for (const auto& [name, p] : parallel.model.named_parameters()) {
    Tensor root = p.value().clone();
    comm.broadcast(root);
    expect(relative_difference(p.value(), root) == 0, what + name + " differs between the ranks");
  }
  if (!comm.is_root()) return;
  Run alone(m, dtype, 7);
  train(alone, task, nullptr, nullptr, 0);
  double worst = 0;
  std::string worst_name;
  const NamedVariables a = parallel.model.named_parameters(), b = alone.model.named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = relative_difference(a[i].second.value(), b[i].second.value());
    if (std::getenv("DP_CHECK_VERBOSE")) std::printf("  %-40s %.3g\n", a[i].first.c_str(), d);
    if (d > worst) worst = d, worst_name = a[i].first;
  }
  std::printf("%s2 ranks vs 1 process after 20 updates: largest relative difference %.3g (%s), tolerance %.0e\n",
              what.c_str(), worst, worst_name.c_str(), rtol);
  expect(worst <= rtol, what + "2 ranks and 1 process differ by " + std::to_string(worst));
  expect(worst > 0 || dtype == DType::f64, what + "no difference at all: was the batch really split?");
  std::printf("%soverlap: %lld buckets, %lld started during backward over 20 updates, in flight %.0f%% of backward\n",
              what.c_str(), static_cast<long long>(overlap.buckets), static_cast<long long>(overlap.started_during_backward),
              100 * overlap.share());
}

int compare_params(const char* a_path, const char* b_path, double rtol, const std::string& except = {}) {
  const SafetensorsFile a = load_safetensors(a_path), b = load_safetensors(b_path);
  double worst = 0;
  std::string worst_name;
  int64_t compared = 0;
  for (const SafetensorsEntry& e : a.entries) {
    // With a tolerance, the parameters; bit for bit (RTOL 0), the optimizer state too.
    if (!e.tensor.defined() || (rtol > 0 && e.name.rfind("optimizer/", 0) == 0)) continue;
    if (!except.empty() && e.name.size() >= except.size() &&
        e.name.compare(e.name.size() - except.size(), except.size(), except) == 0) {
      std::printf("  %s left out\n", e.name.c_str());
      continue;
    }
    const auto other = std::find_if(b.entries.begin(), b.entries.end(), [&](const SafetensorsEntry& f) { return f.name == e.name; });
    if (other == b.entries.end() || !other->tensor.defined() || other->tensor.shape() != e.tensor.shape()) {
      std::fprintf(stderr, "FAILED: %s: '%s' is missing or has another shape in %s\n", a_path, e.name.c_str(), b_path);
      return 1;
    }
    const double d = relative_difference(e.tensor, other->tensor);
    if (std::getenv("DP_CHECK_VERBOSE")) std::printf("  %-40s %.3g\n", e.name.c_str(), d);
    if (d > worst || compared == 0) {
      worst = std::max(worst, d);
      worst_name = e.name;
    }
    ++compared;
  }
  std::printf("%lld tensors compared, largest relative difference %.3g (%s), tolerance %.0e\n",
              static_cast<long long>(compared), worst, worst_name.c_str(), rtol);
  if (compared == 0 || worst > rtol) {
    std::fprintf(stderr, "FAILED: %s and %s differ by %.3g > %.0e\n", a_path, b_path, worst, rtol);
    return 1;
  }
  return 0;
}

bool close(double a, double b, double rtol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::abs(a - b) <= rtol * std::max(std::abs(a), std::abs(b));
}

int compare_metrics(const char* a_path, const char* b_path, double rtol, double acc_slack = 0) {
  const std::vector<MetricsRow> a = read_metrics_log(a_path), b = read_metrics_log(b_path);
  if (a.size() != b.size() || a.empty()) {
    std::fprintf(stderr, "FAILED: %s has %zu rows, %s %zu\n", a_path, a.size(), b_path, b.size());
    return 1;
  }
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x[] = {a[i].train_loss, a[i].eval_loss, a[i].token_acc, a[i].seq_acc, a[i].lr, a[i].grad_norm};
    const double y[] = {b[i].train_loss, b[i].eval_loss, b[i].token_acc, b[i].seq_acc, b[i].lr, b[i].grad_norm};
    for (size_t k = 0; k < 6; ++k) {
      const bool accuracy = k == 2 || k == 3;
      const bool within_slack = accuracy && std::abs(x[k] - y[k]) <= acc_slack;
      if (a[i].step != b[i].step || !(close(x[k], y[k], rtol) || within_slack)) {
        std::fprintf(stderr, "FAILED: row %zu (step %lld): value %zu is %.17g in %s, %.17g in %s\n", i,
                     static_cast<long long>(a[i].step), k, x[k], a_path, y[k], b_path);
        return 1;
      }
      if (!within_slack && !std::isnan(x[k]) && std::max(std::abs(x[k]), std::abs(y[k])) > 0) {
        worst = std::max(worst, std::abs(x[k] - y[k]) / std::max(std::abs(x[k]), std::abs(y[k])));
      }
    }
  }
  std::printf("%zu metrics rows agree, largest relative difference %.3g, tolerance %.0e\n", a.size(), worst, rtol);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::strcmp(argv[1], "--compare-params") == 0) return compare_params(argv[2], argv[3], std::atof(argv[4]));
    if (argc == 6 && std::strcmp(argv[1], "--compare-params") == 0) {
      return compare_params(argv[2], argv[3], std::atof(argv[4]), argv[5]);
    }
    if (argc == 5 && std::strcmp(argv[1], "--compare-metrics") == 0) return compare_metrics(argv[2], argv[3], std::atof(argv[4]));
    if (argc == 6 && std::strcmp(argv[1], "--compare-metrics") == 0) {
      return compare_metrics(argv[2], argv[3], std::atof(argv[4]), std::atof(argv[5]));
    }
    Communicator& comm = Communicator::world();
    if (comm.size() < 2) {
      std::fprintf(stderr, "dp_check: run it under mpirun -np 2 or more\n");
      return 1;
    }
    check_equivalence(comm, DType::f64, 1e-12);
    check_equivalence(comm, DType::f32, 1e-5);
  } catch (const std::exception& e) {
    Communicator::world().abort(std::string("dp_check: ") + e.what());
  }
  std::printf("rank %d: %s\n", Communicator::world().rank(), failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
