// The loss mask of a dtrain token file: PREFIX.train.lossmask.bin beside PREFIX.train.bin (and .val),
// written by dtrain-data --sft. Little-endian, a 32-byte header then one byte per token:
//   offset 0  char[8]  magic "DTRAINLM"
//   offset 8  uint32   version, 1
//   offset 12 uint32   0 (reserved)
//   offset 16 uint64   count: tokens of the token file, one mask byte each
//   offset 24 uint64   the 64-bit hash (ckpt/checksum) of the whole token file the mask belongs to
//   offset 32 uint8[count]  1: the token is a target the loss trains on; 0: it is not (a prompt)
// A mask whose count or hash is not its token file's is refused, so a mask never meets other tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

class StagedFile;

constexpr char kLossMaskMagic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'L', 'M'};
constexpr std::size_t kLossMaskHeaderBytes = 32;

// The mask file's name for the token file PATH (".bin" -> ".lossmask.bin").
std::string loss_mask_path(const std::string& token_file);

// Writes mask (0/1 bytes) for a token file of mask.size() tokens whose bytes hash to tokens_hash, staged
// and published (common/staged_file); UserError naming the file when it cannot be written.
void write_loss_mask(const std::string& path, const std::vector<std::uint8_t>& mask, std::uint64_t tokens_hash);
// The same into a staged file the caller publishes.
void write_loss_mask(StagedFile& out, const std::vector<std::uint8_t>& mask, std::uint64_t tokens_hash);

// Reads and checks the whole mask file against its token file (count, hash, every byte 0 or 1); every
// problem is a UserError naming both files.
std::vector<std::uint8_t> read_loss_mask(const std::string& path, std::uint64_t tokens, std::uint64_t tokens_hash,
                                         const std::string& token_file);

}  // namespace dtrain
