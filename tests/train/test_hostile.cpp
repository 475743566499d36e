// What a hostile or clumsy user can hand the loaders and the trainer: special files, huge or
// duplicated header keys, headers that promise more than the file holds, flipped or moved bytes,
// impossible values and counters, settings beyond the command line's limits, runs that diverge,
// outputs that would destroy other files. Each case is refused with a message that names the
// file (or option) and what is wrong, and changes nothing.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "attograd/autograd/grad_mode.h"
#include "attograd/models/gpt/gpt_memory.h"
#include "attograd/models/seq2seq/seq2seq_memory.h"
#include "attograd/models/toy/sequence_job.h"
#include "attograd/models/toy/sequence_memory.h"
#include "attograd/models/toy/sequence_options.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/checkpoint_metadata.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/outputs.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/trainer.h"
#include "support.h"
#include "train_support.h"

namespace ag::testing {
namespace {


// The message of the std::runtime_error that `load` throws (empty if it does not throw).
template <typename Load>
std::string error_of(Load load) {
  try {
    load();
  } catch (const std::runtime_error& e) {
    return e.what();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

#define AG_CHECK_MESSAGE_HAS(message, ...)                                                           \
  do {                                                                                               \
    const std::string ag_m = (message);                                                              \
    BOOST_TEST(!ag_m.empty(), "no error was raised");                                                \
    for (const char* ag_part : {__VA_ARGS__}) {                                                      \
      BOOST_TEST(ag_m.find(ag_part) != std::string::npos, "'" << ag_m << "' lacks '" << ag_part << "'"); \
    }                                                                                                \
  } while (0)

SequenceTaskOptions tiny_task() { return {.kind = SequenceTaskKind::reverse, .vocab_size = 6, .seq_len = 6, .batch_size = 8, .seed = 5}; }
SequenceModelOptions tiny_model() {
  return {.vocab = 6, .max_len = 6, .d_model = 8, .n_head = 2, .d_ff = 16, .n_layers = 1};
}
TrainerOptions tiny_trainer(int64_t steps) {
  return {.lr = 3e-3, .warmup_steps = 1, .steps = steps, .eval_every = 5, .target_seq_acc = 2.0};
}
// Held-out sequences per evaluation (the job's since the one loop; TrainerOptions' before).
constexpr int64_t kEvalSequences = 16;

// A real checkpoint of a sequence tagger's run after `steps` updates.
void write_run_checkpoint(const std::string& path, int64_t steps = 3, int64_t budget = 20) {
  manual_seed(7);
  SequenceModel model(tiny_model());
  SequenceJob job(model, tiny_task(), kEvalSequences);
  Trainer trainer(job, tiny_trainer(budget));
  for (int64_t i = 0; i < steps; ++i) trainer.train_step();
  trainer.save_checkpoint(path);
}

void edit_checkpoint(const std::string& path, const std::function<void(SafetensorsFile&)>& edit) {
  SafetensorsFile f = load_safetensors(path);
  edit(f);
  save_safetensors(path, f);
}

// What train_sequence --resume rebuilds a run from, read from the one opened Checkpoint (as
// read_checkpoint_config did before the one loop): the kind, then every entry checked, in the
// order model, task, trainer, loop. std::runtime_error naming the file otherwise.
struct RunConfig {
  SequenceModelOptions model;
  SequenceTaskOptions task;
  TrainerOptions trainer;
  int64_t step = 0;
};
RunConfig read_run_config(const Checkpoint& ck) {
  require_model_kind(ck, "sequence");
  RunConfig c;
  c.model = parse_entry(ck, "model", sequence_model_options_from_json);
  c.task = parse_entry(ck, "task", sequence_task_options_from_json);
  c.trainer = resumed_trainer_options(ck, {});
  c.step = checkpoint_step(ck);
  return c;
}
RunConfig read_run_config(const std::string& path) { return read_run_config(Checkpoint::open(path)); }

// Resumes `path` into a fresh trainer built from the file's own configuration.
void resume_from(const std::string& path) {
  const Checkpoint ck = Checkpoint::open(path);
  const RunConfig c = read_run_config(ck);
  SequenceModel model(c.model);
  SequenceJob job(model, c.task, kEvalSequences);
  Trainer trainer(job, c.trainer);
  trainer.resume(ck);
}

SafetensorsEntry& entry(SafetensorsFile& f, const std::string& name) {
  for (SafetensorsEntry& e : f.entries) {
    if (e.name == name) return e;
  }
  throw std::logic_error("no entry " + name);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile_files)

BOOST_AUTO_TEST_CASE(crc32c_matches_the_standard_check_value) {
  BOOST_TEST(crc32c("123456789", 9) == 0xE3069283u);
  BOOST_TEST(crc32c("", 0) == 0u);
  // Continuing over a second block equals one pass over both.
  const std::string text = "attograd checkpoints are checked tensor by tensor";
  BOOST_TEST(crc32c(text.data() + 11, text.size() - 11, crc32c(text.data(), 11)) == crc32c(text.data(), text.size()));
}

BOOST_AUTO_TEST_CASE(special_files_are_refused_without_blocking) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO with no writer would block forever; the reader must not even wait.
  AG_CHECK_MESSAGE_HAS(error_of([&] { load_safetensors(fifo); }), "pipe", "FIFO", "not a regular file");
  AG_CHECK_MESSAGE_HAS(error_of([&] { load_safetensors("/dev/zero"); }), "/dev/zero", "character device");
  AG_CHECK_MESSAGE_HAS(error_of([&] { load_safetensors(dir.path()); }), "directory");
  AG_CHECK_MESSAGE_HAS(error_of([&] { read_run_config(fifo); }), "FIFO");
}

BOOST_AUTO_TEST_CASE(a_header_with_many_keys_parses_and_a_late_duplicate_is_found) {
  // 300,000 metadata keys (a few MB of header): a quadratic duplicate check needs minutes here.
  std::string meta = "{";
  for (int i = 0; i < 300000; ++i) meta += "\"k" + std::to_string(i) + "\":\"v\",";
  const std::string good = craft("{\"__metadata__\":" + meta + "\"last\":\"v\"}}");
  TempDir dir;
  spit(dir.file("many.safetensors"), good);
  BOOST_TEST(load_safetensors(dir.file("many.safetensors")).metadata.size() == 300001u);
  spit(dir.file("dup.safetensors"), craft("{\"__metadata__\":" + meta + "\"k299999\":\"v\"}}"));
  AG_CHECK_MESSAGE_HAS(error_of([&] { load_safetensors(dir.file("dup.safetensors")); }), "duplicate key", "k299999");
}

BOOST_AUTO_TEST_CASE(a_header_that_claims_a_huge_tensor_is_refused_before_allocating) {
  // 2^40 floats (4 TiB) claimed by a file of a few hundred bytes: an allocation first would
  // throw a bare std::bad_alloc (or take the machine's memory).
  const std::string header = R"({"w":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]}})";
  const std::string bytes = craft(header, std::string(64, '\0'));
  std::string message;
  try {
    parse_safetensors(bytes, "huge.safetensors");
  } catch (const std::runtime_error& e) {
    message = e.what();
  }  // a std::bad_alloc escapes and fails the test
  AG_CHECK_MESSAGE_HAS(message, "huge.safetensors", "'w'", "data truncated", "4398046511104");
}

BOOST_AUTO_TEST_CASE(a_flipped_bit_is_reported_with_the_tensor_name) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  write_run_checkpoint(path);
  std::string bytes = slurp(path);
  // The last byte of the file belongs to the last tensor of the data section.
  bytes.back() = static_cast<char>(bytes.back() ^ 0x10);
  spit(path, bytes);
  const SafetensorsFile untouched = parse_safetensors(craft("{}"), "empty");
  BOOST_TEST(untouched.entries.empty());
  AG_CHECK_MESSAGE_HAS(error_of([&] { resume_from(path); }), path.c_str(), "CRC-32C", "optimizer/");
}

BOOST_AUTO_TEST_CASE(two_same_size_tensors_with_swapped_offsets_are_caught) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  write_run_checkpoint(path);
  std::string bytes = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  Json header = parse_json(std::string_view(bytes).substr(8, n));
  // Swap the byte ranges of the two LayerNorm weights of the block (same shape): the header
  // stays valid, only the checksums can tell.
  const std::string a = "encoder.blocks.0.norm1.weight", b = "encoder.blocks.0.norm2.weight";
  BOOST_REQUIRE(header.contains(a) && header.contains(b));
  std::swap(header[a]["data_offsets"], header[b]["data_offsets"]);
  std::string text = header.dump();
  text.resize(n, ' ');  // same length as before: the data section does not move
  BOOST_REQUIRE(text.size() == n);
  spit(path, bytes.substr(0, 8) + text + bytes.substr(8 + n));
  AG_CHECK_MESSAGE_HAS(error_of([&] { load_safetensors(path); }), "CRC-32C", "norm");
}

BOOST_AUTO_TEST_CASE(the_checksum_key_is_reserved_and_version_two_needs_checksums) {
  SafetensorsFile f;
  f.add("x", zeros({2}));
  f.metadata["crc32c"] = "{}";
  TempDir dir;
  AG_CHECK_THROWS_WITH(save_safetensors(dir.file("x.safetensors"), f), std::invalid_argument, "crc32c", "writer");

  // A version 2 checkpoint whose checksums were stripped (by a tool that rewrote the header).
  const std::string path = dir.file("ck.safetensors");
  write_run_checkpoint(path);
  std::string bytes = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  Json header = parse_json(std::string_view(bytes).substr(8, n));
  header["__metadata__"].erase("crc32c");
  std::string text = header.dump();
  text.resize(n, ' ');
  spit(path, bytes.substr(0, 8) + text + bytes.substr(8 + n));
  AG_CHECK_MESSAGE_HAS(error_of([&] { resume_from(path); }), path.c_str(), "no 'crc32c'", "version 3");
}

// The metadata's checksums removed after a value was edited: the file would pass for one written
// before the metadata was checksummed. Only a version 2 file may lack them.
BOOST_AUTO_TEST_CASE(a_current_checkpoint_without_metadata_checksums_is_refused) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  write_run_checkpoint(path);
  const auto strip_metadata_sums = [&](const std::string& version) {
    std::string bytes = slurp(path);
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    Json header = parse_json(std::string_view(bytes).substr(8, n));
    Json sums = parse_json(header["__metadata__"]["crc32c"].get<std::string>());
    BOOST_REQUIRE(sums.contains("__metadata__"));
    sums.erase("__metadata__");
    header["__metadata__"]["crc32c"] = sums.dump();
    header["__metadata__"]["rng_seed"] = "7";  // the edit nothing checks any more
    header["__metadata__"]["format_version"] = version;
    std::string text = header.dump();
    BOOST_REQUIRE(text.size() <= n);
    text.resize(n, ' ');
    spit(path, bytes.substr(0, 8) + text + bytes.substr(8 + n));
  };
  strip_metadata_sums(std::to_string(kCheckpointFormatVersion));
  AG_CHECK_MESSAGE_HAS(error_of([&] { resume_from(path); }), path.c_str(), "no checksums of the metadata values",
                       "version 3");
  // Written as version 2 was before its metadata was checksummed, the same file loads as it is.
  write_run_checkpoint(path);
  strip_metadata_sums("2");
  resume_from(path);
  BOOST_TEST(read_checkpoint_info(path).format_version == 2);
  BOOST_TEST(read_checkpoint_info(path).rng_state.seed == 7u);
}

