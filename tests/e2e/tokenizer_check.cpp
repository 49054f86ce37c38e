// tokenizer_check SPEC TEXT_FILE IDS_OUT: encodes the file with the tokenizer data.tokenizer=SPEC
// names, writes the ids to IDS_OUT (one per line), and fails (exit 1) unless decoding them gives the
// text back byte for byte (the normalised text, where the tokenizer normalises: Qwen's NFC). Prints the token count and the encoding time.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/error.hpp"
#include "config/cli.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

int run(int argc, char** argv) {
  if (argc != 4) throw dtrain::UserError("usage: tokenizer_check SPEC TEXT_FILE IDS_OUT");
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) throw dtrain::UserError(std::string("cannot read '") + argv[2] + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const auto tokenizer = dtrain::make_tokenizer(argv[1]);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::uint32_t> ids = tokenizer->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream out(argv[3]);
  for (std::uint32_t id : ids) out << id << '\n';
  if (!out.flush()) throw dtrain::UserError(std::string("cannot write '") + argv[3] + "'");
  std::printf("tokenizer_check: %s (%s, vocabulary %d): %zu bytes -> %zu tokens in %.3f s\n", argv[1],
              tokenizer->identity().c_str(), tokenizer->vocab_size(), text.size(), ids.size(), seconds);
  const std::string back = tokenizer->decode(ids), want = tokenizer->normalized(text);
  if (want != text) std::printf("tokenizer_check: the tokenizer normalises the text to %zu bytes (from %zu)\n", want.size(), text.size());
  if (back != want) {
    std::size_t at = 0;
    while (at < back.size() && at < want.size() && back[at] == want[at]) ++at;
    std::printf("FAIL: decode(encode(text)) differs from the text at byte %zu (%zu bytes back, %zu in)\n", at, back.size(),
                want.size());
    return 1;
  }
  std::printf("tokenizer_check: decode(encode(text)) == text%s\n", want != text ? " (normalised)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dtrain::run_tool("tokenizer_check", argc, argv, run); }
