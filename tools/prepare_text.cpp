// prepare_text: tokenizes a corpus of any size into token shards for train_gpt, in one streaming
// pass: the text is read a block at a time and encoded in pieces cut where the tokenizer would
// cut anyway (text/text_stream.h), so the tokens are those of the whole text and the
// memory is a few blocks, however large the corpus.
//
//   build/tools/prepare_text --data bible --tokenizer gpt2 --out data/bible
//   build/tools/prepare_text --data big.txt --tokenizer byte --out data/big --val-tokens 1000000
//   build/tools/train_gpt --data data/bible          # the shards record their tokenizer
//
// The first part of the text validates, as llm.c's first shard does: --val-fraction F of its
// bytes (0.1 unless said; 0: no validation shard, train_gpt then validates on the training
// tokens' tail) or --val-tokens N tokens. Shards hold --shard-tokens tokens at most, named
// val_000000.bin, ..., train_000000.bin, ...; they are written in a directory of this run's own
// inside --out and moved into --out once the whole text is tokenized, so a run that fails or is
// stopped (Ctrl-C, SIGTERM, SIGHUP) leaves no shard behind. Sources are joined as train_gpt joins
// them (a newline after a text that does not end with one), corpus names (fortunes, bible)
// allowed. Progress goes to stderr, the summary to stdout. Exit codes: 0 done, 1 error (a file,
// the vocabulary), 2 bad command line, 130 / 143 / 129 stopped by that signal.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "attograd/core/threads.h"
#include "attograd/text/bpe.h"
#include "attograd/text/corpus.h"
#include "attograd/text/text_stream.h"
#include "attograd/text/token_shards.h"
#include "attograd/train/io/atomic_file.h"
#include "attograd/train/io/outputs.h"
#include "attograd/train/stop_signals.h"
#include "common/threads_flag.h"
#include "common/tool_main.h"

namespace {

using namespace ag;
using Clock = std::chrono::steady_clock;

struct Args {
  std::vector<std::string> data;
  std::string tokenizer;
  std::string out;
  double val_fraction = 0.1;
  int64_t val_tokens = -1;  // -1: --val-fraction decides
  int64_t shard_tokens = 100'000'000;
  int64_t chunk_bytes = 1 << 20;  // hidden: tests force many cuts with a small one
  std::string threads = "auto";
};

std::string megabytes(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / 1e6 << " MB";
  return os.str();
}

// Shards of one part (val or train), each closed when it holds shard_tokens tokens.
class ShardSeries {
 public:
  ShardSeries(std::string dir, std::string stem, int token_bytes, std::string tokenizer, int64_t shard_tokens)
      : dir_(std::move(dir)),
        stem_(std::move(stem)),
        token_bytes_(token_bytes),
        tokenizer_(std::move(tokenizer)),
        shard_tokens_(shard_tokens) {}

  void append(const int64_t* tokens, size_t n) {
    while (n > 0) {
      if (!writer_) {
        char name[32];
        std::snprintf(name, sizeof name, "%s_%06zu.bin", stem_.c_str(), files_.size());
        files_.push_back((std::filesystem::path(dir_) / name).string());
        writer_ = std::make_unique<ShardWriter>(files_.back(), token_bytes_, tokenizer_);
      }
      const size_t room = static_cast<size_t>(shard_tokens_ - static_cast<int64_t>(writer_->tokens()));
      const size_t take = std::min(n, room);
      writer_->append(tokens, take);
      tokens += take;
      n -= take;
      total_ += take;
      if (static_cast<int64_t>(writer_->tokens()) == shard_tokens_) close();
    }
  }
  void close() {
    if (writer_) writer_->commit();
    writer_.reset();
  }
  uint64_t total() const { return total_; }
  const std::vector<std::string>& files() const { return files_; }
  // Moves the closed shards to `dir` (on the same file system: a rename each).
  void move_to(const std::string& dir) {
    for (std::string& file : files_) {
      const std::string to = (std::filesystem::path(dir) / std::filesystem::path(file).filename()).string();
      std::filesystem::rename(file, to);
      file = to;
    }
  }

