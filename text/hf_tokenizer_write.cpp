// Writing Hugging Face's tokenizer.json (hf_tokenizer.h): a description of ours, a byte-pair
// encoding of train_bpe, or a tokenizer's own file back. Reading is hf_tokenizer.cpp's.
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "attograd/text/hf_bpe.h"
#include "attograd/text/hf_tokenizer.h"
#include "attograd/train/io/json_text.h"

namespace ag {

std::string hf_bpe_json(const HFByteLevelBPE& spec, bool with_kind) {
  // Written by hand: a vocabulary of 150,000 entries kept in id order (as Hugging Face writes it,
  // and readable) would cost nlohmann's ordered object a linear search per key.
  const auto q = [](const std::string& s) { return Json(s).dump(); };
  std::string out = "{";
  if (with_kind) out += "\"kind\":" + q(kHFTokenizerKind) + ",";
  out += "\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[";
  for (size_t i = 0; i < spec.added.size(); ++i) {
    const HFAddedToken& a = spec.added[i];
    const auto b = [](bool v) { return v ? "true" : "false"; };
    out += std::string(i ? "," : "") + "\n{\"id\":" + std::to_string(a.id) + ",\"content\":" + q(a.content) +
           ",\"single_word\":false,\"lstrip\":" + b(a.lstrip) + ",\"rstrip\":" + b(a.rstrip) + ",\"normalized\":" +
           b(a.normalized) + ",\"special\":" + b(a.special) + "}";
  }
  out += "],\n\"normalizer\":" + std::string(spec.nfc ? "{\"type\":\"NFC\"}" : "null");
  out += ",\n\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":" +
         q(spec.pattern) + "},\"behavior\":\"Isolated\",\"invert\":false},"
         "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]}";
  out += ",\n\"post_processor\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}";
  out += ",\n\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}";
  out += ",\n\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
         "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":" + std::string(spec.byte_fallback ? "true" : "false") +
         ",\"ignore_merges\":" + (spec.ignore_merges ? "true" : "false") + ",\n\"vocab\":{";
  std::vector<std::string> text(spec.tokens.size());
  bool first = true;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    text[id] = byte_level_text(spec.tokens[id]);
    if (!spec.in_model[id]) continue;
    out += std::string(first ? "\n" : ",\n") + q(text[id]) + ":" + std::to_string(id);
    first = false;
  }
  out += "},\n\"merges\":[";
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const HFMerge& m = spec.merges[i];
    out += std::string(i ? ",\n" : "\n") + "[" + q(text[static_cast<size_t>(m.left)]) + "," + q(text[static_cast<size_t>(m.right)]) + "]";
  }
  return out + "]}}\n";
}

std::string hf_tokenizer_json(const BytePairEncoding& bpe) {
  HFByteLevelBPE spec;
  spec.pattern = bpe.pattern();
  std::unordered_map<std::string, int32_t> seen;
  const int64_t model_ids = bpe.vocab_size() - static_cast<int64_t>(bpe.specials().size());
  for (int64_t id = 0; id < bpe.vocab_size(); ++id) {
    spec.tokens.push_back(bpe.token_bytes(id));
    spec.in_model.push_back(id < model_ids);
    if (id >= model_ids) continue;
    const auto [it, fresh] = seen.emplace(spec.tokens.back(), static_cast<int32_t>(id));
    if (!fresh) {
      throw std::invalid_argument("hf_tokenizer_json: ids " + std::to_string(it->second) + " and " + std::to_string(id) +
                                  " are the same bytes \"" + byte_level_text(spec.tokens.back()) +
                                  "\", which a tokenizer.json (tokens named by their text) cannot tell apart");
    }
  }
  for (size_t i = 0; i < bpe.merges().size(); ++i) {
    spec.merges.push_back({bpe.merges()[i].left, bpe.merges()[i].right, static_cast<int32_t>(256 + i)});
  }
  for (size_t i = 0; i < bpe.specials().size(); ++i) {
    spec.added.push_back({.id = static_cast<int32_t>(model_ids + static_cast<int64_t>(i)), .content = bpe.specials()[i]});
  }
  return hf_bpe_json(spec, false);
}

std::string tokenizer_json_file(const Tokenizer& tokenizer) {
  const std::string kind = tokenizer.kind_name();
  if (kind == "bpe") return hf_tokenizer_json(tokenizer.byte_pairs());
  if (kind != kHFTokenizerKind) {
    throw std::invalid_argument("tokenizer.json: a " + kind + " tokenizer is not a byte-pair encoding");
  }
  // The description is the file with its "kind" first (hf_bpe_json): the file is the rest.
  std::string json = tokenizer.to_json();
  const std::string head = std::string("{\"kind\":\"") + kHFTokenizerKind + "\",";
  if (!json.starts_with(head)) throw std::logic_error("tokenizer.json: an hf_bpe description without its kind first");
  json.erase(1, head.size() - 1);  // keeps the opening brace
  return json;
}

}  // namespace ag