BOOST_AUTO_TEST_CASE(a_version_one_checkpoint_still_loads) {
  TempDir dir;
  const std::string path = dir.file("v1.safetensors");
  write_run_checkpoint(path);
  edit_checkpoint(path, [](SafetensorsFile& f) {
    f.metadata["format_version"] = "1";
    f.metadata.erase("optimizer_state_params");
  });
  resume_from(path);  // throws if version 1 were refused
  BOOST_TEST(read_checkpoint_info(path).format_version == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(checkpoint_values)

BOOST_AUTO_TEST_CASE(non_finite_and_absurd_weights_are_named_with_their_index) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity(), 1e30}) {
    write_run_checkpoint(path);
    edit_checkpoint(path, [&](SafetensorsFile& f) { entry(f, "head.weight").tensor.set({2, 3}, bad); });
    AG_CHECK_MESSAGE_HAS(error_of([&] { resume_from(path); }), path.c_str(), "'head.weight'", "(2, 3)");
  }
}

BOOST_AUTO_TEST_CASE(bad_adam_state_is_refused) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  const std::string sq = "optimizer/head.bias/exp_avg_sq";
  for (const double bad : {-1.0, std::nan("")}) {
    write_run_checkpoint(path);
    edit_checkpoint(path, [&](SafetensorsFile& f) { entry(f, sq).tensor.set({4}, bad); });
    AG_CHECK_MESSAGE_HAS(error_of([&] { resume_from(path); }), path.c_str(), "'head.bias'", "exp_avg_sq", "(4,)");
  }
  // A step count that would overflow on the next update.
  write_run_checkpoint(path);
  edit_checkpoint(path, [](SafetensorsFile& f) {
    entry(f, "optimizer/head.bias/step").indices.data[0] = std::numeric_limits<int64_t>::max();
  });
  AG_CHECK_MESSAGE_HAS(error_of([&] { resume_from(path); }), "'head.bias'", "step 9223372036854775807", "outside");
}

