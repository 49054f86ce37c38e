// nfc_utf8 (tokenizer/unicode_normalize.hpp): ICU's NFC Normalizer2 over the valid UTF-8 runs of a text.
#include "tokenizer/unicode_normalize.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/utf8.h>

#include "common/error.hpp"

namespace dtrain {
namespace {

const icu::Normalizer2& nfc() {
  static const icu::Normalizer2* const normalizer = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status)) fatal(std::string("ICU's NFC normalizer is unavailable: ") + u_errorName(status));
    return n;
  }();
  return *normalizer;
}

// Appends the NFC form of valid UTF-8 `run` to `out`.
void append_nfc(std::string_view run, std::string& out) {
  if (run.empty()) return;
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(run.data(), static_cast<int32_t>(run.size()));
  if (nfc().isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
    out.append(run);
    return;
  }
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out);
  nfc().normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) fatal(std::string("ICU's NFC normalisation failed: ") + u_errorName(status));
}

}  // namespace

std::string nfc_utf8(std::string_view text) {
  std::size_t ascii = 0;
  while (ascii < text.size() && static_cast<unsigned char>(text[ascii]) < 0x80) ++ascii;
  if (ascii == text.size()) return std::string(text);
  // The last ASCII character may compose with the marks after it: the first run starts there.
  const std::size_t start = ascii > 0 ? ascii - 1 : 0;
  std::string out(text.substr(0, start));
  // The rest in valid runs, each invalid byte copied as it is between them.
  const auto* s = reinterpret_cast<const std::uint8_t*>(text.data());
  const auto length = static_cast<int32_t>(text.size());
  int32_t run = static_cast<int32_t>(start), i = run;
  while (i < length) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c >= 0) continue;
    append_nfc(text.substr(static_cast<std::size_t>(run), static_cast<std::size_t>(at - run)), out);
    out.append(text.substr(static_cast<std::size_t>(at), static_cast<std::size_t>(i - at)));
    run = i;
  }
  append_nfc(text.substr(static_cast<std::size_t>(run)), out);
  return out;
}

}  // namespace dtrain
