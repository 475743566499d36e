#include "attograd/layers/feed_forward.h"

#include <stdexcept>

namespace ag {

namespace {

const PositionwiseFeedForwardOptions& checked(const PositionwiseFeedForwardOptions& o) {
  if (o.d_model <= 0 || o.d_hidden <= 0) {
    throw std::invalid_argument("PositionwiseFeedForward: d_model and d_hidden must be positive, got d_model=" +
                                std::to_string(o.d_model) + " d_hidden=" + std::to_string(o.d_hidden));
  }
  return o;
}

}  // namespace

PositionwiseFeedForward::PositionwiseFeedForward(const PositionwiseFeedForwardOptions& options)
    : options_(checked(options)),
      linear1_(register_replaceable("linear1", std::make_unique<Linear>(options.d_model, options.d_hidden, options.bias))),
      dropout_(register_module("dropout", std::make_unique<Dropout>(options.dropout))),
      linear2_(register_replaceable("linear2", std::make_unique<Linear>(options.d_hidden, options.d_model, options.bias))) {}

Variable PositionwiseFeedForward::forward(const Variable& x) {
  if (x.dim() < 1 || x.shape()[-1] != options_.d_model) {
    throw std::invalid_argument("PositionwiseFeedForward: input of shape " + x.shape().str() +
                                " does not end in d_model=" + std::to_string(options_.d_model));
  }
  return linear2_->forward(dropout_(apply_activation(options_.activation, linear1_->forward(x))));
}

std::string PositionwiseFeedForward::name() const {
  return std::string("PositionwiseFeedForward(") + activation_name(options_.activation) + ")";
}

}  // namespace ag