// A sequence checkpoint whose "model_kind" was edited to another kind is refused by the loop
// itself (not only by a program's config reading), naming the file and both kinds, and the
// trainer is left as it was.
BOOST_AUTO_TEST_CASE(an_edited_model_kind_is_refused_by_resume_naming_both_kinds) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  write_run_checkpoint(path);
  edit_checkpoint(path, [](SafetensorsFile& f) { f.metadata["model_kind"] = "gpt"; });
  manual_seed(7);
  SequenceModel model(tiny_model());
  SequenceJob job(model, tiny_task(), kEvalSequences);
  Trainer trainer(job, tiny_trainer(20));
  const Tensor before = model.named_parameters().front().second.value().clone();
  AG_CHECK_MESSAGE_HAS(error_of([&] { trainer.resume(path); }), path.c_str(), "GPT language model", "train_gpt",
                       "not a sequence tagger", "train_sequence");
  BOOST_TEST(trainer.step() == 0);
  BOOST_TEST(max_abs_diff(model.named_parameters().front().second.value(), before) == 0.0);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_stripped_of_its_optimizer_state_is_refused) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  write_run_checkpoint(path);
  edit_checkpoint(path, [](SafetensorsFile& f) {
    std::erase_if(f.entries, [](const SafetensorsEntry& e) { return e.name.rfind("optimizer/", 0) == 0; });
  });
  AG_CHECK_MESSAGE_HAS(error_of([&] { resume_from(path); }), path.c_str(), "optimizer state", "holds state for 0");
}

BOOST_AUTO_TEST_CASE(settings_beyond_the_command_line_limits_are_refused_before_building) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  const auto with_model = [&](const std::string& key, int64_t value) {
    write_run_checkpoint(path);
    edit_checkpoint(path, [&](SafetensorsFile& f) {
      Json model = parse_json(f.metadata.at("model"));
      model[key] = value;
      f.metadata["model"] = model.dump();
    });
  };
  with_model("d_model", 100000);
  AG_CHECK_MESSAGE_HAS(error_of([&] { read_run_config(path); }), path.c_str(), "d_model", "100000");
  with_model("vocab", int64_t{1} << 62);  // once a heap overflow: a 2^62-element bias on 64 bytes
  AG_CHECK_MESSAGE_HAS(error_of([&] { read_run_config(path); }), path.c_str(), "vocab", "4611686018427387904");
}

