// Sublayer: a Module with one input and one output of the same shape,
//   x: (B, T, d_model) -> (B, T, d_model)
// behind a virtual forward. It is the slot type of the library's blocks: TransformerBlock's
// feed-forward network and its norms are Sublayers, so a user's SwiGLU or RMSNorm can take
// their place (TransformerBlockOptions::make_ff / make_norm) without copying the block.
//
//   class RMSNorm : public Sublayer {
//    public:
//     explicit RMSNorm(int64_t d) : weight_(register_parameter("weight", ones({d}))) {}
//     Variable forward(const Variable& x) override { return rms_norm(x, weight_, 1e-6); }
//     std::string name() const override { return "RMSNorm"; }
//    private:
//     Variable& weight_;
//   };
//
// Module itself has no virtual forward on purpose (layers take masks, ids, flags); only the
// layers that fill a one-in, one-out slot derive from Sublayer. Contract of forward: the
// output has the input's shape and dtype, and train()/eval() change nothing but dropout.
// operator() checks the shape (a layer that breaks it would otherwise be broadcast silently
// in the residual sum around it); the blocks check it too, naming themselves and the slot.
#pragma once

#include <string>
#include <type_traits>
#include <typeinfo>

#include "attograd/layers/module.h"

namespace ag {

class Sublayer : public Module {
 public:
  // x: (..., d_model) -> same shape. A derived class that adds other overloads of forward
  // brings this one back into scope with `using Sublayer::forward;`.
  virtual Variable forward(const Variable& x) = 0;
  // forward(x), then std::logic_error naming the layer and both shapes if they differ.
  Variable operator()(const Variable& x);
};

// layer.forward(x) on behalf of `owner`'s slot `slot` ("ff", "norm1", ...); throws
// std::logic_error naming the owner, the slot, the layer and both shapes when the output's
// shape differs from x's.
Variable apply_sublayer(Sublayer& layer, const Variable& x, const Module& owner, const char* slot);

// The message thrown when a slot holds another type than the one asked for: names the owner,
// the slot and both types.
[[noreturn]] void throw_sublayer_type_mismatch(const Module& owner, const char* slot, const Sublayer& held,
                                               const std::type_info& wanted);

// `held` as an L, for the typed accessors of the blocks (ff_as<PositionwiseFeedForward>()):
// std::logic_error naming both types when the slot holds something else.
template <class L>
L& sublayer_as(Sublayer& held, const Module& owner, const char* slot) {
  static_assert(std::is_base_of_v<Sublayer, L>, "sublayer_as: L must derive from ag::Sublayer");
  if (L* typed = dynamic_cast<L*>(&held)) return *typed;
  throw_sublayer_type_mismatch(owner, slot, held, typeid(L));
}

}  // namespace ag
