// Loss mask files: atomic writing, and reading checked against the token file they belong to.
#include "data/loss_mask_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/error.hpp"
#include "common/staged_file.hpp"

namespace dtrain {
namespace {

constexpr const char* kRemake = "re-make both with dtrain-data --sft";

void store_le(std::uint8_t* p, std::uint64_t v, int nbytes) {
  for (int b = 0; b < nbytes; ++b) p[b] = static_cast<std::uint8_t>(v >> (8 * b));
}
std::uint64_t load_le(const std::uint8_t* p, int nbytes) {
  std::uint64_t v = 0;
  for (int b = 0; b < nbytes; ++b) v |= static_cast<std::uint64_t>(p[b]) << (8 * b);
  return v;
}

}  // namespace

std::string loss_mask_path(const std::string& token_file) {
  const std::string bin = ".bin";
  if (token_file.size() >= bin.size() && token_file.compare(token_file.size() - bin.size(), bin.size(), bin) == 0)
    return token_file.substr(0, token_file.size() - bin.size()) + ".lossmask.bin";
  return token_file + ".lossmask.bin";
}

void write_loss_mask(StagedFile& out, const std::vector<std::uint8_t>& mask, std::uint64_t tokens_hash) {
  std::uint8_t header[kLossMaskHeaderBytes] = {};
  std::memcpy(header, kLossMaskMagic, sizeof kLossMaskMagic);
  store_le(header + 8, 1, 4);
  store_le(header + 16, mask.size(), 8);
  store_le(header + 24, tokens_hash, 8);
  out.write(header, sizeof header);
  out.write(mask.data(), mask.size());
}

void write_loss_mask(const std::string& path, const std::vector<std::uint8_t>& mask, std::uint64_t tokens_hash) {
  StagedFile out(path, "loss mask file");
  write_loss_mask(out, mask, tokens_hash);
  out.publish();
}

std::vector<std::uint8_t> read_loss_mask(const std::string& path, std::uint64_t tokens, std::uint64_t tokens_hash,
                                         const std::string& token_file) {
  const std::string label = "loss mask file '" + path + "'";
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw UserError("cannot read " + label + " (" + std::strerror(errno) + ")");
  std::uint8_t header[kLossMaskHeaderBytes];
  if (std::fread(header, 1, sizeof header, f.get()) != sizeof header) {
    if (std::ferror(f.get())) throw UserError("cannot read " + label + " (" + std::strerror(errno) + ")");  // a directory: EISDIR
    throw UserError(label + " is shorter than its 32-byte header; " + kRemake);
  }
  if (std::memcmp(header, kLossMaskMagic, sizeof kLossMaskMagic) != 0)
    throw UserError("'" + path + "' is not a dtrain loss mask file (no \"DTRAINLM\" magic); " + kRemake);
  if (load_le(header + 8, 4) != 1) throw UserError(label + " has format version " + std::to_string(load_le(header + 8, 4)) + ", but this dtrain reads version 1; " + kRemake);
  const std::uint64_t count = load_le(header + 16, 8);
  if (count != tokens)
    throw UserError(label + " masks " + std::to_string(count) + " tokens, but token file '" + token_file + "' holds " +
                    std::to_string(tokens) + ": the mask belongs to other tokens; " + kRemake);
  if (load_le(header + 24, 8) != tokens_hash)
    throw UserError(label + " was made for another token file than '" + token_file + "' (the token file's hash differs); " + kRemake);
  // The count matches a token file already read, so this allocation is bounded by data that exists.
  std::vector<std::uint8_t> mask(count);
  if (count > 0 && std::fread(mask.data(), 1, count, f.get()) != count)
    throw UserError(label + " is truncated: its header declares " + std::to_string(count) + " mask bytes; " + kRemake);
  if (std::fgetc(f.get()) != EOF) throw UserError(label + " has bytes after the " + std::to_string(count) + " its header declares; " + kRemake);
  for (std::uint64_t i = 0; i < count; ++i)
    if (mask[i] > 1)
      throw UserError(label + " holds " + std::to_string(mask[i]) + " at token " + std::to_string(i) + ", not 0 or 1; the file is corrupt, " + kRemake);
  return mask;
}

}  // namespace dtrain