BOOST_AUTO_TEST_CASE(counters_are_range_checked) {
  TempDir dir;
  const std::string path = dir.file("ck.safetensors");
  const auto with_loop = [&](const std::string& key, Json value) {
    write_run_checkpoint(path, 3, 20);
    edit_checkpoint(path, [&](SafetensorsFile& f) {
      Json loop = parse_json(f.metadata.at("loop"));
      loop[key] = value;
      f.metadata["loop"] = loop.dump();
    });
  };
  with_loop("elapsed_s", Json(-5.0));
  AG_CHECK_MESSAGE_HAS(error_of([&] { read_run_config(path); }), path.c_str(), "elapsed_s", "-5");
  with_loop("step", Json(int64_t{1000000000000}));
  AG_CHECK_MESSAGE_HAS(error_of([&] { read_run_config(path); }), path.c_str(), "1000000000000");

  // A budget below the saved step.
  write_run_checkpoint(path, 3, 20);
  edit_checkpoint(path, [&](SafetensorsFile& f) {
    Json trainer = parse_json(f.metadata.at("trainer"));
    trainer["steps"] = 2;
    trainer["warmup_steps"] = 1;
    f.metadata["trainer"] = trainer.dump();
  });
  AG_CHECK_MESSAGE_HAS(error_of([&] { read_run_config(path); }), path.c_str(), "loop step 3", "step budget 2");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(run_guards)

BOOST_AUTO_TEST_CASE(a_diverging_run_stops_early_and_keeps_its_last_good_checkpoint) {
  TempDir dir;
  const std::string path = dir.file("run.safetensors");
  manual_seed(3);
  SequenceModel model(tiny_model());
  TrainerOptions o = tiny_trainer(50);
  o.lr = 1000;
  o.warmup_steps = 0;
  o.eval_every = 1;
  int64_t steps_done = 0;
  TrainerOutputs outputs;
  outputs.checkpoint_path = path;
  outputs.on_step = [&](int64_t step, double) { steps_done = step; };
  SequenceJob job(model, tiny_task(), kEvalSequences);
  Trainer trainer(job, o, outputs);
  std::string message;
  try {
    trainer.run();
  } catch (const TrainingDiverged& e) {
    message = e.what();
  }
  AG_CHECK_MESSAGE_HAS(message, "diverged at update", "gradient norm", "learning rate", "lr 1000", "warmup_steps 0");
  BOOST_TEST(message.rfind("Trainer (sequence): ", 0) == 0u, message);  // the loop and the kind it trains
  BOOST_TEST(steps_done < 50, "the run went on to its budget");
  // Whatever was saved is a healthy state: finite, within bounds, loadable.
  if (::access(path.c_str(), F_OK) == 0) {
    AG_CHECK_MESSAGE_HAS(message, "keeps step");
    resume_from(path);
  }
}

BOOST_AUTO_TEST_CASE(out_of_memory_is_a_message_naming_the_sizes) {
  SequenceModelOptions m = tiny_model();
  m.d_model = 65536;
  m.n_head = 4;
  const MemoryEstimate need = estimate_training_memory(m, tiny_task(), tiny_trainer(10), kEvalSequences);
  AG_CHECK_THROWS_WITH(check_memory_fits(need, 24.0 * (1 << 30), "reduce d_model"), std::invalid_argument,
                       "GiB", "parameters", "optimizer state", "activations", "24.0 GiB", "reduce d_model");
  // A tiny run fits.
  check_memory_fits(estimate_training_memory(tiny_model(), tiny_task(), tiny_trainer(10), kEvalSequences), 24.0 * (1 << 30), "");
  BOOST_TEST(available_memory_bytes() > 0);
}

BOOST_AUTO_TEST_CASE(the_parameter_estimate_is_exact) {
  for (const bool pre : {true, false}) {
    for (const PositionalKind pos : {PositionalKind::learned, PositionalKind::sinusoidal}) {
      SequenceModelOptions m = tiny_model();
      m.norm_first = pre;
      m.positional = pos;
      m.n_layers = 3;
      manual_seed(1);
      SequenceModel model(m);
      const MemoryEstimate e = estimate_training_memory(m, tiny_task(), tiny_trainer(10), kEvalSequences);
      BOOST_TEST(e.parameters == 4.0 * static_cast<double>(model.num_parameters()));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_kind_counts_its_parameters_exactly_from_its_options) {
  for (const bool bias : {true, false}) {
    for (const int64_t layers : {1, 3}) {
      const GPTOptions g{.vocab = 11, .block_size = 7, .d_model = 12, .n_head = 3, .n_layers = layers, .bias = bias};
      manual_seed(1);
      const GPT gpt(g);
      BOOST_TEST(parameter_count(g) == static_cast<double>(gpt.num_parameters()), "bias " << bias << ", layers " << layers);
    }
  }
  for (const bool share : {true, false}) {
    for (const bool tie : {true, false}) {
      for (const PositionalKind pos : {PositionalKind::learned, PositionalKind::sinusoidal}) {
        Seq2SeqOptions s{.src_vocab = 9, .tgt_vocab = 9, .max_len = 6, .d_model = 8, .n_head = 2, .d_ff = 20,
                         .n_encoder_layers = 2, .n_decoder_layers = 3};
        s.share_embeddings = share;
        s.tie_head = tie;
        s.positional = pos;
        if (!share) s.tgt_vocab = 13;  // one vocabulary only when the tables are shared
        manual_seed(1);
        const Seq2Seq model(s);
        BOOST_TEST(parameter_count(s) == static_cast<double>(model.num_parameters()),
                   "share " << share << ", tie " << tie << ", " << positional_kind_name(pos));
      }
    }
  }
  // Heads of a size of their own (n_head need not divide d_model then), and the original
  // Transformer's switches: no attention biases, a LayerNorm on each stack's input, none after.
  for (const auto& [d_k, d_v] : {std::pair<int64_t, int64_t>{5, 7}, {0, 0}, {3, 0}}) {
    for (const bool attn_bias : {true, false}) {
      for (const bool norms : {true, false}) {
        Seq2SeqOptions s{.src_vocab = 9, .max_len = 6, .d_model = 8, .n_head = d_k == 5 ? 3 : 2, .d_ff = 20,
                         .n_encoder_layers = 2, .n_decoder_layers = 1};
        s.d_k = d_k;
        s.d_v = d_v;
        s.attn_bias = attn_bias;
        s.input_norm = norms;
        s.final_norm = !norms;
        manual_seed(1);
        const Seq2Seq model(s);
        BOOST_TEST(parameter_count(s) == static_cast<double>(model.num_parameters()),
                   "d_k " << d_k << ", d_v " << d_v << ", attn_bias " << attn_bias << ", input_norm " << norms);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(wider_heads_need_more_activation_memory) {
  // Heads four times d_model / n_head wide keep four times the queries, keys and values.
  const Seq2SeqOptions base{.src_vocab = 14, .max_len = 32, .d_model = 64, .n_head = 4, .d_ff = 128,
                            .n_encoder_layers = 2, .n_decoder_layers = 2};
  Seq2SeqOptions wide = base;
  wide.d_k = 64;
  wide.d_v = 64;
  const Seq2SeqTaskOptions task{.kind = Seq2SeqTaskKind::addition};
  const TrainerOptions adamw{.optimizer = OptimizerKind::adamw};
  const MemoryEstimate b = estimate_training_memory(base, task, adamw, 64);
  const MemoryEstimate w = estimate_training_memory(wide, task, adamw, 64);
  BOOST_TEST(w.activations > 1.5 * b.activations);
  BOOST_TEST(w.evaluation > 1.5 * b.evaluation);
}

BOOST_AUTO_TEST_CASE(a_gpt_or_seq2seq_far_too_large_is_refused_before_it_is_built) {
  const TrainerOptions adamw{.optimizer = OptimizerKind::adamw};
  const GPTOptions huge{.vocab = 256, .block_size = 1024, .d_model = 16384, .n_head = 16, .n_layers = 12};
  const MemoryEstimate g = estimate_training_memory(huge, 32, adamw);
  BOOST_TEST(g.parameters == 4 * parameter_count(huge));
  BOOST_TEST(g.optimizer_state == 2 * g.parameters);
  AG_CHECK_THROWS_WITH(check_memory_fits(g, 24.0 * (1 << 30), "--d-model"), std::invalid_argument, "parameters",
                       "activations", "--d-model");
  const GPTOptions baby{.vocab = 100, .block_size = 128, .d_model = 128, .n_head = 4, .n_layers = 4};
  check_memory_fits(estimate_training_memory(baby, 32, adamw), 24.0 * (1 << 30), "");

  const Seq2SeqOptions wide{.src_vocab = 14, .max_len = 64, .d_model = 16384, .n_head = 8, .d_ff = 65536,
                            .n_encoder_layers = 3, .n_decoder_layers = 3};
  const Seq2SeqTaskOptions task{.kind = Seq2SeqTaskKind::addition};
  AG_CHECK_THROWS_WITH(check_memory_fits(estimate_training_memory(wide, task, adamw, 512), 24.0 * (1 << 30), "--d-ff"),
                       std::invalid_argument, "parameters", "--d-ff");
  const Seq2SeqOptions small{.src_vocab = 14, .max_len = 20, .d_model = 64, .n_head = 4, .d_ff = 256,
                             .n_encoder_layers = 2, .n_decoder_layers = 2};
  check_memory_fits(estimate_training_memory(small, task, adamw, 512), 24.0 * (1 << 30), "");
}

BOOST_AUTO_TEST_CASE(long_sequences_are_evaluated_in_small_chunks) {
  SequenceModelOptions m = tiny_model();
  m.max_len = 2048;
  SequenceTaskOptions t = tiny_task();
  t.seq_len = 2048;
  t.batch_size = 1;
  // 256 held-out rows of length 2048 at once would hold gigabytes of attention weights.
  const int64_t rows = eval_rows_for(m, t, 256);
  BOOST_TEST(rows < 256);
  BOOST_TEST(static_cast<double>(rows) * eval_bytes_per_row(m, t.seq_len) <= 256.0 * (1 << 20));
  // Short sequences keep whole batches.
  BOOST_TEST(eval_rows_for(tiny_model(), tiny_task(), 256) == 256);
}

BOOST_AUTO_TEST_CASE(chunked_evaluation_gives_the_same_metrics) {
  // Held-out rows evaluated one by one or all at once: the same counts, the same loss sum up to
  // the order of the additions. The Evaluation holds ratios over the 40 x 6 held-out tokens;
  // the counts are compared through them (same denominators: equal ratios are equal counts).
  manual_seed(9);
  SequenceModel model(tiny_model());
  SequenceJob job(model, tiny_task(), 40);
  Trainer whole(job, tiny_trainer(10));
  const Evaluation a = whole.evaluate();
  SequenceMetrics b;
  SequenceTaskOptions eval_opts = tiny_task();
  eval_opts.batch_size = 40;
  const SequenceBatch batch = SequenceTask(eval_opts).eval_batch(0);
  for (int64_t r = 0; r < 40; ++r) {
    const Indices in(Shape{1, 6}, std::vector<int64_t>(batch.inputs.data.begin() + r * 6, batch.inputs.data.begin() + (r + 1) * 6));
    const Indices tg(Shape{1, 6}, std::vector<int64_t>(batch.targets.data.begin() + r * 6, batch.targets.data.begin() + (r + 1) * 6));
    model.eval();
    NoGradGuard no_grad;
    b += sequence_metrics(model(in).value(), tg);
  }
  BOOST_REQUIRE(b.tokens == 40 * 6);
  BOOST_TEST(a.token_acc == b.token_accuracy());
  BOOST_TEST(a.seq_acc == b.sequence_accuracy());
  BOOST_TEST(std::abs(a.loss * static_cast<double>(b.tokens) - b.loss_sum) < 1e-3);
  // The job's own counts, its held-out rows split however its memory estimate says.
  BOOST_TEST(std::lround(a.token_acc * 240) == b.correct_tokens);
  BOOST_TEST(std::lround(a.seq_acc * 40) == b.correct_sequences);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(outputs)

BOOST_AUTO_TEST_CASE(two_outputs_naming_one_file_are_refused) {
  TempDir dir;
  const std::string x = dir.file("x");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", x, OutputKind::checkpoint}, {"--log", x, OutputKind::metrics_log}}, {}),
                       std::invalid_argument, "--save", "--log", "same file");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", x, OutputKind::metrics_log}, {"--plot", dir.path() + "/./x", OutputKind::plot}}, {}),
                       std::invalid_argument, "--log", "--plot", "same file");
  // Through a symlink.
  spit(dir.file("real.svg"), "<svg/>");
  BOOST_REQUIRE(::symlink(dir.file("real.svg").c_str(), dir.file("link.svg").c_str()) == 0);
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", dir.file("real.svg"), OutputKind::plot},
                                        {"--log", dir.file("link.svg"), OutputKind::metrics_log}}, {}),
                       std::invalid_argument, "same file");
}

BOOST_AUTO_TEST_CASE(the_resumed_checkpoint_is_only_written_as_the_checkpoint) {
  TempDir dir;
  const std::string ck = dir.file("ck.safetensors");
  write_run_checkpoint(ck);
  const std::string before = slurp(ck);
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", ck, OutputKind::plot}}, {.resume = ck}), std::invalid_argument,
                       "--plot", "checkpoint being resumed");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", ck, OutputKind::metrics_log}}, {.resume = ck}), std::invalid_argument,
                       "--log", "checkpoint being resumed");
  prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {.resume = ck});  // continuing in place is fine
  BOOST_TEST(slurp(ck) == before);
}

