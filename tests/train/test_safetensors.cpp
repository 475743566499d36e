// safetensors files: the byte layout, round trips of every dtype, atomic replacement (also when
// a write fails half-way), and the reader's checks on corrupt files.
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>

#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/crc32c.h"
#include "attograd/train/io/json_text.h"
#include "attograd/train/io/safetensors.h"
#include "train_support.h"

namespace ag::testing {
namespace {


std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

uint64_t header_length(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return n;
}

// Writes `bytes` and expects load_safetensors to name the file and every one of `parts`.
void expect_rejected(const std::string& bytes, const std::vector<std::string>& parts) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  spit(path, bytes);
  std::string message;
  try {
    load_safetensors(path);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  BOOST_TEST_REQUIRE(!message.empty(), "no std::runtime_error for a corrupt file");
  BOOST_TEST(message.find("safetensors '" + path + "'") != std::string::npos, message);
  for (const std::string& p : parts) BOOST_TEST(message.find(p) != std::string::npos, "'" << message << "' lacks '" << p << "'");
}

// The CRC-32C of `bytes` as the writer stores it, 8 lowercase hex digits.
std::string hex_crc32c(const std::string& bytes) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc32c(bytes.data(), bytes.size()));
  return text;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors_format)

BOOST_AUTO_TEST_CASE(layout_is_the_documented_one) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  SafetensorsFile file;
  file.add("w", from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32));
  file.add("ids", Indices(Shape{3}, {7, -1, 1LL << 40}));
  file.metadata["note"] = "hello";
  save_safetensors(path, file);

  const std::string bytes = slurp(path);
  const uint64_t n = header_length(bytes);
  BOOST_TEST((8 + n) % 8 == 0u);  // data section 8-byte aligned
  BOOST_TEST(bytes.size() == 8 + n + 6 * 4 + 3 * 8);
  const Json header = parse_json(bytes.substr(8, n));
  BOOST_TEST(header.at("__metadata__").at("note").get<std::string>() == "hello");
  BOOST_TEST(header.at("w").at("dtype").get<std::string>() == "F32");
  BOOST_TEST(header.at("w").at("shape").dump() == "[2,3]");
  BOOST_TEST(header.at("w").at("data_offsets").dump() == "[0,24]");
  BOOST_TEST(header.at("ids").at("dtype").get<std::string>() == "I64");
  BOOST_TEST(header.at("ids").at("data_offsets").dump() == "[24,48]");
  BOOST_TEST(bytes.substr(8 + n, 24) == f32_bytes({1, 2, 3, 4, 5, 6}));
  int64_t third = 0;
  std::memcpy(&third, bytes.data() + 8 + n + 24 + 16, 8);
  BOOST_TEST(third == (1LL << 40));
}

BOOST_AUTO_TEST_CASE(round_trip_of_every_dtype_and_shape) {
  TempDir dir;
  const std::string path = dir.file("b.safetensors");
  Generator gen(3);
  const Tensor f64 = normal({3, 4}, 0, 1, gen, DType::f64);
  const Tensor f32 = normal({2, 2, 2}, 0, 1, gen, DType::f32);
  const Tensor transposed = f64.t();  // written contiguously, read back with the view's values
  SafetensorsFile file;
  file.add("a.f64", f64);
  file.add("b.f32", f32);
  file.add("c.t", transposed);
  file.add("d.scalar", scalar(2.5, DType::f64));
  file.add("e.empty", zeros({0, 3}, DType::f32));
  file.add("f.ids", Indices(Shape{2, 2}, {0, 1, 2, 3}));
  file.add("g.no_ids", Indices(Shape{0}, {}));
  file.metadata["config"] = R"({"d_model": 64})";
  save_safetensors(path, file);

  const SafetensorsFile back = load_safetensors(path);
  BOOST_REQUIRE(back.entries.size() == 7u);
  BOOST_TEST(back.entries[0].name == "a.f64");  // data order = writing order
  BOOST_TEST(back.find("a.f64")->tensor.to_vector() == f64.to_vector());
  BOOST_TEST(back.find("a.f64")->tensor.dtype() == DType::f64);
  BOOST_TEST(back.find("b.f32")->tensor.to_vector() == f32.to_vector());
  BOOST_TEST(back.find("b.f32")->tensor.dtype() == DType::f32);
  BOOST_TEST(back.find("c.t")->tensor.shape() == Shape({4, 3}));
  BOOST_TEST(back.find("c.t")->tensor.to_vector() == transposed.to_vector());
  BOOST_TEST(back.find("d.scalar")->tensor.shape() == Shape({}));
  BOOST_TEST(back.find("d.scalar")->tensor.item() == 2.5);
  BOOST_TEST(back.find("e.empty")->tensor.shape() == Shape({0, 3}));
  BOOST_TEST((back.find("f.ids")->dtype == SafetensorsDType::I64));
  BOOST_TEST(back.find("f.ids")->indices.data == (std::vector<int64_t>{0, 1, 2, 3}));
  BOOST_TEST(back.find("f.ids")->shape() == Shape({2, 2}));
  BOOST_TEST(back.find("g.no_ids")->indices.numel() == 0);
  BOOST_TEST(back.metadata.at("config") == R"({"d_model": 64})");
  BOOST_TEST(back.find("missing") == nullptr);
}

