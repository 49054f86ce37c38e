// The expert dispatch of expert parallelism ep > 1 (parallel/expert_dispatch.hpp's interface): token
// rows travel to the ranks of the EP group that hold their experts and back with all-to-all-v.
//   plan          one exchange of counts: rank r's sent rows for each of rank s's E/ep experts reach s
//                 (ExpertLayout::received, (ep, E/ep)), so every receiver knows what comes.
//   to_experts    the token side is expert-major over the E global experts, so the rows for rank s's
//                 experts [s*E/ep, (s+1)*E/ep) are one contiguous block: one all_to_all_v of those
//                 blocks into a scratch buffer (source-major: each source's rows for my local expert 0,
//                 1, ...), then a reorder into the expert side (local-expert-major, by source within).
//   from_experts  the reverse: reorder the expert side into source-major blocks, then all_to_all_v back;
//                 each rank receives its rows in its own expert-major order.
// Everything is in a fixed order (ranks, experts, rows), so a run repeats bit for bit.
#pragma once
#include "comm/communicator.hpp"
#include "parallel/expert_dispatch.hpp"
#include "runtime/arena.hpp"

namespace dtrain {

class AllToAllExpertDispatch final : public ExpertDispatch {
 public:
  // ep: the expert-parallel group; device: where the rows live (scratch is allocated there, grown to
  // the largest micro-batch's rows during the first steps).
  AllToAllExpertDispatch(Communicator& ep, Device& device) : ep_(ep), device_(device) {}
  ExpertLayout plan(const std::vector<long>& sent) override;
  const void* to_experts(const ExpertLayout& layout, const void* rows, void* buffer, int width, DType type) override;
  const void* from_experts(const ExpertLayout& layout, const void* rows, void* buffer, int width, DType type) override;

 private:
  // A scratch buffer of at least `bytes`.
  char* scratch(std::size_t bytes);

  // Copies rows between the source-major layout (each source's block of its rows for local experts
  // 0, 1, ...) and the local-expert-major one; to_expert_major picks the direction.
  void reorder(const ExpertLayout& layout, const char* from, char* to, std::size_t row_bytes, bool to_expert_major);

  Communicator& ep_;
  Device& device_;
  Arena scratch_;
};

}  // namespace dtrain