BOOST_AUTO_TEST_CASE(a_fresh_run_does_not_replace_another_runs_files_without_overwrite) {
  TempDir dir;
  const std::string ck = dir.file("ck.safetensors");
  write_run_checkpoint(ck);
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {}), std::invalid_argument,
                       "--save", "--resume", "--overwrite");
  // A fresh run's --log pointed at a checkpoint.
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", ck, OutputKind::metrics_log}}, {}), std::invalid_argument, "--log",
                       "not a metrics log", "--overwrite");
  spit(dir.file("notes.txt"), "my notes");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", dir.file("notes.txt"), OutputKind::plot}}, {}),
                       std::invalid_argument, "--plot", "not a plot");
  // Files that only look like ours: a user's JSON settings, a hand-made SVG, a TOML file.
  spit(dir.file("settings.json"), "{\"learning_rate\": 0.01}\n");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", dir.file("settings.json"), OutputKind::metrics_log}}, {}),
                       std::invalid_argument, "--log", "not a metrics log");
  spit(dir.file("logo.svg"), "<svg xmlns=\"http://www.w3.org/2000/svg\"><circle r=\"4\"/></svg>");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", dir.file("logo.svg"), OutputKind::plot}}, {}),
                       std::invalid_argument, "--plot", "not a plot");
  spit(dir.file("config.toml"), "# my project\nname = \"x\"\n");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"the configuration copy", dir.file("config.toml"), OutputKind::config}}, {}),
                       std::invalid_argument, "config.toml", "not a configuration");
  prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {.overwrite = true});
  // An earlier run's own log, plot and configuration, named explicitly: kept unless --overwrite,
  // or a resumed run going on with its log and plot.
  spit(dir.file("m.jsonl"), "{\"step\":0}\n");
  spit(dir.file("p.svg"), std::string("<?xml version=\"1.0\"?>\n<svg>") + kPlotMarker + "</svg>");
  spit(dir.file("c.toml"), std::string(kConfigMarker) + "\nsteps=3\n");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", dir.file("m.jsonl"), OutputKind::metrics_log}}, {}),
                       std::invalid_argument, "--log", "a metrics log of an earlier run", "--overwrite");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", dir.file("p.svg"), OutputKind::plot}}, {}), std::invalid_argument,
                       "--plot", "a plot of an earlier run");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"the configuration copy", dir.file("c.toml"), OutputKind::config}}, {}),
                       std::invalid_argument, "c.toml", "a configuration of an earlier run");
  const std::vector<OutputFile> own = {{"--log", dir.file("m.jsonl"), OutputKind::metrics_log},
                                       {"--plot", dir.file("p.svg"), OutputKind::plot},
                                       {"the configuration copy", dir.file("c.toml"), OutputKind::config}};
  prepare_outputs(own, {.resume = ck});
  prepare_outputs(own, {.overwrite = true});
  BOOST_CHECK_EQUAL(slurp(dir.file("m.jsonl")), "{\"step\":0}\n");  // checked, not yet written
  // An empty file holds nothing to lose.
  spit(dir.file("empty.jsonl"), "");
  prepare_outputs({{"--log", dir.file("empty.jsonl"), OutputKind::metrics_log}}, {});
  // A plot of a version from before the marker (plot.cpp's exact opening lines) is ours too.
  spit(dir.file("old.svg"),
       "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" "
       "height=\"700\" viewBox=\"0 0 900 700\" font-family=\"sans-serif\" font-size=\"12\">\n<title>reverse</title>");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", dir.file("old.svg"), OutputKind::plot}}, {}), std::invalid_argument,
                       "--plot", "a plot of an earlier run");
}

