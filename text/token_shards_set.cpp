// Token shards: the sets (token_shards.h): the files of the arguments, their names (which
// validate), the tokenizer they agree on, and the set opened.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "attograd/text/token_shards.h"

namespace ag {

namespace {

std::string quoted(const std::string& path) { return "'" + path + "'"; }

// The words of a file name: split at '_', '-' and '.'.
std::vector<std::string> name_words(const std::string& name) {
  std::vector<std::string> words(1);
  for (const char c : name) {
    if (c == '_' || c == '-' || c == '.') {
      words.emplace_back();
    } else {
      words.back() += c;
    }
  }
  return words;
}

}  // namespace

bool names_token_shards(const std::string& argument) {
  std::error_code ec;
  if (std::filesystem::is_directory(argument, ec)) return true;
  return argument.size() > 4 && argument.compare(argument.size() - 4, 4, ".bin") == 0;
}

bool is_validation_shard(const std::string& path) {
  const std::vector<std::string> words = name_words(std::filesystem::path(path).filename().string());
  return std::find(words.begin(), words.end(), "val") != words.end();
}

std::vector<std::string> list_token_shards(const std::vector<std::string>& arguments) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& a : arguments) {
    std::error_code ec;
    if (!fs::is_directory(a, ec)) {
      files.push_back(a);
      continue;
    }
    std::vector<std::string> here;
    for (const fs::directory_entry& e : fs::directory_iterator(a, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() <= 4 || name.compare(name.size() - 4, 4, ".bin") != 0) continue;
      std::error_code kind;
      if (!e.is_regular_file(kind)) {
        // A name that says shard and a file that is not one: a link to nothing, a folder, a pipe.
        std::error_code link;
        const bool is_link = e.is_symlink(link);
        throw std::runtime_error("token shards: " + quoted(e.path().string()) + " in " + quoted(a) + " is " +
                                 (is_link && !fs::exists(e.path(), link)
                                      ? "a symbolic link to " + quoted(fs::read_symlink(e.path(), link).string()) +
                                            ", which does not exist"
                                      : std::string("not a regular file")) +
                                 " (move it out of the folder, or name the shards one by one)");
      }
      here.push_back(e.path().string());
    }
    if (ec) throw std::runtime_error("token shards: cannot list " + quoted(a) + ": " + ec.message());
    if (here.empty()) throw std::runtime_error("token shards: the directory " + quoted(a) + " holds no *.bin file");
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  if (files.empty()) throw std::runtime_error("token shards: no shard file given");
  return files;
}

namespace {

// The description the files agree on; runtime_error naming two that differ.
std::string agreed_tokenizer(const std::vector<ShardInfo>& infos) {
  for (const ShardInfo& i : infos) {
    const ShardInfo& first = infos.front();
    if (i.tokenizer == first.tokenizer) continue;
    const auto says = [](const ShardInfo& s) {
      return quoted(s.path) + (s.tokenizer.empty() ? std::string(" (") + shard_layout_name(s.layout) +
                                                          "'s layout) records no tokenizer"
                                                    : " records " + describe_tokenizer_json(s.tokenizer));
    };
    throw std::runtime_error("token shards: the files were made by different tokenizers: " + says(first) + ", " +
                             says(i) + " (give the files of one prepare_text run)");
  }
  return infos.front().tokenizer;
}

}  // namespace

std::string shard_set_tokenizer(const std::vector<std::string>& arguments, ShardFormat format) {
  std::vector<ShardInfo> infos;
  for (const std::string& path : list_token_shards(arguments)) infos.push_back(read_shard_header(path, format));
  return agreed_tokenizer(infos);
}

ShardSet open_shard_set(const std::vector<std::string>& arguments, int64_t vocab, double train_fraction,
                        ShardFormat format) {
  if (!(train_fraction > 0 && train_fraction < 1)) {
    throw std::invalid_argument("open_shard_set: train_fraction must lie in (0, 1), got " + std::to_string(train_fraction));
  }
  ShardSet set;
  // The headers agree before any file is read whole.
  set.tokenizer = shard_set_tokenizer(arguments, format);
  std::vector<std::shared_ptr<const TokenShard>> train, val;
  for (const std::string& path : list_token_shards(arguments)) {
    auto shard = std::make_shared<const TokenShard>(path, vocab, format);
    if (is_validation_shard(path)) {
      set.val_files.push_back(shard->info());
      val.push_back(std::move(shard));
    } else {
      set.train_files.push_back(shard->info());
      train.push_back(std::move(shard));
    }
  }
  if (train.empty()) {
    throw std::runtime_error("token shards: every file given validates (its name has the word 'val'), none trains: "
                             "give the training shards too");
  }
  set.train = TokenStream(std::move(train));
  if (val.empty()) {
    const uint64_t n = set.train.size();
    const uint64_t cut = std::min(n, static_cast<uint64_t>(std::floor(static_cast<double>(n) * train_fraction)));
    set.val = set.train.slice(cut, n);
    set.train = set.train.slice(0, cut);
    set.val_is_tail = true;
  } else {
    set.val = TokenStream(std::move(val));
  }
  return set;
}

}  // namespace ag