BOOST_AUTO_TEST_CASE(reads_files_written_by_other_tools) {
  // Hugging Face's writer: padded header, no metadata, names sorted, a BF16-free F32 entry.
  TempDir dir;
  const std::string path = dir.file("hf.safetensors");
  spit(path, craft(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}       )", f32_bytes({0.5f, -2.0f})));
  const SafetensorsFile f = load_safetensors(path);
  BOOST_TEST(f.metadata.empty());
  BOOST_TEST(f.find("x")->tensor.to_vector() == (std::vector<double>{0.5, -2.0}));
}

BOOST_AUTO_TEST_CASE(writing_replaces_the_file_and_leaves_no_temporary) {
  TempDir dir;
  const std::string path = dir.file("c.safetensors");
  SafetensorsFile one, two;
  one.add("x", ones({4}, DType::f32));
  two.add("x", full({4}, 3.0, DType::f32));
  save_safetensors(path, one);
  save_safetensors(path, two);
  BOOST_TEST(load_safetensors(path).find("x")->tensor.to_vector() == std::vector<double>(4, 3.0));
  BOOST_TEST(dir.entries() == std::vector<std::string>{"c.safetensors"});
}

BOOST_AUTO_TEST_CASE(a_failed_write_leaves_the_old_file_intact) {
  TempDir dir;
  const std::string path = dir.file("d.safetensors");
  SafetensorsFile small, big;
  small.add("x", ones({4}, DType::f32));
  save_safetensors(path, small);
  const std::string before = slurp(path);
  big.add("x", zeros({1 << 16}, DType::f32));  // 256 KiB

  // Let the kernel refuse writes beyond 4 KiB (EFBIG) half-way through the new file. Nothing
  // is logged while the limit is active: Boost.Test's own output must not hit it.
  rlimit saved{};
  BOOST_REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  rlimit limited = saved;
  limited.rlim_cur = 4096;
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  std::string message;
  bool threw = false;
  if (::setrlimit(RLIMIT_FSIZE, &limited) == 0) {
    try {
      save_safetensors(path, big);
    } catch (const std::runtime_error& e) {
      threw = true;
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
  }
  std::signal(SIGXFSZ, old_handler);

  BOOST_TEST(threw);
  BOOST_TEST(message.find(path) != std::string::npos, message);
  BOOST_TEST(message.find("previous file") != std::string::npos, message);
  BOOST_TEST(slurp(path) == before);
  BOOST_TEST(dir.entries() == std::vector<std::string>{"d.safetensors"});
  BOOST_TEST(load_safetensors(path).find("x")->tensor.to_vector() == std::vector<double>(4, 1.0));
}

BOOST_AUTO_TEST_CASE(unwritable_places_are_runtime_errors) {
  SafetensorsFile f;
  f.add("x", ones({1}));
  AG_CHECK_THROWS_WITH(save_safetensors("/nonexistent-dir/x.safetensors", f), std::runtime_error,
                       "/nonexistent-dir/x.safetensors", "No such file");
  AG_CHECK_THROWS_WITH(load_safetensors("/nonexistent-dir/x.safetensors"), std::runtime_error,
                       "/nonexistent-dir/x.safetensors", "No such file");
}

BOOST_AUTO_TEST_CASE(atomic_file_discards_without_commit) {
  TempDir dir;
  const std::string path = dir.file("e.txt");
  write_file_atomically(path, "old");
  {
    AtomicFile f(path);
    f.write("new contents");
    BOOST_TEST(dir.entries().size() == 2u);  // the temporary exists while writing
  }
  BOOST_TEST(slurp(path) == "old");
  BOOST_TEST(dir.entries() == std::vector<std::string>{"e.txt"});
  AtomicFile g(path);
  g.write("new");
  g.commit();
  AG_CHECK_THROWS_WITH(g.write("more"), std::logic_error, "already committed");
  BOOST_TEST(read_file(path) == "new");
}

BOOST_AUTO_TEST_CASE(add_rejects_bad_names) {
  SafetensorsFile f;
  f.add("x", ones({1}));
  AG_CHECK_THROWS_WITH(f.add("x", ones({1})), std::invalid_argument, "duplicate", "'x'");
  AG_CHECK_THROWS_WITH(f.add("", ones({1})), std::invalid_argument, "empty");
  AG_CHECK_THROWS_WITH(f.add("__metadata__", ones({1})), std::invalid_argument, "reserved");
  AG_CHECK_THROWS_WITH(f.add("u", Tensor()), std::invalid_argument, "'u'", "undefined");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(safetensors_corrupt_files)

namespace {
const std::string kGoodEntry = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
const std::string kTwoFloats = f32_bytes({1.0f, 2.0f});
}  // namespace

BOOST_AUTO_TEST_CASE(empty_and_truncated_headers) {
  expect_rejected("", {"empty", "0 bytes"});
  expect_rejected("abc", {"truncated header", "3 bytes"});
  std::string too_long = craft("{" + kGoodEntry + "}", kTwoFloats);
  const uint64_t huge = 1000;
  std::memcpy(too_long.data(), &huge, 8);
  expect_rejected(too_long, {"truncated header", "header length 1000", "larger than the rest of the file"});
  // A file cut inside its header.
  expect_rejected(craft("{" + kGoodEntry + "}", kTwoFloats).substr(0, 20), {"truncated header"});
}

BOOST_AUTO_TEST_CASE(bad_json) {
  expect_rejected(craft("{\"x\":{\"dtype\":\"F32\",", kTwoFloats), {"bad JSON"});
  expect_rejected(craft("[1, 2]"), {"the header is an array, not an object"});
  expect_rejected(craft("{\"x\": 3}"), {"tensor 'x'", "not an object"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[2]}})", kTwoFloats), {"tensor 'x'", "data_offsets"});
}

BOOST_AUTO_TEST_CASE(unknown_dtype) {
  expect_rejected(craft(R"({"x":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", kTwoFloats),
                  {"tensor 'x'", "unsupported dtype 'F8_E4M3'"});
  expect_rejected(craft(R"({"x":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", kTwoFloats), {"tensor 'x'", "dtype"});
}

// Half precision is read, widened to f32 exactly: the bytes of 1.0f and 2.0f are, as four
// little-endian BF16 values, 0, 1, 0, 2 (a float's high half is its bfloat16); as F16, four others.
BOOST_AUTO_TEST_CASE(half_precision_tensors_are_widened_to_f32) {
  const SafetensorsFile b = parse_safetensors(craft(R"({"x":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})", kTwoFloats), "bf16");
  BOOST_TEST((b.find("x")->dtype == SafetensorsDType::BF16));
  BOOST_TEST((b.find("x")->tensor.dtype() == DType::f32));
  BOOST_TEST(b.find("x")->tensor.shape() == Shape({2, 2}));
  BOOST_TEST(b.find("x")->tensor.reshape({-1}).to_vector() == (std::vector<double>{0, 1, 0, 2}), boost::test_tools::per_element());
  // 0x3C00 0x4000 0x7BFF 0x0001: 1, 2, the largest F16 and its smallest subnormal.
  const std::string halves("\x00\x3C\x00\x40\xFF\x7B\x01\x00", 8);
  const SafetensorsFile h = parse_safetensors(craft(R"({"x":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", halves), "f16");
  BOOST_TEST(h.find("x")->tensor.to_vector() == (std::vector<double>{1, 2, 65504, std::ldexp(1.0, -24)}),
             boost::test_tools::per_element());
  expect_rejected(craft(R"({"x":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})", kTwoFloats), {"tensor 'x'"});
}

// Every one of the 65,536 bit patterns of each half type (zeros, subnormals, infinities, NaNs
// with their payloads) read and written back: the data section comes out byte for byte.
BOOST_AUTO_TEST_CASE(every_half_value_survives_reading_and_writing) {
  std::string all(65536 * 2, '\0');
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    std::memcpy(all.data() + 2 * h, &bits, 2);
  }
  const std::string header = R"({"f":{"dtype":"F16","shape":[256,256],"data_offsets":[0,131072]},)"
                             R"("b":{"dtype":"BF16","shape":[65536],"data_offsets":[131072,262144]}})";
  const SafetensorsFile read = parse_safetensors(craft(header, all + all), "halves");
  BOOST_TEST((read.find("f")->dtype == SafetensorsDType::F16));
  TempDir dir;
  save_safetensors(dir.file("halves.safetensors"), read);
  const std::string written = slurp(dir.file("halves.safetensors"));
  BOOST_REQUIRE(written.size() > all.size() * 2);
  BOOST_TEST((written.substr(written.size() - all.size() * 2) == all + all));  // the data section ends the file
  const SafetensorsFile back = load_safetensors(dir.file("halves.safetensors"));
  BOOST_TEST((back.find("b")->dtype == SafetensorsDType::BF16));
  BOOST_TEST(back.find("f")->tensor.shape() == Shape({256, 256}));
}