BOOST_AUTO_TEST_CASE(directories_and_unwritable_places_are_refused_before_training) {
  TempDir dir;
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", dir.path(), OutputKind::plot}}, {}), std::invalid_argument, "--plot",
                       "is a directory");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", dir.path() + "/", OutputKind::checkpoint}}, {}),
                       std::invalid_argument, "--save");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", "/proc/attograd/metrics.jsonl", OutputKind::metrics_log}}, {}),
                       std::invalid_argument, "--log", "/proc/attograd");
  // Missing directories are created.
  prepare_outputs({{"--log", dir.file("a/b/m.jsonl"), OutputKind::metrics_log}}, {});
  BOOST_TEST(std::filesystem::is_directory(dir.file("a/b")));
}

BOOST_AUTO_TEST_CASE(stale_temporaries_of_dead_processes_are_removed) {
  TempDir dir;
  const std::string ck = dir.file("ck.safetensors");
  // A pid that cannot be alive (above the kernel's pid_max) and our own live pid.
  const std::string stale = temporary_path(ck, 99999999, 0);
  spit(stale, "half a checkpoint");
  const std::string live = temporary_path(ck, ::getpid(), 7);
  spit(live, "being written");
  spit(temporary_path(dir.file("other"), 99999999, 0), "another output's");
  BOOST_TEST(remove_stale_temporaries(ck) == 1);
  BOOST_TEST(::access(stale.c_str(), F_OK) != 0);
  BOOST_TEST(::access(live.c_str(), F_OK) == 0);
  BOOST_TEST(::access(temporary_path(dir.file("other"), 99999999, 0).c_str(), F_OK) == 0);
  // Every save cleans up first.
  spit(temporary_path(ck, 99999998, 3), "half a checkpoint");
  write_run_checkpoint(ck);
  BOOST_TEST(::access(temporary_path(ck, 99999998, 3).c_str(), F_OK) != 0);
}

