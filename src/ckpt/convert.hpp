// Offline checkpoint work, shared by ckpt-consolidate: merging shards into one file of global tensors,
// resharding to another layout, verifying. Each splits its work over the ranks of a communicator.
#pragma once
#include <functional>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt/h5_file.hpp"
#include "comm/host_comm.hpp"
#include "config/config.hpp"

namespace dtrain {

using Progress = std::function<void(int done, int total, const std::string& what)>;

// The step directory of `path`: itself if it has a manifest, else the `latest` it points to.
std::string resolve_checkpoint(const std::string& path);
// The model configuration stored in a checkpoint.
Config checkpoint_config(const CheckpointReader& reader);

// One HDF5 file with a dataset per global tensor at the root ("wte", "h0.qkv_w", ...) and, with
// optimizer, "optimizer/exp_avg/<name>" and "optimizer/exp_avg_sq/<name>". The weights are the
// checkpoint's fp32 values (the master weights of a bf16 run), stored as fp32 or, with
// weights == bf16, rounded to bfloat16; optimizer state stays fp32. Parallel HDF5: every rank of comm
// writes its share of the tensors into the same file, each in slabs (memory: a slab, not a tensor),
// checking every piece's checksum as it is read.
void consolidate(HostComm comm, const CheckpointReader& reader, const std::string& out, bool optimizer, h5::Stored weights,
                 const Progress& progress);

// A new sharded checkpoint (a checkpoint directory with the step and `latest`) for another layout. The
// shard files are hashed against the manifest first (split over the ranks): the new shards are cut
// from parts of pieces.
void reshard(HostComm comm, const CheckpointReader& reader, const ParallelLayout& layout, const std::string& out_dir,
             const Progress& progress);

// Every shard file hashed against the manifest (split over the ranks), then every tensor of every kind
// read once in slabs (piece checksums, coverage, shapes). Throws on the first problem.
void verify(HostComm comm, const CheckpointReader& reader, const Progress& progress);

}  // namespace dtrain
