// recompute: run a region without its graph, run it again during backward (see recompute.h).
#include "attograd/autograd/recompute.h"

#include <stdexcept>
#include <string>

#include "attograd/autograd/grad_mode.h"
#include "attograd/core/rng.h"

namespace ag {

namespace {

// What the backward of a region keeps from its forward: each input's value (and, for a leaf,
// the leaf itself, which the second run reads as itself).
struct SavedInput {
  Tensor value;
  Variable leaf;  // defined for an input that is a leaf
};

}  // namespace

Variable recompute(const char* name, RecomputeFn fn, const std::vector<Variable>& inputs,
                   const std::vector<Variable>& leaves) {
  if (!fn) throw std::invalid_argument(std::string("recompute (") + name + "): the region's function is empty");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      throw std::invalid_argument(std::string("recompute (") + name + "): input " + std::to_string(i) +
                                  " is undefined");
    }
  }
  std::vector<Variable> read = inputs;
  read.insert(read.end(), leaves.begin(), leaves.end());
  if (!any_requires_grad(read)) return fn(inputs);

  const GeneratorState randomness = default_generator().state();
  Variable out;
  {
    NoGradGuard no_graph;
    out = fn(inputs);
  }
  if (!out.defined()) {
    throw std::logic_error(std::string("recompute (") + name + "): the region returned an undefined variable");
  }
  std::vector<SavedInput> saved(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    saved[i].value = inputs[i].value();
    if (inputs[i].is_leaf()) saved[i].leaf = inputs[i];
  }
  const std::string region = name;
  // Edges: the inputs first (an op's result gets its gradient through the sink), then the
  // leaves (they receive theirs in place; the edge makes their hooks wait for this node).
  return make_result(name, out.value(), read,
                     [fn = std::move(fn), saved = std::move(saved), randomness, region](const Tensor& g, GradSink& grads) {
                       std::vector<Variable> again(saved.size());
                       for (size_t i = 0; i < saved.size(); ++i) {
                         if (saved[i].leaf.defined()) {
                           again[i] = saved[i].leaf;
                           continue;
                         }
                         again[i] = Variable(saved[i].value, grads.wants(i));
                         if (Tensor gathered = grads.take_gathered(i); gathered.defined()) {
                           again[i].set_grad(std::move(gathered));
                         }
                       }
                       Variable y;
                       {
                         GeneratorStateGuard restore;
                         default_generator().set_state(randomness);
                         GradModeGuard record(true);  // whatever the caller of backward() had
                         y = fn(again);
                       }
                       if (!y.defined() || y.shape() != g.shape() || y.dtype() != g.dtype()) {
                         throw std::logic_error(
                             "recompute (" + region + "): the second run returned " +
                             (y.defined() ? y.shape().str() + " " + dtype_name(y.dtype()) : std::string("nothing")) +
                             " where the first returned " + g.shape().str() + " " + dtype_name(g.dtype()) +
                             ": the region must compute the same thing every time");
                       }
                       if (y.requires_grad()) run_backward({y}, {g}, /*retain_graph=*/false, /*run_hooks=*/false);
                       for (size_t i = 0; i < saved.size(); ++i) {
                         if (saved[i].leaf.defined() || !grads.wants(i)) continue;
                         if (again[i].grad().defined()) grads.add(i, std::move(again[i].mutable_grad()));
                       }
                     });
}

}  // namespace ag