BOOST_AUTO_TEST_CASE(the_temporary_sweep_removes_only_what_it_can_prove_is_its_own) {
  TempDir dir;
  const std::string ck = dir.file("ck.safetensors");
  const std::string ours = temporary_path(ck, 99999999, 4);
  BOOST_TEST(ours.rfind(ck + ".tmp-99999999-4-", 0) == 0);
  // Named like a temporary of a dead process, but without our tag, or with another one.
  const std::vector<std::string> users = {ck + ".tmp-99999999-4", ck + ".tmp-99999999-4-00000000",
                                          ours + "0", ck + ".tmp-099999999-4" + ours.substr(ours.rfind('-'))};
  for (const std::string& name : users) spit(name, "a file of the user's");
  // A symlink named exactly like our temporary is not one of our files either.
  spit(dir.file("target"), "what the link leads to");
  BOOST_REQUIRE(::symlink(dir.file("target").c_str(), ours.c_str()) == 0);
  BOOST_TEST(remove_stale_temporaries(ck) == 0);
  for (const std::string& name : users) BOOST_TEST(slurp(name) == "a file of the user's", name);
  BOOST_TEST(::access(ours.c_str(), F_OK) == 0);
  BOOST_TEST(slurp(dir.file("target")) == "what the link leads to");
  BOOST_REQUIRE(::unlink(ours.c_str()) == 0);
  spit(ours, "half a checkpoint");
  BOOST_TEST(remove_stale_temporaries(ck) == 1);
  for (const std::string& name : users) BOOST_TEST(slurp(name) == "a file of the user's", name);
}

BOOST_AUTO_TEST_CASE(an_output_has_one_owner_until_it_is_released) {
  TempDir dir;
  const std::string ck = dir.file("ck.safetensors");
  const std::string pid = "pid " + std::to_string(::getpid());
  {
    const OutputLocks held = prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {});
    BOOST_TEST(slurp(ck + ".lock") == kLockMarker + std::to_string(::getpid()) + "\n");
    AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {}), std::invalid_argument,
                         "--save", "in use", pid.c_str());
    // Another name for the same file is the same output.
    BOOST_REQUIRE(::symlink(ck.c_str(), dir.file("link").c_str()) == 0);
    spit(ck, "saved");
    AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", dir.file("link"), OutputKind::metrics_log}}, {}),
                         std::invalid_argument, "--log", "in use", pid.c_str());
    // A refused run leaves the holder's lock as it was.
    BOOST_TEST(slurp(ck + ".lock") == kLockMarker + std::to_string(::getpid()) + "\n");
  }
  BOOST_TEST(::access((ck + ".lock").c_str(), F_OK) != 0);  // released and removed
  const OutputLocks again = prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {.overwrite = true});
}

