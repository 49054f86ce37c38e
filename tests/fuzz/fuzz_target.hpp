// The frame of a fuzz target: one reader of untrusted bytes, called the way dtrain calls it.
//
//   DTRAIN_FUZZ_TARGET(megatron_dataset) { ... data, size ... }
//
// A reader may refuse its input with a UserError (or a RecordError, a JSON Lines line's error):
// that is its clear error, and the target returns. Any other exception escaping the reader, a crash,
// a sanitizer report, a leak, an allocation over the bound or a run over the time limit is a finding.
// Built with -DDTRAIN_FUZZ=ON (clang), each target is a libFuzzer program (LLVMFuzzerTestOneInput);
// otherwise every target goes into one replay program (replay_main.cpp) that runs them on files, so
// the corpora replay in every build (CTest fuzz_replay_*).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtrain {
class TokenSource;
}

namespace dtrain::fuzz {

using Body = void (*)(const std::uint8_t* data, std::size_t size);

// Calls body on the input: true when the reader took it; false when it refused it with a UserError or a
// RecordError (the message in *refusal when given); anything else aborts naming it.
bool run(const char* target, Body body, const std::uint8_t* data, std::size_t size, std::string* refusal = nullptr);

// Replay builds: the table of targets, filled before main.
struct Registration {
  Registration(const char* name, Body body);
};
const std::vector<std::pair<std::string, Body>>& registered();

// A directory of this process's own (under /dev/shm when it exists, else TMPDIR or /tmp), removed at
// exit; fuzz targets write their input there as the file the reader opens.
const std::string& scratch_dir();
// Writes bytes to scratch_dir()/name and returns the path.
std::string write_scratch(const std::string& name, std::string_view bytes);

// The input cut at each occurrence of `separator` into at most `parts` pieces (the last takes the rest);
// missing pieces are empty. Lets one input carry several files (a vocabulary and its merges).
std::vector<std::string_view> split(const std::uint8_t* data, std::size_t size, std::string_view separator, int parts);

// Reads every token of the source, and its loss mask when it has one, 64 at a time, as training does.
void read_every_token(const TokenSource& source);

}  // namespace dtrain::fuzz

#define DTRAIN_FUZZ_CONCAT2(a, b) a##b
#define DTRAIN_FUZZ_CONCAT(a, b) DTRAIN_FUZZ_CONCAT2(a, b)

#ifdef DTRAIN_LIBFUZZER
#define DTRAIN_FUZZ_ENTRY(name)                                                       \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    dtrain::fuzz::run(#name, &fuzz_body_##name, data, size);                          \
    return 0;                                                                         \
  }
#else
#define DTRAIN_FUZZ_ENTRY(name) static const dtrain::fuzz::Registration fuzz_registration_##name(#name, &fuzz_body_##name);
#endif

#define DTRAIN_FUZZ_TARGET(name)                                                      \
  static void fuzz_body_##name(const std::uint8_t* data, std::size_t size);           \
  DTRAIN_FUZZ_ENTRY(name)                                                             \
  static void fuzz_body_##name(const std::uint8_t* data, std::size_t size)
