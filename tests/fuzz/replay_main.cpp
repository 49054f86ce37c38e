// fuzz_replay: every fuzz target in one program for builds without libFuzzer, so that each corpus (the
// seeds and every input that once found a defect) runs in every build as CTest fuzz_replay_<target>.
//   fuzz_replay TARGET PATH...    runs TARGET on each file (directories: every file under them)
//   fuzz_replay --list            the targets
// A seed (a file named seed-*: a valid file from a writer) that the reader refuses fails the replay: the
// seeds stay valid, so the fuzzer starts deep in the reader, and a reader that stops taking a valid
// file is caught here.
// A single C++ allocation over DTRAIN_FUZZ_MAX_ALLOC_MB (default 256, libFuzzer's -malloc_limit_mb in
// tools/fuzz) aborts, naming the input; the libFuzzer builds bound every allocation the same way.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.hpp"

namespace {
std::size_t g_max_alloc = std::size_t{256} << 20;
const char* g_input = "";
}  // namespace

void* operator new(std::size_t n) {
  if (n > g_max_alloc) {
    std::fprintf(stderr, "fuzz_replay: %s: one allocation of %zu bytes, over the bound of %zu\n", g_input, n, g_max_alloc);
    std::abort();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using dtrain::fuzz::registered;
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const auto& [name, body] : registered()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_replay TARGET PATH... | --list\n");
    return 2;
  }
  if (const char* mb = std::getenv("DTRAIN_FUZZ_MAX_ALLOC_MB")) g_max_alloc = std::size_t(std::atoll(mb)) << 20;
  const auto it = std::find_if(registered().begin(), registered().end(), [&](const auto& t) { return t.first == argv[1]; });
  if (it == registered().end()) {
    std::fprintf(stderr, "fuzz_replay: no target '%s' (--list shows them)\n", argv[1]);
    return 2;
  }
  std::vector<std::string> files;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path().string());
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "fuzz_replay: '%s' is neither a file nor a directory\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_replay: no inputs under the paths given\n");
    return 2;
  }
  int refused = 0, bad_seeds = 0;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    g_input = f.c_str();
    std::string why;
    if (dtrain::fuzz::run(argv[1], it->second, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), &why))
      continue;
    ++refused;
    if (fs::path(f).filename().string().rfind("seed-", 0) == 0) {
      ++bad_seeds;
      std::fprintf(stderr, "fuzz_replay %s: the seed %s is refused: %s\n", argv[1], f.c_str(), why.c_str());
    }
  }
  std::printf("fuzz_replay %s: %zu inputs (%d refused with a clear error), no crash\n", argv[1], files.size(), refused);
  return bad_seeds ? 1 : 0;
}
