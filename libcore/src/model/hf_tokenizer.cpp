#include "shardtrain/model/hf_tokenizer.hpp"

#include "shardtrain/base/error.hpp"

namespace shardtrain {

namespace {

std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

bool stands_for_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

}  // namespace

std::string hf_byte_alphabet(std::uint8_t byte) {
  if (stands_for_itself(byte)) return utf8(byte);
  std::uint32_t n = 0;  // the rank of `byte` among the bytes that do not stand for themselves
  for (int b = 0; b < byte; ++b) n += stands_for_itself(b) ? 0 : 1;
  return utf8(256 + n);
}

std::map<std::string, nlohmann::json> hf_byte_tokenizer_files(int separator, int context) {
  if (separator < 0 || separator > 255)
    throw UsageError("byte tokenizer: separator " + std::to_string(separator) + " is not a byte (0..255)");
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[b == separator ? kHfSeparatorToken : hf_byte_alphabet(std::uint8_t(b))] = b;
  const nlohmann::json special = {{"id", separator},  {"content", kHfSeparatorToken}, {"single_word", false},
                                  {"lstrip", false},  {"rstrip", false},              {"normalized", false},
                                  {"special", true}};
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  nlohmann::json tokenizer = {{"version", "1.0"},
                              {"truncation", nullptr},
                              {"padding", nullptr},
                              {"added_tokens", {special}},
                              {"normalizer", nullptr},
                              {"pre_tokenizer", byte_level},
                              {"post_processor", nullptr},
                              {"decoder", byte_level},
                              {"model",
                               {{"type", "BPE"},
                                {"dropout", nullptr},
                                {"unk_token", nullptr},
                                {"continuing_subword_prefix", nullptr},
                                {"end_of_word_suffix", nullptr},
                                {"fuse_unk", false},
                                {"byte_fallback", false},
                                {"ignore_merges", false},
                                {"vocab", vocab},
                                {"merges", nlohmann::json::array()}}}};
  nlohmann::json special_decoder = special;
  special_decoder.erase("id");
  const nlohmann::json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                 {"bos_token", kHfSeparatorToken},
                                 {"eos_token", kHfSeparatorToken},
                                 {"pad_token", kHfSeparatorToken},
                                 {"add_prefix_space", false},
                                 {"clean_up_tokenization_spaces", false},
                                 {"model_max_length", context},
                                 {"added_tokens_decoder", {{std::to_string(separator), special_decoder}}}};
  const nlohmann::json special_map = {
      {"bos_token", kHfSeparatorToken}, {"eos_token", kHfSeparatorToken}, {"pad_token", kHfSeparatorToken}};
  return {{"tokenizer.json", tokenizer}, {"tokenizer_config.json", config}, {"special_tokens_map.json", special_map}};
}

}  // namespace shardtrain
