// Checkpoints: a round trip that continues training identically, in-place restoration, the
// documented error for each kind of corrupt or mismatched file, and a read by an independent
// reader (Python with json + numpy).
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <memory>

#include "attograd/train/io/checkpoint.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"
#include "train_support.h"

namespace ag::testing {
namespace {

// A stand-in for a model: two f32 parameters with dotted names, and a loss over them.
struct TinyModel {
  Variable weight, bias;
  explicit TinyModel(uint64_t seed, DType dtype = DType::f32, Shape weight_shape = {3, 4}) {
    Generator gen(seed);
    weight = Variable(normal(weight_shape, 0, 1, gen, dtype), true, "encoder.weight");
    bias = Variable(normal({weight_shape[0]}, 0, 1, gen, dtype), true, "encoder.bias");
  }
  NamedVariables params() const { return {{"encoder.weight", weight}, {"encoder.bias", bias}}; }
  Variable loss(const Tensor& x) const {
    const Variable y = matmul(weight, Variable(x)) + unsqueeze(bias, -1);
    return mean(y * y);
  }
};

Tensor input(DType dtype = DType::f32) {
  Generator gen(99);
  return normal({4, 2}, 0, 1, gen, dtype);
}

void train_steps(const TinyModel& m, Optimizer& opt, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    m.loss(input(m.weight.dtype())).backward();
    opt.step();
  }
}

const std::map<std::string, std::string> kExtra = {{"model", R"({"d_model":4,"layers":1})"},
                                                   {"task", R"({"task":"reverse"})"}};
const GeneratorState kRng{123, 45, 6};

// Saves a checkpoint of a trained TinyModel with an Adam state at `path`.
void write_good_checkpoint(const std::string& path) {
  TinyModel m(1);
  Adam opt(m.params(), AdamOptions{.lr = 0.01});
  train_steps(m, opt, 3);
  save_checkpoint(path, m.params(), opt, kExtra, kRng, 3);
}

// Loads `path` into a fresh TinyModel + Adam and expects the documented runtime_error: the
// message names the file and each of `parts`; the parameters are left unchanged.
void expect_load_error(const std::string& path, const std::vector<std::string>& parts, TinyModel model = TinyModel(7)) {
  Adam opt(model.params(), AdamOptions{.lr = 0.01});
  const std::vector<double> before = model.weight.value().to_vector();
  std::string message;
  try {
    load_checkpoint(path, model.params(), opt);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  BOOST_TEST_REQUIRE(!message.empty(), "loading " << path << " did not throw std::runtime_error");
  BOOST_TEST(message.find(path) != std::string::npos, "'" << message << "' does not name the file");
  for (const std::string& p : parts) BOOST_TEST(message.find(p) != std::string::npos, "'" << message << "' lacks '" << p << "'");
  BOOST_TEST(model.weight.value().to_vector() == before, "a failed load changed the parameters");
  BOOST_TEST(opt.state().empty(), "a failed load changed the optimizer");
}

// Rewrites a checkpoint through `edit` (on the parsed file) to make a consistent but wrong file.
void rewrite(const std::string& path, const std::function<void(SafetensorsFile&)>& edit) {
  SafetensorsFile f = load_safetensors(path);
  edit(f);
  save_safetensors(path, f);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_round_trip)

BOOST_AUTO_TEST_CASE(restored_run_continues_identically) {
  TempDir dir;
  const std::string path = dir.file("run.safetensors");
  TinyModel original(1);
  Adam opt(original.params(), AdamOptions{.lr = 0.01});
  train_steps(original, opt, 3);
  save_checkpoint(path, original.params(), opt, kExtra, kRng, 3);
  train_steps(original, opt, 4);

  TinyModel restored(2);  // different starting values
  const float* storage_before = restored.weight.value().data<float>();
  Adam opt2(restored.params(), AdamOptions{.lr = 0.01});
  const CheckpointInfo info = load_checkpoint(path, restored.params(), opt2);
  BOOST_TEST(restored.weight.value().data<float>() == storage_before);  // in place
  train_steps(restored, opt2, 4);
  // Bit for bit: same values, same optimizer moments, same step counts.
  BOOST_TEST(restored.weight.value().to_vector() == original.weight.value().to_vector());
  BOOST_TEST(restored.bias.value().to_vector() == original.bias.value().to_vector());
  BOOST_TEST(opt2.state()[0].second.step == 7);
  BOOST_TEST(opt2.state()[0].second.exp_avg_sq.to_vector() == opt.state()[0].second.exp_avg_sq.to_vector());

  BOOST_TEST(info.format_version == kCheckpointFormatVersion);
  BOOST_TEST(info.optimizer == "Adam");
  BOOST_TEST((info.rng_state == kRng));
  BOOST_TEST(info.data_position == 3u);
  BOOST_TEST(info.metadata.at("model") == kExtra.at("model"));
  BOOST_TEST(info.metadata.at("task") == kExtra.at("task"));
  BOOST_TEST(read_checkpoint_info(path).data_position == 3u);
}

BOOST_AUTO_TEST_CASE(sgd_momentum_and_f64_parameters) {
  TempDir dir;
  const std::string path = dir.file("sgd.safetensors");
  TinyModel a(3, DType::f64);
  SGD opt(a.params(), SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  train_steps(a, opt, 2);
  save_checkpoint(path, a.params(), opt, {}, GeneratorState{~0ull, 1, 2}, 2);
  train_steps(a, opt, 2);
  TinyModel b(4, DType::f64);
  SGD opt2(b.params(), SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  const CheckpointInfo info = load_checkpoint(path, b.params(), opt2);
  BOOST_TEST(info.rng_state.seed == ~0ull);  // the full uint64 range survives
  train_steps(b, opt2, 2);
  BOOST_TEST(b.weight.value().to_vector() == a.weight.value().to_vector());
}

BOOST_AUTO_TEST_CASE(parameters_only) {
  TempDir dir;
  const std::string with_opt = dir.file("full.safetensors"), bare = dir.file("bare.safetensors");
  write_good_checkpoint(with_opt);
  // Loading parameters only ignores the optimizer state in the file.
  TinyModel m(5);
  load_checkpoint(with_opt, m.params());
  TinyModel m2(6);
  save_checkpoint(bare, m.params(), {}, GeneratorState{}, 0);
  load_checkpoint(bare, m2.params());
  BOOST_TEST(m2.weight.value().to_vector() == m.weight.value().to_vector());
  BOOST_TEST(read_checkpoint_info(bare).optimizer.empty());
  // But an optimizer cannot be restored from a file without its state.
  expect_load_error(bare, {"no optimizer state", "Adam"});
}

BOOST_AUTO_TEST_CASE(file_holds_parameters_and_optimizer_state_by_name) {
  TempDir dir;
  const std::string path = dir.file("names.safetensors");
  write_good_checkpoint(path);
  const SafetensorsFile f = load_safetensors(path);
  std::vector<std::string> names;
  for (const SafetensorsEntry& e : f.entries) names.push_back(e.name);
  BOOST_TEST(names == (std::vector<std::string>{"encoder.weight", "encoder.bias", "optimizer/encoder.weight/step",
                                                "optimizer/encoder.weight/exp_avg", "optimizer/encoder.weight/exp_avg_sq",
                                                "optimizer/encoder.bias/step", "optimizer/encoder.bias/exp_avg",
                                                "optimizer/encoder.bias/exp_avg_sq"}));
  BOOST_TEST(f.find("optimizer/encoder.bias/step")->indices.data == std::vector<int64_t>{3});
  BOOST_TEST(f.metadata.at("format_version") == std::to_string(kCheckpointFormatVersion));
  BOOST_TEST(f.checksummed);
  BOOST_TEST(f.metadata.at("optimizer_state_params") == "2");
  BOOST_TEST(f.metadata.at("rng_seed") == "123");
  BOOST_TEST(f.metadata.at("rng_step") == "45");
  BOOST_TEST(f.metadata.at("rng_call") == "6");
  BOOST_TEST(f.metadata.at("data_position") == "3");
  BOOST_TEST(f.metadata.at("optimizer") == "Adam");
}

BOOST_AUTO_TEST_CASE(save_rejects_misuse) {
  TempDir dir;
  TinyModel m(1);
  Adam opt(m.params(), AdamOptions{});
  AG_CHECK_THROWS_WITH(save_checkpoint(dir.file("x"), m.params(), opt, {{"format_version", "9"}}, kRng, 0),
                       std::invalid_argument, "'format_version'", "reserved");
  const NamedVariables only_bias = {{"encoder.bias", m.bias}};
  AG_CHECK_THROWS_WITH(save_checkpoint(dir.file("x"), only_bias, opt, {}, kRng, 0), std::invalid_argument,
                       "'encoder.weight'", "not among the parameters");
  Variable slash(zeros({1}), true);
  AG_CHECK_THROWS_WITH(save_checkpoint(dir.file("x"), {{"a/b", slash}}, {}, kRng, 0), std::invalid_argument, "'a/b'");
  BOOST_TEST(dir.entries().empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(checkpoint_corrupt_files)

BOOST_AUTO_TEST_CASE(zero_length) {
  TempDir dir;
  const std::string path = dir.file("empty.safetensors");
  spit(path, "");
  expect_load_error(path, {"empty", "0 bytes"});
}

BOOST_AUTO_TEST_CASE(truncated_header) {
  TempDir dir;
  const std::string path = dir.file("cut.safetensors");
  write_good_checkpoint(path);
  spit(path, slurp(path).substr(0, 100));
  expect_load_error(path, {"truncated header"});
  spit(path, "12345");
  expect_load_error(path, {"truncated header", "5 bytes"});
}

BOOST_AUTO_TEST_CASE(bad_json) {
  TempDir dir;
  const std::string path = dir.file("json.safetensors");
  write_good_checkpoint(path);
  std::string bytes = slurp(path);
  bytes[bytes.find(':', 8)] = ',';  // {"__metadata__",{... : no longer an object
  spit(path, bytes);
  expect_load_error(path, {"bad JSON"});
}

BOOST_AUTO_TEST_CASE(wrong_dtype) {
  TempDir dir;
  const std::string path = dir.file("dtype.safetensors");
  write_good_checkpoint(path);  // f32 parameters
  expect_load_error(path, {"tensor 'encoder.weight'", "dtype F32", "parameter is F64"}, TinyModel(7, DType::f64));
}

BOOST_AUTO_TEST_CASE(shape_mismatch) {
  TempDir dir;
  const std::string path = dir.file("shape.safetensors");
  write_good_checkpoint(path);
  expect_load_error(path, {"tensor 'encoder.weight'", "shape (3, 4)", "parameter has shape (3, 5)"},
                    TinyModel(7, DType::f32, {3, 5}));
}

BOOST_AUTO_TEST_CASE(missing_tensor) {
  TempDir dir;
  const std::string path = dir.file("missing.safetensors");
  write_good_checkpoint(path);
  rewrite(path, [](SafetensorsFile& f) {
    std::erase_if(f.entries, [](const SafetensorsEntry& e) { return e.name == "encoder.bias"; });
  });
  expect_load_error(path, {"missing tensor 'encoder.bias'"});
}

BOOST_AUTO_TEST_CASE(extra_tensor) {
  TempDir dir;
  const std::string path = dir.file("extra.safetensors");
  write_good_checkpoint(path);
  rewrite(path, [](SafetensorsFile& f) { f.add("decoder.weight", ones({2}, DType::f32)); });
  expect_load_error(path, {"unexpected tensor 'decoder.weight'"});
  rewrite(path, [](SafetensorsFile& f) {
    std::erase_if(f.entries, [](const SafetensorsEntry& e) { return e.name == "decoder.weight"; });
    f.add("optimizer/decoder.weight/exp_avg", ones({2}, DType::f32));
  });
  expect_load_error(path, {"unexpected tensor 'optimizer/decoder.weight/exp_avg'"});
}

BOOST_AUTO_TEST_CASE(wrong_version) {
  TempDir dir;
  const std::string path = dir.file("version.safetensors");
  write_good_checkpoint(path);
  rewrite(path, [](SafetensorsFile& f) { f.metadata["format_version"] = "4"; });
  expect_load_error(path, {"format_version '4'", "not supported", "versions 1 to 3"});
  rewrite(path, [](SafetensorsFile& f) {
    f.metadata.erase("format_version");
    f.metadata.erase("format");
  });
  expect_load_error(path, {"not an attograd checkpoint"});
}

BOOST_AUTO_TEST_CASE(data_truncated) {
  TempDir dir;
  const std::string path = dir.file("short.safetensors");
  write_good_checkpoint(path);
  const std::string bytes = slurp(path);
  spit(path, bytes.substr(0, bytes.size() - 10));
  expect_load_error(path, {"data truncated", "optimizer/encoder.bias/exp_avg_sq"});
}

BOOST_AUTO_TEST_CASE(optimizer_mismatches) {
  TempDir dir;
  const std::string path = dir.file("opt.safetensors");
  write_good_checkpoint(path);
  {
    TinyModel m(7);
    SGD sgd(m.params(), SGDOptions{.lr = 0.1, .momentum = 0.9});
    AG_CHECK_THROWS_WITH(load_checkpoint(path, m.params(), sgd), std::runtime_error, path, "saved by Adam",
                         "into SGD");
  }
  rewrite(path, [](SafetensorsFile& f) {
    for (SafetensorsEntry& e : f.entries) {
      if (e.name == "optimizer/encoder.bias/exp_avg") e.tensor = zeros({5}, DType::f32);
    }
  });
  expect_load_error(path, {"optimizer state is invalid", "'encoder.bias'", "exp_avg", "(5,)"});
  write_good_checkpoint(path);
  rewrite(path, [](SafetensorsFile& f) {
    std::erase_if(f.entries, [](const SafetensorsEntry& e) { return e.name == "optimizer/encoder.bias/step"; });
  });
  expect_load_error(path, {"missing tensor 'optimizer/encoder.bias/step'"});
  write_good_checkpoint(path);
  rewrite(path, [](SafetensorsFile& f) { f.metadata["rng_step"] = "12x"; });
  expect_load_error(path, {"rng_step", "'12x'", "not an unsigned integer"});
}

BOOST_AUTO_TEST_CASE(missing_file) {
  expect_load_error("/nonexistent-dir/ckpt.safetensors", {"No such file"});
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Skips the test (with the reason in the log) when the independent reader is not available.
boost::test_tools::assertion_result python_with_numpy(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result ok(true);
  if (::access("/usr/bin/python3", X_OK) != 0) {
    ok = false;
    ok.message() << "skipped: /usr/bin/python3 is not installed";
  } else if (std::system("/usr/bin/python3 -c 'import json, numpy' >/dev/null 2>&1") != 0) {
    ok = false;
    ok.message() << "skipped: /usr/bin/python3 cannot import numpy";
  }
  return ok;
}

// Reads a safetensors file with nothing but the standard library and numpy, checks the
// metadata, and compares one tensor with the expected values (one per line in a text file).
constexpr const char* kIndependentReader = R"PY(
import json, struct, sys
import numpy as np

path, name, expected_path = sys.argv[1], sys.argv[2], sys.argv[3]
with open(path, "rb") as f:
    blob = f.read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
meta = header.pop("__metadata__")
assert meta["format_version"] == "3", meta
# Every tensor's CRC-32C, recomputed bit by bit here (the reflected Castagnoli polynomial).
def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
sums = json.loads(meta["crc32c"])
meta_sums = sums.pop("__metadata__")
assert set(meta_sums) == set(meta) - {"crc32c"}, (sorted(meta_sums), sorted(meta))
for key, value in meta.items():
    assert key == "crc32c" or int(meta_sums[key], 16) == crc32c(value.encode()), key
assert set(sums) == set(header), (sorted(sums), sorted(header))
assert json.loads(meta["model"])["d_model"] == 4, meta
dtypes = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
end = 0
for key, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
    begin, stop = info["data_offsets"]
    assert begin == end, (key, begin, end)
    count = int(np.prod(info["shape"], dtype=np.int64))
    assert stop - begin == count * np.dtype(dtypes[info["dtype"]]).itemsize, key
    assert int(sums[key], 16) == crc32c(data[begin:stop]), (key, sums[key])
    end = stop
assert end == len(data), (end, len(data))
info = header[name]
begin, stop = info["data_offsets"]
got = np.frombuffer(data[begin:stop], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
want = np.loadtxt(expected_path, dtype=np.float64).reshape(info["shape"]).astype(got.dtype)
if not np.array_equal(got, want):
    print("mismatch", got, want)
    sys.exit(1)
step = header["optimizer/encoder.weight/step"]
b, e = step["data_offsets"]
assert np.frombuffer(data[b:e], dtype="<i8")[0] == 3

)PY";

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_interop)

BOOST_AUTO_TEST_CASE(readable_by_python_json_and_numpy, *boost::unit_test::precondition(python_with_numpy)) {
  TempDir dir;
  const std::string path = dir.file("interop.safetensors");
  TinyModel m(1);
  Adam opt(m.params(), AdamOptions{.lr = 0.01});
  train_steps(m, opt, 3);
  save_checkpoint(path, m.params(), opt, kExtra, kRng, 3);

  std::string expected;
  char buf[64];
  for (double v : m.weight.value().to_vector()) {
    std::snprintf(buf, sizeof buf, "%.9g\n", v);  // 9 digits round-trip a float exactly
    expected += buf;
  }
  spit(dir.file("expected.txt"), expected);
  spit(dir.file("reader.py"), kIndependentReader);
  const std::string command = "/usr/bin/python3 " + dir.file("reader.py") + " " + path + " encoder.weight " +
                              dir.file("expected.txt");
  BOOST_TEST(std::system(command.c_str()) == 0, "the independent reader rejected the checkpoint: " << command);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
