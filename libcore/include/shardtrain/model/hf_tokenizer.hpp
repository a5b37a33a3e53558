// The tokenizer files of a Hugging Face export folder for shardtrain's byte tokenizer ("bytes",
// vocab 256: token = the byte's value), so transformers' AutoTokenizer.from_pretrained(dir) encodes
// text exactly as data-prep did and decodes any token sequence back to the text.
//
// tokenizer.json (the `tokenizers` library's format) describes a byte-level BPE with NO merges:
//   pre_tokenizer ByteLevel (add_prefix_space false, use_regex false): every UTF-8 byte of the input
//     becomes one character of GPT-2's printable byte alphabet (hf_byte_alphabet below), no split;
//   model BPE, vocab = those 256 characters -> their byte value, merges [] (so no two bytes ever
//     join: one token per byte, ids equal to data-prep's);
//   decoder ByteLevel: characters back to bytes (the exact inverse).
// The separator byte (bytes: 0, NUL, which no document holds) is the special token "<|endoftext|>"
// instead of its alphabet character: bos, eos and pad are it (generation stops at a document's end),
// and decode(skip_special_tokens=False) writes it as "<|endoftext|>". Every other text, any UTF-8
// without NUL, round-trips: decode(encode(s)) == s.
// tokenizer_config.json: PreTrainedTokenizerFast, the special tokens, model_max_length = the
// context, clean_up_tokenization_spaces false (its default would rewrite " ." as ".").
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace shardtrain {

inline constexpr const char* kHfSeparatorToken = "<|endoftext|>";

// GPT-2's byte alphabet: byte b -> one printable Unicode character (UTF-8 encoded). The printable
// bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 bytes, in increasing
// order, take U+0100, U+0101, ...
std::string hf_byte_alphabet(std::uint8_t byte);

// File name -> JSON content of tokenizer.json, tokenizer_config.json and special_tokens_map.json
// for the byte tokenizer with `separator` (0..255) as the special token and `context` tokens of
// model_max_length.
std::map<std::string, nlohmann::json> hf_byte_tokenizer_files(int separator, int context);

}  // namespace shardtrain
