// Helpers for the train/ tests: a scratch directory per test and small file utilities.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attograd/layers/module.h"
#include "attograd/train/trainer.h"
#include "support.h"

namespace ag::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base ? base : "/tmp") + "/attograd-train-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("TempDir: mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  // Names of the entries in the directory (to spot leftover temporary files).
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    return names;
  }

 private:
  std::string path_;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A safetensors file from a header (JSON text) and a data section, with a correct length prefix.
inline std::string craft(const std::string& header, const std::string& data = {}) {
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The loop's three optimizer choices on one model kind. `Run` builds a job and its trainer from
// (options, outputs, dropout) and holds `model` and `trainer`; `options_for` gives the run's
// options for one choice, `values_of` reads a model's parameters and `check_file` makes the
// kind's own checks on the saved checkpoint. Each choice trains, saves its own optimizer state
// and resumes bit for bit, and the three trajectories differ, so the choice is not ignored.
template <typename Run, typename OptionsFor, typename ValuesOf, typename CheckFile>
void check_every_optimizer_resumes_bit_exact(OptionsFor options_for, ValuesOf values_of, CheckFile check_file) {
  std::vector<std::vector<double>> finals;
  for (const char* name : {"sgd", "adam", "adamw"}) {
    BOOST_TEST_CONTEXT("optimizer " << name) {
      TempDir dir;
      const TrainerOptions o = options_for(parse_optimizer_kind(name));
      std::vector<double> straight_losses;
      Run straight(o, {.on_step = [&](int64_t, double loss) { straight_losses.push_back(loss); }}, 0.1);
      const char* expected = o.optimizer == OptimizerKind::sgd ? "SGD" : o.optimizer == OptimizerKind::adam ? "Adam" : "AdamW";
      BOOST_TEST(std::string(straight.trainer->optimizer().name()) == expected);
      straight.trainer->run();

      std::vector<double> losses;
      Run first(o, {}, 0.1);
      for (int i = 0; i < 7; ++i) losses.push_back(first.trainer->train_step().loss);
      first.trainer->save_checkpoint(dir.file("ckpt.safetensors"));
      const Checkpoint ck = Checkpoint::open(dir.file("ckpt.safetensors"));
      BOOST_TEST(ck.info().optimizer == expected);
      check_file(ck, name);

      manual_seed(999);
      Run second(o, {.on_step = [&](int64_t, double loss) { losses.push_back(loss); }}, 0.1);
      second.trainer->resume(ck);
      second.trainer->run();
      BOOST_TEST(losses == straight_losses, boost::test_tools::per_element());
      const std::vector<double> a = values_of(*straight.model), b = values_of(*second.model);
      BOOST_TEST(a == b, boost::test_tools::per_element());
      finals.push_back(a);
    }
  }
  BOOST_REQUIRE(finals.size() == 3u);
  BOOST_TEST((finals[0] != finals[1] && finals[1] != finals[2] && finals[0] != finals[2]));
}

// The language model tests' shared pieces: about 2,600 characters of English-like text with a
// vocabulary of 27 (enough for a split whose both parts hold several windows of 16), every
// parameter's values in state_dict order, and the loop's options (AdamW with a short warm-up and
// cosine decay, evaluations every 5 updates, one thread).
inline std::string lm_test_text() {
  const std::string verse =
      "the cat sat on the mat and the dog sat on the log\n"
      "a bird in the hand is worth two in the bush\n"
      "all that glitters is not gold\n";
  std::string text;
  for (int i = 0; i < 20; ++i) text += verse;
  return text;
}

inline std::vector<double> parameter_values(const Module& model) {
  std::vector<double> out;
  for (const auto& [name, t] : model.state_dict()) {
    const std::vector<double> v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

inline TrainerOptions lm_test_options(int64_t steps, OptimizerKind optimizer = OptimizerKind::adamw) {
  TrainerOptions o;
  o.optimizer = optimizer;
  o.lr = 1e-2;
  o.min_lr = 1e-3;
  o.weight_decay = 0.1;
  o.warmup_steps = 5;
  o.steps = steps;
  o.eval_every = 5;
  o.threads = 1;
  return o;
}

}  // namespace ag::testing
