#include "attograd/train/dist/agreement.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace ag {

namespace {

constexpr size_t kShownDifferences = 3;
constexpr size_t kShownValue = 100;  // characters of a value in the message

// name NUL value NUL ..., which decode() splits back.
std::string encode(const RunIdentity& identity) {
  std::string out;
  for (const auto& [name, value] : identity) {
    out += name;
    out += '\0';
    out += value;
    out += '\0';
  }
  return out;
}

RunIdentity decode(const std::string& text) {
  RunIdentity out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t name_end = text.find('\0', at);
    const size_t value_end = name_end == std::string::npos ? name_end : text.find('\0', name_end + 1);
    if (value_end == std::string::npos) break;
    out.emplace_back(text.substr(at, name_end - at), text.substr(name_end + 1, value_end - name_end - 1));
    at = value_end + 1;
  }
  return out;
}

// FNV-1a, 64 bits, as 16 hexadecimal digits.
std::string hash_text(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string shown(const std::string* value) {
  if (value == nullptr) return "none";
  if (value->size() <= kShownValue) return *value;
  return value->substr(0, kShownValue) + "...";
}

const std::string* find(const RunIdentity& identity, const std::string& name) {
  const auto it = std::find_if(identity.begin(), identity.end(), [&](const auto& item) { return item.first == name; });
  return it == identity.end() ? nullptr : &it->second;
}

// "name: rank 0 has A, rank r has B" for each item that differs, rank 0's order first.
void differences(const RunIdentity& first, const RunIdentity& other, int rank, std::vector<std::string>& out) {
  const auto add = [&](const std::string& name, const std::string* a, const std::string* b) {
    out.push_back(name + ": rank 0 has " + shown(a) + ", rank " + std::to_string(rank) + " has " + shown(b));
  };
  for (const auto& [name, value] : first) {
    const std::string* theirs = find(other, name);
    if (theirs == nullptr || *theirs != value) add(name, &value, theirs);
  }
  for (const auto& [name, value] : other) {
    if (find(first, name) == nullptr) add(name, nullptr, &value);
  }
}

}  // namespace

RunIdentity configuration_identity(const std::string& toml, const std::vector<std::string>& per_rank) {
  RunIdentity out;
  std::istringstream in(toml);
  for (std::string line; std::getline(in, line);) {
    const size_t begin = line.find_first_not_of(" \t"), eq = line.find('=');
    if (begin == std::string::npos || line[begin] == '#' || eq == std::string::npos || eq <= begin) continue;
    std::string key = line.substr(begin, eq - begin);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (std::find(per_rank.begin(), per_rank.end(), key) != per_rank.end()) continue;
    std::string value = line.substr(eq + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    out.emplace_back("--" + key, value);
  }
  return out;
}

void require_same_identity(Communicator& comm, const RunIdentity& identity) {
  if (comm.size() == 1) return;
  const std::string mine = encode(identity);
  const std::vector<std::string> hashes = comm.all_gather(hash_text(mine));
  if (std::all_of(hashes.begin(), hashes.end(), [&](const std::string& h) { return h == hashes.front(); })) return;

  const std::vector<std::string> all = comm.all_gather(mine);
  const RunIdentity first = decode(all.front());
  std::vector<std::string> found;
  for (int r = 1; r < comm.size(); ++r) {
    if (hashes[static_cast<size_t>(r)] != hashes.front()) differences(first, decode(all[static_cast<size_t>(r)]), r, found);
  }
  std::string message = "the ranks disagree on what to train (every rank must be given the same flags, files and "
                        "checkpoint, but for --threads, --quiet and the output paths): ";
  for (size_t i = 0; i < std::min(found.size(), kShownDifferences); ++i) message += (i > 0 ? "; " : "") + found[i];
  if (found.empty()) message += "their descriptions hold the same items in another order";
  if (found.size() > kShownDifferences) {
    message += "; and " + std::to_string(found.size() - kShownDifferences) + " more difference" +
               (found.size() - kShownDifferences == 1 ? "" : "s");
  }
  throw RanksDisagree(message);
}

}  // namespace ag
