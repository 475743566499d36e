#include "attograd/layers/sublayer.h"

#include <cstdlib>
#include <memory>
#include <stdexcept>

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define AG_HAVE_CXXABI 1
#endif

namespace ag {

namespace {

// "ag::PositionwiseFeedForward" rather than "N2ag23PositionwiseFeedForwardE" where the ABI
// library can demangle (GCC, Clang); the raw name elsewhere.
std::string type_name(const std::type_info& type) {
#ifdef AG_HAVE_CXXABI
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                        std::free);
  if (status == 0 && readable) return readable.get();
#endif
  return type.name();
}

// "LayerNorm(8,) (ag::LayerNorm)": the layer's own name, and its C++ type when that says more.
std::string described(const Sublayer& layer) {
  const std::string name = layer.name(), type = type_name(typeid(layer));
  return name == type ? name : name + " (" + type + ")";
}

[[noreturn]] void throw_shape_changed(const std::string& who, const Sublayer& layer, const Variable& x,
                                      const Variable& y) {
  throw std::logic_error(who + ": " + described(layer) + " turned an input of shape " + x.shape().str() +
                         " into an output of shape " + y.shape().str() + "; a Sublayer must return its input's shape");
}

}  // namespace

Variable Sublayer::operator()(const Variable& x) {
  Variable y = forward(x);
  if (y.shape() != x.shape()) throw_shape_changed("Sublayer", *this, x, y);
  return y;
}

Variable apply_sublayer(Sublayer& layer, const Variable& x, const Module& owner, const char* slot) {
  Variable y = layer.forward(x);
  if (y.shape() != x.shape()) throw_shape_changed(owner.name() + ", slot " + slot, layer, x, y);
  return y;
}

void throw_sublayer_type_mismatch(const Module& owner, const char* slot, const Sublayer& held,
                                  const std::type_info& wanted) {
  throw std::logic_error(owner.name() + ": slot " + slot + " holds a " + described(held) + ", not a " +
                         type_name(wanted) + "; ask for the type its factory built, or use the Sublayer interface");
}

}  // namespace ag
