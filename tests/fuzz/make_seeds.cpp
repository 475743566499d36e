// Writes the seed corpora of the fuzz targets (docs/fuzzing.md), small valid files that the
// mutations start from:
//
//   make_fuzz_seeds tests/fuzz/corpus
//     corpus/safetensors/   F32, F64, I64, F16 and BF16 tensors, metadata, an empty tensor, a
//                           scalar, a file without tensors, files without checksums
//     corpus/checkpoint/    sgd_1_update: a real checkpoint of a tiny toy-tagger run (d_model 8,
//                           one layer, vocab 4, length 4; SGD with momentum, sinusoidal
//                           positions, post-norm) after 1 update
//
// The output is committed; rerun this after a change to either file format (a new metadata
// key, a new format_version) so that the seeds stay valid files. It rewrites only these names.
//
// Checksums stop most mutations: the writer stores a CRC-32C of every tensor, so a mutated tensor
// byte is refused before any check behind it (a negative optimizer step, a NaN parameter).
// Hence f64_i64_metadata_no_checksums (the "crc32c" entry removed: plain safetensors files need
// none), and corpus/checkpoint/adam_2_updates_format_v1.safetensors, which is not written here:
// a format version 1 checkpoint (Adam after 2 updates, learned positions, pre-norm, same sizes)
// saved before version 2 made checksums mandatory. Readers still load version 1, so mutations
// of its tensors reach the loader's checks; the current writer cannot produce it any more.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "attograd/core/rng.h"
#include "attograd/models/toy/sequence_job.h"
#include "attograd/train/io/safetensors.h"
#include "attograd/train/trainer.h"

namespace {

namespace fs = std::filesystem;
using namespace ag;

// Rewrites `path` without the "crc32c" member of __metadata__, under `name` in the same folder,
// and removes `path`. The header is edited as text (our writer puts the member there once, as
// "crc32c":"<JSON as a string>") and padded again as the writer pads it; the result is read
// back to check that it is a valid file without checksums.
void strip_checksums(const fs::path& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  std::string header = bytes.substr(8, header_len);
  const std::string key = "\"crc32c\":\"";
  if (size_t begin = header.find(key); begin != std::string::npos) {
    size_t end = begin + key.size();
    while (header.at(end) != '"') end += header[end] == '\\' ? 2 : 1;  // to the closing quote
    ++end;
    if (header[end] == ',') {
      ++end;
    } else if (header[begin - 1] == ',') {
      --begin;
    }
    header.erase(begin, end - begin);
  }
  header.erase(header.find_last_not_of(' ') + 1);
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');
  const uint64_t new_len = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &new_len, 8);
  out += header;
  out += bytes.substr(8 + header_len);
  const fs::path stripped = path.parent_path() / name;
  std::ofstream(stripped, std::ios::binary) << out;
  fs::remove(path);
  const SafetensorsFile check = load_safetensors(stripped.string());
  if (check.checksummed || check.metadata.contains("crc32c")) {
    throw std::runtime_error(stripped.string() + ": still has checksums after strip_checksums");
  }
}

void write_safetensors_seeds(const fs::path& dir) {
  {
    SafetensorsFile f;
    f.add("weight", from_vector(std::vector<double>{1, -2, 0.5, 3, -0.25, 8}, {2, 3}, DType::f32));
    save_safetensors((dir / "f32_matrix.safetensors").string(), f);
  }
  {
    SafetensorsFile f;
    f.add("layer.bias", from_vector(std::vector<double>{0.1, -1e300, 2}, {3}, DType::f64));
    f.add("ids", Indices(Shape{2, 2}, {0, -1, 7, 1LL << 40}));
    f.metadata["format"] = "pt";
    f.metadata["note"] = "seed with \"quotes\", a tab\tand \xc3\xa9";
    save_safetensors((dir / "f64_i64_metadata.safetensors").string(), f);
    save_safetensors((dir / "tmp.safetensors").string(), f);
    strip_checksums(dir / "tmp.safetensors", "f64_i64_metadata_no_checksums.safetensors");
  }
  {
    SafetensorsFile f;
    f.add("empty", Tensor(Shape{2, 0}, DType::f32));
    f.add("scalar", from_vector(std::vector<double>{4}, {}, DType::f64));
    f.add("no_ids", Indices(Shape{0}, {}));
    save_safetensors((dir / "empty_and_scalar.safetensors").string(), f);
  }
  {
    // Half precision as Hugging Face ships it; without checksums, so mutated values (NaN
    // payloads, subnormals) reach the reader and the writer's rounding.
    SafetensorsFile f;
    f.add("h", from_vector(std::vector<double>{1, -2, 65504, 0x1p-24, 0.1}, {5}, DType::f32));
    f.entries.back().dtype = SafetensorsDType::F16;
    f.add_bf16("b", from_vector(std::vector<double>{1, -3e38, 0x1p-133, 0.1}, {2, 2}, DType::f32));
    save_safetensors((dir / "tmp.safetensors").string(), f);
    strip_checksums(dir / "tmp.safetensors", "f16_bf16_no_checksums.safetensors");
  }
  {
    SafetensorsFile f;
    f.metadata["only"] = "metadata";
    save_safetensors((dir / "no_tensors.safetensors").string(), f);
  }
}

void write_checkpoint(const fs::path& path, const SequenceModelOptions& model_options, const SequenceTaskOptions& task,
                      const TrainerOptions& options, int updates) {
  manual_seed(1);
  SequenceModel model(model_options);
  SequenceJob job(model, task);
  Trainer trainer(job, options);
  for (int i = 0; i < updates; ++i) trainer.train_step();
  trainer.save_checkpoint(path.string());
}

void write_checkpoint_seeds(const fs::path& dir) {
  const SequenceModelOptions model{.vocab = 4, .max_len = 4, .d_model = 8, .n_head = 2, .d_ff = 16, .n_layers = 1,
                                   .norm_first = false, .positional = PositionalKind::sinusoidal};
  const SequenceTaskOptions task{.kind = SequenceTaskKind::shift, .vocab_size = 4, .seq_len = 4, .batch_size = 2, .shift = 2, .seed = 3};
  write_checkpoint(dir / "sgd_1_update.safetensors", model, task,
                   TrainerOptions{.optimizer = OptimizerKind::sgd, .lr = 0.1, .momentum = 0.9, .warmup_steps = 0,
                                  .schedule = LrDecay::linear, .steps = 4},
                   1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " CORPUS_DIR   (writes CORPUS_DIR/safetensors and CORPUS_DIR/checkpoint)\n";
    return 2;
  }
  try {
    const fs::path root = argv[1];
    fs::create_directories(root / "safetensors");
    fs::create_directories(root / "checkpoint");
    write_safetensors_seeds(root / "safetensors");
    write_checkpoint_seeds(root / "checkpoint");
  } catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