namespace {

uint32_t float_bits(float x) {
  uint32_t b = 0;
  std::memcpy(&b, &x, 4);
  return b;
}
float bits_float(uint32_t b) {
  float x = 0;
  std::memcpy(&x, &b, 4);
  return x;
}

// For every pair of neighbouring non-negative halves h, h + 1 (the last pair being the largest
// finite half and infinity) and their midpoint m: m goes to whichever of the two is even, and
// the floats just below and above m to h and h + 1. The negative side mirrors it.
template <typename Widen, typename Narrow>
void check_rounding(const char* name, Widen widen, Narrow narrow, uint16_t infinity) {
  BOOST_TEST_CONTEXT(name) {
    int wrong = 0;
    for (uint32_t h = 0; h < infinity; ++h) {
      const float lo = widen(static_cast<uint16_t>(h));
      // The midpoint is exact in double, and in float: a half has at most 11 significant bits.
      const double hi = h + 1 == infinity ? 2.0 * lo - widen(static_cast<uint16_t>(h - 1)) : widen(static_cast<uint16_t>(h + 1));
      const auto mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
      const uint32_t even = (h % 2 == 0) ? h : h + 1;
      const bool ok = narrow(lo) == h && narrow(mid) == even && narrow(std::nextafter(mid, 0.0f)) == h &&
                      narrow(std::nextafter(mid, INFINITY)) == h + 1 && narrow(-mid) == (0x8000u | even) &&
                      narrow(-lo) == (0x8000u | h);
      if (!ok && ++wrong <= 5) BOOST_ERROR(name << ": wrong rounding around the half 0x" << std::hex << h);
    }
    BOOST_TEST(wrong == 0);
    BOOST_TEST(narrow(INFINITY) == infinity);
    BOOST_TEST(narrow(-INFINITY) == (0x8000u | infinity));
    BOOST_TEST(narrow(std::numeric_limits<float>::max()) == infinity);  // past the largest half, up to infinity
    // A NaN whose payload lives only in bits the half drops is still a NaN (its quiet bit set).
    const uint16_t nan = narrow(bits_float(0xFF800001u));
    BOOST_TEST((nan & 0x8000u) != 0u);
    BOOST_TEST(std::isnan(widen(nan)));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(narrowing_to_half_rounds_to_nearest_even) {
  check_rounding("F16", f16_to_float, float_to_f16, 0x7C00);
  check_rounding("BF16", bf16_to_float, float_to_bf16, 0x7F80);
  BOOST_TEST(float_to_f16(65519.99f) == 0x7BFFu);  // the largest half, 65504
  BOOST_TEST(float_to_f16(65520.0f) == 0x7C00u);   // the tie above it goes to infinity
  BOOST_TEST(float_bits(bf16_to_float(float_to_bf16(1.0f))) == 0x3F800000u);
}

BOOST_AUTO_TEST_CASE(shape_and_offsets_disagree) {
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", kTwoFloats),
                  {"tensor 'x'", "shape (3,)", "12", "hold 8"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", kTwoFloats),
                  {"tensor 'x'", "shape [-2]"});
  expect_rejected(craft(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", kTwoFloats),
                  {"tensor 'x'", "0 <= begin <= end"});
}

BOOST_AUTO_TEST_CASE(overlapping_holes_and_out_of_range) {
  const std::string four = f32_bytes({1, 2, 3, 4});
  expect_rejected(craft(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        four),
                  {"tensor 'b'", "overlaps tensor 'a'"});
  expect_rejected(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        four),
                  {"bytes [4, 8)", "belong to no tensor", "'b'"});
  expect_rejected(craft("{" + kGoodEntry + "}", kTwoFloats + "junk"), {"4 bytes after the last tensor"});
}

BOOST_AUTO_TEST_CASE(data_truncated) {
  expect_rejected(craft("{" + kGoodEntry + "}", kTwoFloats.substr(0, 5)),
                  {"data truncated", "tensor 'x'", "[0, 8)", "only 5 bytes"});
}

BOOST_AUTO_TEST_CASE(bad_metadata) {
  expect_rejected(craft(R"({"__metadata__":{"v":1},)" + kGoodEntry + "}", kTwoFloats),
                  {"__metadata__ value for 'v'", "not a string"});
  expect_rejected(craft(R"({"__metadata__":"v",)" + kGoodEntry + "}", kTwoFloats), {"__metadata__", "not an object"});
}

BOOST_AUTO_TEST_SUITE_END()

// The metadata's values are checksummed like the tensors' bytes: one flipped bit in a saved
// setting is refused by the key's name, and files written before that still load.
BOOST_AUTO_TEST_SUITE(safetensors_metadata_checksums)

namespace {
// A file with one tensor and the metadata a checkpoint might carry, as its bytes.
std::string file_with_settings() {
  TempDir dir;
  SafetensorsFile file;
  file.add("w", from_vector(std::vector<double>{1, 2}, {2}, DType::f32));
  file.metadata["trainer"] = R"({"lr":0.002,"steps":20})";
  file.metadata["rng_seed"] = "0";
  save_safetensors(dir.file("a.safetensors"), file);
  return slurp(dir.file("a.safetensors"));
}

// `bytes` with one bit of the first occurrence of `needle` flipped (in its byte `at`).
std::string flip_bit(std::string bytes, const std::string& needle, size_t at, unsigned char bit) {
  const size_t pos = bytes.find(needle);
  BOOST_TEST_REQUIRE(pos != std::string::npos, "no '" << needle << "' in the file");
  bytes[pos + at] = static_cast<char>(bytes[pos + at] ^ bit);
  return bytes;
}
}  // namespace

BOOST_AUTO_TEST_CASE(every_metadata_value_has_a_checksum) {
  const std::string bytes = file_with_settings();
  const Json header = parse_json(bytes.substr(8, header_length(bytes)));
  const Json sums = parse_json(header.at("__metadata__").at("crc32c").get<std::string>());
  BOOST_TEST(sums.at("__metadata__").size() == 2u);
  BOOST_TEST(sums.at("__metadata__").at("rng_seed").get<std::string>() == hex_crc32c("0"));
}

BOOST_AUTO_TEST_CASE(a_flipped_bit_in_a_setting_is_refused_by_its_key) {
  const std::string bytes = file_with_settings();
  BOOST_TEST(parse_safetensors(bytes, "intact").metadata.at("trainer") == R"({"lr":0.002,"steps":20})");
  // 0.002 -> 0.003, 20 -> 22, seed 0 -> 1: each one bit.
  expect_rejected(flip_bit(bytes, "0.002", 4, 0x01), {"__metadata__ 'trainer'", "CRC-32C", "changed"});
  expect_rejected(flip_bit(bytes, "\"steps\\\":20", 10, 0x02), {"__metadata__ 'trainer'", "CRC-32C"});
  expect_rejected(flip_bit(bytes, "\"rng_seed\":\"0\"", 12, 0x01), {"__metadata__ 'rng_seed'", "CRC-32C"});
  // A key renamed by a flipped bit has no checksum, and its checksum names a key that is gone.
  expect_rejected(flip_bit(bytes, "\"rng_seed\":\"0\"", 1, 0x01), {"'sng_seed'", "no checksum"});
}

BOOST_AUTO_TEST_CASE(files_without_metadata_checksums_load_as_they_are) {
  // As written before the metadata was checksummed: tensor checksums only.
  const std::string two_floats = f32_bytes({1.0f, 2.0f});
  const std::string crc = hex_crc32c(two_floats);
  const std::string old_style = R"({"__metadata__":{"lr":"0.003","crc32c":"{\"x\":\")" + crc + R"(\"}"},)" +
                                R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const SafetensorsFile file = parse_safetensors(craft(old_style, two_floats), "old");
  BOOST_TEST(file.checksummed);
  BOOST_TEST(file.metadata.at("lr") == "0.003");  // not verifiable: read as it is
  // Its tensors are still verified.
  expect_rejected(craft(old_style, f32_bytes({1.0f, 3.0f})), {"tensor 'x'", "CRC-32C"});
}

BOOST_AUTO_TEST_CASE(bad_metadata_checksums_are_named) {
  const std::string two_floats = f32_bytes({1.0f, 2.0f});
  const std::string x = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string x_sum = R"(\"x\":\")" + hex_crc32c(two_floats) + R"(\")";
  const auto with = [&](const std::string& metadata, const std::string& meta_sums) {
    return craft(R"({"__metadata__":{)" + metadata + R"("crc32c":"{)" + x_sum + R"(,\"__metadata__\":)" + meta_sums +
                     R"(}"},)" + x + "}",
                 two_floats);
  };
  const std::string v_sum = hex_crc32c("v");
  BOOST_TEST(parse_safetensors(with(R"("k":"v",)", R"({\"k\":\")" + v_sum + R"(\"})"), "ok").metadata.at("k") == "v");
  expect_rejected(with(R"("k":"v",)", "{}"), {"__metadata__ 'k'", "no checksum"});
  expect_rejected(with("", R"({\"k\":\")" + v_sum + R"(\"})"), {"metadata key 'k'", "does not have"});
  expect_rejected(with(R"("k":"v",)", R"({\"k\":7})"), {"metadata key 'k'", "not 8 hex digits"});
  expect_rejected(with(R"("k":"v",)", R"(\"v\")"), {"under '__metadata__'", "not an object"});
}

