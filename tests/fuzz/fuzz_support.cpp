// The fuzz targets' shared frame: the run wrapper that tells a clear error from a finding, the scratch
// directory, the input split into files, and the replay build's table of targets.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <typeinfo>

#include "common/error.hpp"
#include "data/token_source.hpp"
#include "data/json_record.hpp"
#include "fuzz/fuzz_target.hpp"

namespace dtrain::fuzz {

bool run(const char* target, Body body, const std::uint8_t* data, std::size_t size, std::string* refusal) {
  try {
    body(data, size);
    return true;
  } catch (const UserError& e) {
    if (refusal) *refusal = e.what();
  } catch (const RecordError& e) {
    if (refusal) *refusal = e.what();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz target %s: the reader let an exception out that is not a UserError: %s: %s\n", target,
                 typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz target %s: the reader let an exception of unknown type out\n", target);
    std::abort();
  }
  return false;
}

namespace {
std::vector<std::pair<std::string, Body>>& table() {
  static std::vector<std::pair<std::string, Body>> t;
  return t;
}

struct Scratch {
  std::string dir;
  Scratch() {
    std::string base = "/tmp";
    if (const char* t = std::getenv("TMPDIR"); t && *t) base = t;
    if (std::filesystem::is_directory("/dev/shm") && access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    std::string templ = base + "/dtrain-fuzz-XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::fprintf(stderr, "fuzz: cannot make a scratch directory under %s: %s\n", base.c_str(), std::strerror(errno));
      std::abort();
    }
    dir = templ;
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};
}  // namespace

Registration::Registration(const char* name, Body body) { table().emplace_back(name, body); }
const std::vector<std::pair<std::string, Body>>& registered() { return table(); }

const std::string& scratch_dir() {
  static Scratch s;
  return s.dir;
}

std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

void read_every_token(const TokenSource& source) {
  std::vector<int> tokens(64);
  std::vector<std::uint8_t> mask(64);
  for (std::uint64_t at = 0; at < source.size(); at += 64) {
    const int n = static_cast<int>(std::min<std::uint64_t>(64, source.size() - at));
    source.read(at, n, tokens.data());
    if (source.has_loss_mask()) source.read_loss_mask(at, n, mask.data());
  }
}

std::vector<std::string_view> split(const std::uint8_t* data, std::size_t size, std::string_view separator, int parts) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> out;
  while (static_cast<int>(out.size()) + 1 < parts) {
    const std::size_t at = rest.find(separator);
    if (at == std::string_view::npos) break;
    out.push_back(rest.substr(0, at));
    rest.remove_prefix(at + separator.size());
  }
  out.push_back(rest);
  out.resize(static_cast<std::size_t>(parts));
  return out;
}

}  // namespace dtrain::fuzz
