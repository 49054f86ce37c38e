// Unicode normalisation of UTF-8 text for tokenizer.json's normalizers (Qwen's {"type": "NFC"}),
// through ICU's Normalizer2, not tables of our own.
#pragma once
#include <string>
#include <string_view>

namespace dtrain {

// The NFC form of `text`. Bytes that are not valid UTF-8 pass through unchanged (each valid run between
// them is normalised on its own), so no input is lost; ASCII text comes back as it is, without a copy
// through ICU.
std::string nfc_utf8(std::string_view text);

}  // namespace dtrain