BOOST_AUTO_TEST_SUITE_END()

// Headers of many entries: reading them takes time linear in the header whatever shape its
// entries have, and a header may list no more tensors than its data section can hold. Nothing
// is timed here; a loader that is quadratic again runs into the time limit of this suite's
// own meson test (tests/train/meson.build).
BOOST_AUTO_TEST_SUITE(safetensors_large_headers)

namespace {
constexpr int kManyEntries = 150'000;

// {"t0000000":<entry 0>,"t0000001":<entry 1>,...}: `entry(i)` is the text after the colon.
template <typename Entry>
std::string header_of(int n, Entry entry) {
  std::string text = "{";
  char name[16];
  for (int i = 0; i < n; ++i) {
    std::snprintf(name, sizeof name, "\"t%07d\":", i);
    text += (i ? "," : "") + std::string(name) + entry(i);
  }
  return text + "}";
}

std::string empty_entry(int) { return R"({"dtype":"F32","shape":[0],"data_offsets":[0,0]})"; }
}  // namespace

BOOST_AUTO_TEST_CASE(a_header_of_150000_object_entries_loads) {
  const std::string header = header_of(kManyEntries, [](int i) {
    return R"({"dtype":"F32","shape":[1],"data_offsets":[)" + std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]}";
  });
  std::vector<float> values(kManyEntries);
  for (int i = 0; i < kManyEntries; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i);
  const SafetensorsFile file = parse_safetensors(craft(header, f32_bytes(values)), "many");
  BOOST_REQUIRE(file.entries.size() == static_cast<size_t>(kManyEntries));
  BOOST_TEST(file.entries.back().name == "t0149999");
  BOOST_TEST(file.entries.back().tensor.item() == kManyEntries - 1.0);
}

