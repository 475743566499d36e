// Building a model whose every parameter is about to be overwritten (weights read from a file)
// need not draw them. While a SkipInitGuard lives on this thread, the random factories of
// core/tensor.h (uniform, normal) return zeros and claim no stream from their generator, and the
// initialisers that draw in place (GPT's) leave their zeros: the generator is left as it was.
// The guards nest.
//
//   {
//     SkipInitGuard no_init;
//     model = std::make_unique<GPT>(options);   // nothing drawn
//   }
//   read_gpt_weights(*model, path);               // every parameter written
#pragma once

namespace ag {

class SkipInitGuard {
 public:
  SkipInitGuard();
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool previous_;
};

// True while a SkipInitGuard lives on this thread.
bool init_skipped();

}  // namespace ag