 private:
  std::string dir_, stem_;
  int token_bytes_;
  std::string tokenizer_;  // its description, in every shard's header
  int64_t shard_tokens_;
  std::unique_ptr<ShardWriter> writer_;
  std::vector<std::string> files_;
  uint64_t total_ = 0;
};

// The progress line: bytes read of the total, speed, time left. On a terminal one line
// rewritten in place, elsewhere a line every few seconds.
class Progress {
 public:
  explicit Progress(uint64_t total) : total_(total), start_(Clock::now()), last_(start_), tty_(::isatty(2) == 1) {}
  void update(uint64_t done, bool last = false) {
    const Clock::time_point now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (!last && since < (tty_ ? 0.25 : 5.0)) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
    std::ostringstream os;
    os << "prepare_text: " << megabytes(static_cast<double>(done)) << " of " << megabytes(static_cast<double>(total_));
    if (total_ > 0) os << " (" << 100 * done / total_ << "%)";
    os << ", " << std::fixed << std::setprecision(1) << rate / 1e6 << " MB/s";
    if (!last && rate > 0 && total_ > done) os << ", ETA " << std::setprecision(0) << (total_ - done) / rate << " s";
    std::cerr << (tty_ ? "\r\033[K" : "") << os.str() << (tty_ && !last ? "" : "\n") << std::flush;
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  uint64_t total_;
  Clock::time_point start_, last_;
  bool tty_;
};

// The signal that stopped the run.
struct Interrupted : std::runtime_error {
  explicit Interrupted(int signal) : std::runtime_error("interrupted"), signal(signal) {}
  int signal;
};

// --out, owned by this run until it ends, and a directory inside it for the shards being written,
// named after this process. --out is created when missing and must hold no *.bin; it is locked
// (--out/.prepare_text.lock, train/io/outputs.h), so that a second run on it is refused rather
// than mixing its shards with this one's. At the end the shards' directory is removed with what
// it still holds, and --out too when this run made it and it is left empty.
class Staging {
 public:
  explicit Staging(const std::string& out) : out_(out) {
    namespace fs = std::filesystem;
    std::error_code ec;
    made_out_ = !fs::exists(out, ec);
    fs::create_directories(out, ec);
    if (ec) throw std::runtime_error("--out '" + out + "': cannot create the directory: " + ec.message());
    lock_.add({"--out", (fs::path(out) / ".prepare_text").string()});  // the lock alone: add() reads no kind
    for (const fs::directory_entry& e : fs::directory_iterator(out)) {
      if (e.path().extension() == ".bin") {
        throw UsageError("--out '" + out + "' already holds " + e.path().filename().string() +
                         ": train_gpt would read every *.bin there; give an empty directory");
      }
    }
    dir = (fs::path(out) / (".prepare_text-" + std::to_string(::getpid()) + ".partial")).string();
    // The lock is ours, so any other run's shards' directory here is one a killed run left (kill
    // -9 runs no destructor): nothing will move it in any more.
    for (const fs::directory_entry& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(".prepare_text-", 0) == 0 && name.ends_with(".partial") && e.path() != fs::path(dir)) {
        fs::remove_all(e.path(), ec);
      }
    }
    fs::create_directory(dir, ec);
    if (ec) throw std::runtime_error("--out: cannot create '" + dir + "': " + ec.message());
  }
  ~Staging() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    lock_ = OutputLocks();  // released, its file removed
    if (made_out_ && std::filesystem::is_empty(out_, ec)) std::filesystem::remove(out_, ec);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  std::string dir;  // where the shards are written