BOOST_AUTO_TEST_CASE(more_entries_than_the_data_section_holds_are_refused) {
  // 150,000 empty tensors and no data: refused by their count, before the document is built.
  expect_rejected(craft(header_of(kManyEntries, empty_entry)), {"150000 tensors", "0-byte data section", "at most 4096"});
  // One tensor per 4 bytes of data, plus 4096 empty ones: 4098 entries over 8 bytes are the
  // most; one more is refused.
  const std::string two_floats = f32_bytes({1.0f, 2.0f});
  const auto entries = [](int n) {
    return header_of(n, [](int i) {
      return i < 2 ? R"({"dtype":"F32","shape":[1],"data_offsets":[)" + std::to_string(4 * i) + "," +
                         std::to_string(4 * i + 4) + "]}"
                   : empty_entry(i);
    });
  };
  BOOST_TEST(parse_safetensors(craft(entries(4098), two_floats), "most").entries.size() == 4098u);
  expect_rejected(craft(entries(4099), two_floats), {"4099 tensors", "8-byte data section", "at most 4098"});
  // __metadata__ is not a tensor and does not count.
  const std::string with_metadata = R"({"__metadata__":{"k":"v"},)" + entries(4098).substr(1);
  BOOST_TEST(parse_safetensors(craft(with_metadata, two_floats), "meta").entries.size() == 4098u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace ag::testing
