// Tokenizers without downloaded files: GPT-2's pre-tokenisation pattern piece by piece, the byte
// tokenizer, the data.tokenizer grammar, and token files carrying a tokenizer identity (version 2).
#include <catch2/catch.hpp>


#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/tokenizer_spec.hpp"
#include "data/token_file.hpp"
#include "support/scratch_files.hpp"
#include "support/user_error.hpp"
#include "tokenizer/gpt2_pretokenize.hpp"
#include "tokenizer/unicode_normalize.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace dtrain;

namespace {

std::vector<std::string> pieces(const std::string& text,
                                void (*pretokenize)(std::string_view, const std::function<void(std::string_view)>&) = gpt2_pretokenize) {
  std::vector<std::string> out;
  pretokenize(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

}  // namespace

TEST_CASE("GPT-2 pre-tokenisation splits as the pattern does", "[tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("I'm here, they'll go") == V{"I", "'m", " here", ",", " they", "'ll", " go"});
  CHECK(pieces("a  b") == V{"a", " ", " b"});                // \s+(?!\S) leaves the last space
  CHECK(pieces("end.\n\nNext") == V{"end", ".", "\n", "\n", "Next"});
  CHECK(pieces("tail   ") == V{"tail", "   "});              // whitespace at the end stays whole
  CHECK(pieces("x 123 ?!") == V{"x", " 123", " ?!"});
  CHECK(pieces("'hello") == V{"'", "hello"});
  CHECK(pieces("caf\xC3\xA9 \xE2\x80\x94 na\xC3\xAFve") == V{"caf\xC3\xA9", " \xE2\x80\x94", " na\xC3\xAFve"});  // é, —, ï
  CHECK(pieces("a\xFF" "b") == V{"a", "\xFF", "b"});         // an invalid byte is one piece of its own
}

// Llama 3's pattern, worked by hand through its alternatives in order:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
TEST_CASE("Llama 3 pre-tokenisation splits as its pattern does", "[tokenizer]") {
  using V = std::vector<std::string>;
  const auto llama3 = [](const std::string& text) { return pieces(text, llama3_pretokenize); };
  CHECK(llama3("it's HELLO I'M") == V{"it", "'s", " HELLO", " I", "'M"});
  CHECK(llama3("x'Sam") == V{"x", "'S", "am"});  // contractions in either ASCII case, before the letters
  CHECK(llama3("(hello") == V{"(hello"});        // one character of neither kind joins the letters
  // Two spaces before digits: \s+(?!\S) leaves one, and the last is \s+ alone (digits are no letters);
  // digits go three at a time; \s*[\r\n]+ ends at the last line break of a whitespace run.
  CHECK(llama3("  12345\r\n\r\n  x") == V{" ", " ", "123", "45", "\r\n\r\n", " ", " x"});
  CHECK(llama3("a!!\n\nb") == V{"a", "!!\n\n", "b"});     // punctuation keeps the line breaks after it
  CHECK(llama3("a \xEF\xBB\xBF" "b") == V{"a", " \xEF\xBB\xBF", "b"});  // U+FEFF is no White_Space
  CHECK(llama3("x \xC2\x85y") == V{"x", " ", "\xC2\x85y"});               // U+0085 (NEL) is
}

// Qwen's pattern is Llama 3's with \p{N} for \p{N}{1,3}: digits one at a time, of any script.
TEST_CASE("Qwen pre-tokenisation splits digits one at a time", "[tokenizer]") {
  using V = std::vector<std::string>;
  const auto qwen2 = [](const std::string& text) { return pieces(text, qwen2_pretokenize); };
  CHECK(qwen2("  12345\r\n\r\n  x") == V{" ", " ", "1", "2", "3", "4", "5", "\r\n\r\n", " ", " x"});
  CHECK(qwen2("it's HELLO I'M") == V{"it", "'s", " HELLO", " I", "'M"});
  CHECK(qwen2("x\xD9\xA1\xD9\xA2") == V{"x", "\xD9\xA1", "\xD9\xA2"});  // Arabic-Indic digits, each alone
}

// NFC through ICU: a decomposed accent composes, Hangul jamo compose into a syllable, a mark with no
// precomposed form stays, ASCII is untouched, and bytes that are not UTF-8 pass through between runs.
TEST_CASE("NFC normalisation of UTF-8 keeps invalid bytes", "[tokenizer]") {
  CHECK(nfc_utf8("plain ASCII") == "plain ASCII");
  CHECK(nfc_utf8("cafe\xCC\x81") == "caf\xC3\xA9");
  CHECK(nfc_utf8("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB") == "\xED\x95\x9C");  // U+1112 U+1161 U+11AB -> U+D55C
  CHECK(nfc_utf8("q\xCC\x83") == "q\xCC\x83");
  CHECK(nfc_utf8("e\xCC\x81\xFF\xC3" "e\xCC\x81") == "\xC3\xA9\xFF\xC3\xC3\xA9");
  CHECK(nfc_utf8("") == "");
}

// JSON a user downloads is parsed under bounds: a tokenizer.json nesting 300,000 arrays (which
// crashed the copy and the dump that followed the parse) is one error naming the file and the bound.
TEST_CASE("a deeply nested tokenizer.json is one error", "[tokenizer]") {
  testing::TempDir dir;
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  const std::string text = R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": )" + deep + "}";
  testing::save_bytes(dir.file("tokenizer.json"), std::vector<std::uint8_t>(text.begin(), text.end()));
  const std::string e = testing::error_of([&] { make_tokenizer("hf:" + dir.file("")); });
  INFO(e);
  CHECK(testing::contains(e, "tokenizer.json' is not valid JSON (nested deeper than 64 levels)"));
}

TEST_CASE("the byte tokenizer round-trips every byte", "[tokenizer]") {
  const auto t = make_tokenizer("byte");
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const auto ids = t->encode(all);
  CHECK(ids[255] == 255);
  CHECK(t->decode(ids) == all);
  CHECK(t->identity() == "byte");
  CHECK_THROWS_AS(t->decode({256}), UserError);
}

TEST_CASE("data.tokenizer values", "[tokenizer]") {
  CHECK(parse_tokenizer_spec("gpt2").arg == kGpt2DefaultDir);
  CHECK(parse_tokenizer_spec("gpt2:/x").arg == "/x");
  CHECK(parse_tokenizer_spec("sentencepiece:m.model").kind == TokenizerKind::sentencepiece);
  CHECK(parse_tokenizer_spec("gpt2").kind == TokenizerKind::gpt2);
  CHECK(parse_tokenizer_spec("byte").kind == TokenizerKind::byte);
  for (const char* bad : {"bpe", "sentencepiece", "sentencepiece:", "gpt2:", "byte:x"})
    CHECK(testing::contains(testing::error_of([&] { parse_tokenizer_spec(bad); }), "unknown tokenizer"));
  CHECK(testing::contains(testing::error_of([] { make_tokenizer("sentencepiece:/no/such.model"); }), "/no/such.model"));
}

TEST_CASE("token files carry the tokenizer identity; byte files stay version 1", "[tokenizer][data]") {
  const testing::TempDir dir;
  const std::string path = dir.file("tokens.bin");
  TokenFile::write(path, {1, 300, 2}, 1000, "gpt2@0123456789abcdef");
  const TokenFile f = TokenFile::open(path, 1000);
  CHECK(f.tokenizer() == "gpt2@0123456789abcdef");
  std::vector<int> ids(3);
  f.read(0, 3, ids.data());
  CHECK(ids == std::vector<int>{1, 300, 2});
  TokenFile::write(path, {1, 2}, 256);
  CHECK(TokenFile::open(path, 256).tokenizer() == "byte");
}

TEST_CASE("the run's tokenizer must have made the files and fit the model's vocabulary", "[tokenizer]") {
  const std::unique_ptr<Tokenizer> byte = make_tokenizer("byte");
  CHECK(byte->identity() == "byte");
  CHECK_NOTHROW(check_made_with("byte", byte->identity(), "byte", "token file 'd.bin'"));
  const std::string e = testing::error_of([&] { check_made_with("byte", byte->identity(), "gpt2@0123456789abcdef", "token file 'd.bin'"); });
  CHECK(testing::contains(e, "token file 'd.bin' was made with tokenizer gpt2@0123456789abcdef, but data.tokenizer=byte is byte"));
  CHECK_NOTHROW(check_vocab_fits(*byte, 256, "the run"));
  CHECK(testing::contains(testing::error_of([&] { check_vocab_fits(*byte, 255, "the run"); }),
                          "has a vocabulary of 256, more than model.vocab_size=255 of the run"));
}