 private:
  std::string out_;
  bool made_out_ = false;
  OutputLocks lock_;
};

Tokenizer choose_tokenizer(const std::string& choice) {
  if (choice == "byte") return Tokenizer::bytes();
  if (choice == "char") {
    throw UsageError("--tokenizer char: a character vocabulary is built from a whole text; use byte, gpt2 or a "
                     "vocabulary file of train_bpe");
  }
  return Tokenizer::bpe(choice == "gpt2" ? BytePairEncoding::gpt2() : BytePairEncoding::load(choice));
}

int run(const Args& a) {
  set_num_threads(parse_threads(a.threads));
  namespace fs = std::filesystem;
  const Tokenizer tokenizer = choose_tokenizer(a.tokenizer);
  const int token_bytes = shard_token_bytes(tokenizer.vocab_size());
  const std::vector<int64_t> bytes_of = tokenizer.token_bytes();

  // The sizes first, for the progress line and --val-fraction; a corpus name is read now (it
  // is a few MB and has no file of its own).
  std::vector<std::string> texts(a.data.size());
  uint64_t total = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const std::string& source = a.data[i];
    if (is_corpus_name(source)) {
      texts[i] = read_corpus_sources({source}).text;
      total += texts[i].size();
    } else {
      const FileReader file(source);  // refuses what is not a regular file, naming it
      if (file.size() == 0) throw std::invalid_argument("'" + source + "' is empty");
      total += file.size();
    }
  }
  // The shards are written in a directory of their own inside --out and moved into it only once
  // the whole text is tokenized: a run that fails, or that Ctrl-C, SIGTERM or SIGHUP stops,
  // leaves --out as it found it (train_gpt would read a part of the corpus as if it were all).
  const Staging staging(a.out);
  std::atomic<int> stop{0};
  const StopOnSignals on_signals(stop);

  const uint64_t val_quota_bytes = static_cast<uint64_t>(a.val_fraction * static_cast<double>(total));
  const std::string description = tokenizer.to_json();
  ShardSeries val(staging.dir, "val", token_bytes, description, a.shard_tokens);
  ShardSeries train(staging.dir, "train", token_bytes, description, a.shard_tokens);
  uint64_t val_bytes = 0;
  // Each token to the validation shards while the first part lasts, then to the training ones,
  // in pieces between which a stop request is answered (a small --shard-tokens makes a block of
  // text thousands of files).
  const int64_t piece = std::min<int64_t>(a.shard_tokens, 1 << 20);  // a shard, or 1M tokens of a large one
  const auto write = [&](ShardSeries& series, const int64_t* first, size_t n) {
    for (size_t at = 0; at < n; at += static_cast<size_t>(piece)) {
      if (const int signal = stop.load()) throw Interrupted(signal);
      series.append(first + at, std::min(n - at, static_cast<size_t>(piece)));
    }
  };
  const auto route = [&](const std::vector<int64_t>& ids) {
    size_t i = 0;
    if (a.val_tokens >= 0) {
      while (i < ids.size() && static_cast<int64_t>(val.total()) + static_cast<int64_t>(i) < a.val_tokens) ++i;
    } else {
      for (; i < ids.size() && val_bytes < val_quota_bytes; ++i) val_bytes += static_cast<uint64_t>(bytes_of[ids[i]]);
    }
    write(val, ids.data(), i);
    if (i == ids.size()) return;
    val.close();  // the first part is over
    write(train, ids.data() + i, ids.size() - i);
  };