BOOST_AUTO_TEST_CASE(a_lock_left_by_a_dead_process_is_taken_over_and_a_users_file_is_kept) {
  TempDir dir;
  const std::string ck = dir.file("ck.safetensors");
  spit(ck + ".lock", kLockMarker + std::string("99999999\n"));  // killed: its lock went with it
  {
    const OutputLocks held = prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {});
    BOOST_TEST(slurp(ck + ".lock") == kLockMarker + std::to_string(::getpid()) + "\n");
  }
  BOOST_TEST(::access((ck + ".lock").c_str(), F_OK) != 0);
  spit(ck + ".lock", "my notes\n");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {}), std::invalid_argument, "--save",
                       "ck.safetensors.lock", "not a lock");
  BOOST_TEST(slurp(ck + ".lock") == "my notes\n");
}

BOOST_AUTO_TEST_CASE(no_input_is_an_output_with_or_without_overwrite) {
  TempDir dir;
  const std::string text = dir.file("text.txt");
  spit(text, "the training text\n");
  const std::vector<InputFile> data = {{"--data", text, InputKind::data}};
  for (const bool overwrite : {false, true}) {
    BOOST_TEST_CONTEXT("overwrite " << overwrite) {
      AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", text, OutputKind::checkpoint}}, {.overwrite = overwrite, .inputs = data}),
                           std::invalid_argument, "--save", "--data", "text.txt");
      AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", dir.path() + "/./text.txt", OutputKind::metrics_log}},
                                           {.overwrite = overwrite, .inputs = data}),
                           std::invalid_argument, "--log", "--data");
    }
  }
  // A log at the path a text is read from, though the text starts like a log.
  spit(dir.file("m.jsonl"), "{\"step\":0}\n");
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", dir.file("m.jsonl"), OutputKind::metrics_log}},
                                       {.inputs = {{"--data", dir.file("m.jsonl"), InputKind::data}}}),
                       std::invalid_argument, "--log", "--data");
  // Through a symlink and a hard link.
  BOOST_REQUIRE(::symlink(text.c_str(), dir.file("soft").c_str()) == 0);
  BOOST_REQUIRE(::link(text.c_str(), dir.file("hard").c_str()) == 0);
  for (const char* name : {"soft", "hard"}) {
    AG_CHECK_THROWS_WITH(prepare_outputs({{"--plot", dir.file(name), OutputKind::plot}}, {.overwrite = true, .inputs = data}),
                         std::invalid_argument, "--plot", "--data");
    AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", text, OutputKind::checkpoint}},
                                         {.overwrite = true, .inputs = {{"--data", dir.file(name), InputKind::data}}}),
                         std::invalid_argument, "--save", "--data");
  }
  BOOST_TEST(slurp(text) == "the training text\n");
  // A checkpoint being resumed is read: only its own continuation may save over it.
  const std::string ck = dir.file("ck.safetensors");
  write_run_checkpoint(ck);
  const std::vector<InputFile> resumed = {{"--resume", ck, InputKind::checkpoint}};
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--write-config", ck, OutputKind::config}}, {.overwrite = true, .inputs = resumed}),
                       std::invalid_argument, "--write-config", "checkpoint being resumed");
  prepare_outputs({{"--save", ck, OutputKind::checkpoint}}, {.inputs = resumed});
}

BOOST_AUTO_TEST_CASE(a_configuration_read_is_replaced_only_by_a_configuration_when_it_is_ours) {
  TempDir dir;
  const std::string mine = dir.file("mine.toml"), ours = dir.file("config.toml");
  spit(mine, "# my settings, by hand\nlr = 0.01\n");
  spit(ours, std::string(kConfigMarker) + " (run it with train_sequence --config FILE)\nlr = 0.01\n");
  for (const std::string& config : {mine, ours}) {
    const std::vector<InputFile> read = {{"--config", config, InputKind::config}};
    AG_CHECK_THROWS_WITH(prepare_outputs({{"--log", config, OutputKind::metrics_log}}, {.overwrite = true, .inputs = read}),
                         std::invalid_argument, "--log", "--config");
    AG_CHECK_THROWS_WITH(prepare_outputs({{"--save", config, OutputKind::checkpoint}}, {.overwrite = true, .inputs = read}),
                         std::invalid_argument, "--save", "--config");
  }
  // A user's configuration is theirs, even with --overwrite.
  AG_CHECK_THROWS_WITH(prepare_outputs({{"--write-config", mine, OutputKind::config}},
                                       {.overwrite = true, .inputs = {{"--config", mine, InputKind::config}}}),
                       std::invalid_argument, "--write-config", "--config");
  BOOST_TEST(slurp(mine) == "# my settings, by hand\nlr = 0.01\n");
  // The run's own copy, read back to repeat the run (the README's "one change"), is the run's again.
  prepare_outputs({{"the configuration copy", ours, OutputKind::config}}, {.inputs = {{"--config", ours, InputKind::config}}});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
