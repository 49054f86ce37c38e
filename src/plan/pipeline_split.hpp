// How the model's blocks are split over the pipeline's stages and each stage's v model chunks.
// Evenly by default (num_layers / (pp v) blocks per chunk), or unevenly as Megatron-LM allows:
// - system.pipeline_first_stage_layers / pipeline_last_stage_layers: the first / last stage holds that
//   many blocks and the other stages share the rest evenly (Llama 3 405B: 126 blocks on pp 16 with 7 on
//   the first and the last, 8 on each of the 14 others);
// - system.pipeline_account_for_embedding / _loss: the embedding (before the first block) and the LM
//   head with the loss (after the last) each count as one block in an even split of num_layers + 1 (+ 1)
//   over the pp chunks, so the first / last stage holds one block fewer.
// Chunk c of stage s runs after every chunk of the earlier rounds (c' < c) and the earlier stages of its
// round: blocks are numbered in that order, which is the interleaved schedule's (v = 1: contiguous).
// zbv places the two chunks of a stage in a V (v_shape): stage s holds virtual stages s and 2p-1-s, so
// stage 0 holds the first blocks and the last ones, with the embedding and the LM head; it needs an
// even split.
// Every chunk of one stage holds the same number of blocks (a rank's activation slots hold one chunk).
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

struct PipelineSplit {
  int num_layers = 1, pp = 1, v = 1;
  int first = 0, last = 0;  // blocks of the first / last stage; 0 = as the other stages
  bool embedding_as_layer = false, loss_as_layer = false;
  bool v_shape = false;  // zbv's placement

  // The run's split at pp stages of v chunks (the configuration's keys; the sizes may be a candidate's).
  static PipelineSplit of(const Config& cfg, int pp, int v);
  bool even() const { return first == 0 && last == 0 && !embedding_as_layer && !loss_as_layer; }
  // Why this split cannot be (each message names the keys and a way out); empty when it can.
  std::vector<std::string> errors() const;
  // Blocks of stage s, and of each of its chunks.
  int stage_blocks(int stage) const;
  int chunk_blocks(int stage) const { return stage_blocks(stage) / v; }
  // Global index of the first block of chunk c of stage s.
  int chunk_begin(int stage, int chunk) const;
  // The stage holding the LM head: the last, or with the V placement the first.
  int head_stage() const { return v_shape ? 0 : pp - 1; }
  // The fewest blocks any chunk holds.
  int min_chunk_blocks() const;
  // "7, 8 x 14, 7": the blocks per stage, runs of equal stages folded.
  std::string describe() const;
};

}  // namespace dtrain