  ChunkedEncoder encoder(tokenizer, static_cast<size_t>(a.chunk_bytes));
  Progress progress(total);
  std::vector<int64_t> ids;
  uint64_t done = 0;
  char last = '\n';
  std::string block(static_cast<size_t>(std::min<int64_t>(a.chunk_bytes, 1 << 20)), '\0');
  const auto feed = [&](const std::string& name, uint64_t offset, std::string_view piece) {
    if (const int signal = stop.load()) throw Interrupted(signal);
    const size_t nul = piece.find('\0');
    if (nul != std::string_view::npos) {
      throw std::invalid_argument("'" + name + "' holds a NUL byte at offset " + std::to_string(offset + nul) +
                                  ": it is not text (a binary file, or UTF-16: convert it to UTF-8)");
    }
    ids.clear();
    encoder.push(piece, ids);
    route(ids);
    done += piece.size();
    last = piece.back();
    progress.update(done);
  };
  for (size_t i = 0; i < a.data.size(); ++i) {
    // As read_corpus_sources joins texts: a newline where one does not end with one.
    if (i > 0 && last != '\n') feed("(a newline between sources)", 0, "\n");
    if (is_corpus_name(a.data[i])) {
      for (size_t at = 0; at < texts[i].size(); at += block.size()) {
        feed(a.data[i], at, std::string_view(texts[i]).substr(at, block.size()));
      }
      texts[i].clear();
      texts[i].shrink_to_fit();
      continue;
    }
    const FileReader file(a.data[i]);
    for (uint64_t at = 0; at < file.size(); at += block.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), file.size() - at));
      file.read(at, block.data(), n);
      feed(a.data[i], at, std::string_view(block.data(), n));
    }
  }
  ids.clear();
  encoder.finish(ids);
  route(ids);
  val.close();
  train.close();
  progress.update(done, true);
  if (train.total() == 0) {
    throw std::invalid_argument("no training tokens: the validation part took all " + std::to_string(val.total()) +
                                " (lower --val-fraction or --val-tokens)");
  }
  // Into place. The signals are no longer polled, so a stop request cannot cut this short; the
  // validation shards go first, so that a set cut short by SIGKILL has no training shards.
  for (ShardSeries* series : {&val, &train}) series->move_to(a.out);

  const double seconds = progress.seconds();
  std::cout << "prepare_text: " << done << " bytes of text -> " << val.total() + train.total() << " tokens ("
            << tokenizer.kind_name() << " tokenizer, vocab " << tokenizer.vocab_size() << ", "
            << (token_bytes == 2 ? "uint16" : "uint32") << " shards)\n";
  const auto list = [](const char* what, const ShardSeries& s) {
    std::cout << what << s.total() << " tokens in " << s.files().size() << (s.files().size() == 1 ? " shard" : " shards");
    if (!s.files().empty()) {
      std::cout << ": " << s.files().front();
      if (s.files().size() > 1) std::cout << " ... " << fs::path(s.files().back()).filename().string();
    }
    std::cout << "\n";
  };
  list("  val   ", val);
  list("  train ", train);
  std::cout << std::fixed << std::setprecision(1) << "  " << megabytes(static_cast<double>(done)) << " in " << seconds
            << " s: " << (seconds > 0 ? static_cast<double>(done) / seconds / 1e6 : 0.0) << " MB/s\n"
            << "train with: train_gpt --data " << a.out << " (the shards name their tokenizer)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Tokenizes a corpus of any size into token shards for train_gpt, in one streaming pass.",
               tool_name(argc, argv, "prepare_text")};
  app.add_option("--data", args.data, "text files or corpus names (fortunes, bible), joined in order")
      ->required()
      ->check(nonempty_path())
      ->expected(1, CLI::detail::expected_max_vector_size);
  app.add_option("--tokenizer", args.tokenizer, "byte, gpt2, or a vocabulary file written by train_bpe")
      ->required()
      ->check(nonempty_path());
  app.add_option("--out", args.out, "the directory for the shards (created; must hold no *.bin)")
      ->required()
      ->check(nonempty_path());
  CLI::Option* fraction = app.add_option("--val-fraction", args.val_fraction,
                                         "the first part of the text, by bytes, that validates (0: none)")
                              ->check(real_in(0.0, 0.999))
                              ->capture_default_str();
  app.add_option("--val-tokens", args.val_tokens, "the first N tokens validate (instead of --val-fraction)")
      ->check(integer_in<int64_t>(0, INT64_MAX))
      ->excludes(fraction);
  app.add_option("--shard-tokens", args.shard_tokens, "tokens per shard at most")
      ->check(integer_in<int64_t>(1, int64_t{1} << 40))
      ->capture_default_str();
  // Listed with the others: CLI11 leaves a hidden option's name out of its messages.
  app.add_option("--chunk-bytes", args.chunk_bytes,
                 "bytes of text read per block (tests use small blocks, to cut a small text many times)")
      ->check(integer_in<int64_t>(1, int64_t{1} << 30))
      ->capture_default_str();
  add_threads_flag(app, args.threads, "threads for byte-pair encoding");
  return tool_main(app, argc, argv, [&] {
    try {
      return run(args);
    } catch (const Interrupted& e) {
      std::cerr << "prepare_text: stopped by signal " << e.signal << "; --out '" << args.out << "' is as it was\n";
      return 128 + e.signal;
    }
  });
}
