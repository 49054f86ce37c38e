// ckpt_read_share CKPT LAYOUT...: under mpirun, every rank loads its state of each LAYOUT
// ("tp=2,pp=2,zero=3,bf16=1": distributed optimizer when zero > 0) from the checkpoint step directory
// CKPT with load_rank_state, as a resume on that layout would, and checks:
//   - the bytes it read from HDF5 datasets are at most 1.2 x the bytes of the state it holds, counted
//     here element by element (parameters of its tensors over the plan's parameter ranges, master
//     weights and moments over its optimizer ranges);
//   - nothing of params outside the parameter ranges was written (ZeRO-3 releases those pages);
//   - every loaded parameter equals the element of the global tensor it stands for.
// Prints one line per rank and layout; exits 1 on any failure (on every rank), 2 on a UserError.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/convert.hpp"
#include "common/error.hpp"
#include "plan/rank_layout.hpp"
#include "plan/training_plan.hpp"

using namespace dtrain;

namespace {

// A layout to read the checkpoint on (ParallelLayout's text form) and whether its run is bf16 (its
// fp32 master weights are read beside the parameters).
struct Layout {
  ParallelLayout sizes;
  bool bf16 = false;
};

Layout parse(const std::string& spec) {
  Layout l;
  l.sizes = parse_layout(spec, ParallelLayout{}, "ckpt_read_share", "tp, pp, zero, bf16",
                         [&](const std::string& key, const std::string& value, const std::string&) {
                           if (key != "bf16") return false;
                           l.bf16 = value != "0";
                           return true;
                         });
  return l;
}

// Which arena elements belong to a tensor: 1 where one does.
std::vector<char> tensor_elements(const RankPlan& plan) {
  std::vector<char> in(plan.arena_size, 0);
  for (const auto& t : plan.table.tensors())
    for (std::size_t i = 0; i < t.numel; ++i) in[t.offset + i] = 1;
  return in;
}

// Checks one layout on this rank; returns the number of problems.
int check(const CheckpointReader& reader, const Config& stored, const Layout& L, int rank, int world) {
  Config cfg = stored;
  set_parallel_layout(cfg.system, L.sizes);
  cfg.system.sequence_parallel = false;
  cfg.system.precision = L.bf16 ? Precision::bf16 : Precision::fp32;
  TrainingPlan target;
  target.sizes = L.sizes;
  target.sizes.dp = world / (L.sizes.tp * L.sizes.pp);
  const RankLayout layout(target.sizes, reader.meta().order);
  const RankPlan plan = make_rank_plan(cfg, target, layout.coords_of(rank));

  const float sentinel = std::nanf("0x5a5a");
  std::vector<float> params(plan.arena_size, sentinel), master(L.bf16 ? plan.optimizer_elements() : 0);
  const bool moments = reader.has_kind("exp_avg");
  std::vector<float> m(moments ? plan.optimizer_elements() : 0), v(m.size());
  RankState st;
  st.plan = &plan;
  st.params = params.data();
  st.master = L.bf16 ? master.data() : nullptr;
  st.moments[0] = moments ? m.data() : nullptr;
  st.moments[1] = moments ? v.data() : nullptr;
  const std::uint64_t before = h5::dataset_bytes_read();
  load_rank_state(reader, st);
  const double read = static_cast<double>(h5::dataset_bytes_read() - before);

  // The state, element by element.
  const std::vector<char> in_tensor = tensor_elements(plan);
  std::vector<char> kept(plan.arena_size, 0), optimized(plan.arena_size, 0);
  for (const auto& r : plan.param_ranges())
    for (std::size_t i = r.begin; i < r.end; ++i) kept[i] = 1;
  for (const auto& r : plan.optimizer_ranges)
    for (std::size_t i = r.begin; i < r.end; ++i) optimized[i] = 1;
  double state = 0;
  const int per_optimizer = (L.bf16 ? 1 : 0) + (moments ? 2 : 0);
  for (std::size_t i = 0; i < plan.arena_size; ++i) state += 4.0 * in_tensor[i] * (kept[i] + per_optimizer * optimized[i]);

  int problems = 0;
  const double ratio = state > 0 ? read / state : 0.0;
  if (ratio > 1.2 || (state > 0 && read == 0)) ++problems;
  int written_outside = 0, wrong = 0;
  for (std::size_t i = 0; i < plan.arena_size; ++i)
    if (!kept[i] && std::memcmp(&params[i], &sentinel, sizeof(float)) != 0) ++written_outside;
  for (const auto& t : plan.table.tensors()) {
    const std::vector<float> global = reader.global_tensor("param", t.name);
    for (std::size_t i = 0; i < t.numel; ++i)
      if (kept[t.offset + i] && params[t.offset + i] != global[global_index(t, static_cast<long>(i))]) ++wrong;
  }
  problems += (written_outside > 0) + (wrong > 0);
  std::printf("layout tp=%d pp=%d dp=%d zero=%d bf16=%d rank %d: read %.0f bytes, state %.0f bytes, ratio %.3f, written "
              "outside the parameter ranges %d, wrong values %d%s\n",
              L.sizes.tp, L.sizes.pp, target.sizes.dp, L.sizes.zero, L.bf16 ? 1 : 0, rank, read, state, ratio, written_outside, wrong,
              problems ? "  <-- FAIL" : "");
  return problems;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  try {
    if (argc < 3) throw UserError("usage: ckpt_read_share CKPT_STEP_DIR LAYOUT...");
    const CheckpointReader reader(argv[1], false);
    const Config stored = checkpoint_config(reader);
    for (int a = 2; a < argc; ++a) {
      failed += check(reader, stored, parse(argv[a]), rank, world);
      std::fflush(stdout);
    }
  } catch (const UserError& e) {
    std::fprintf(stderr, "ckpt_read_share: error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s: %d problem(s)\n", failed ? "FAIL" : "ok", failed);
  MPI_Finalize();
  return failed ? 1 : 0;
}
