// Layout equivalence: every (tp, pp, dp) layout with tp in {1,2,4}, pp in {1,2,4}, dp in {1,2} that
// uses exactly the job's ranks, with and without sequence parallelism, with and without the
// distributed optimizer (and overlapped reductions), under 1F1B, interleaved 1F1B and AFAB, trains
// 10 steps with per-step losses and final global weights within the derived bound of reordered
// float32 sums of one rank's (testing::reorder_tolerance); each run is bit-identical when repeated.
// Weights are compared tensor by tensor against the update training gave each (update_deviation), so a
// fault in one small tensor's gradient shows: dropping the sequence-parallel LayerNorm gradients'
// reduction moves ln weights by 0.45-0.5 of their update (fp32 and bf16; 9e-6 and 5e-4 without the
// fault), dropping the tied embedding's by 1.0. A wrong slice or a missing reduction shows as 1e-2 or worse.
#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "config/load.hpp"
#include "model/moe_routing.hpp"
#include "mpi/training_fixture.hpp"

using namespace dtrain;

namespace {

struct Variant {
  int tp, pp, dp;
  bool sp = false, distributed = false;
  std::string schedule = "1f1b";
  bool overlap = true;  // with the distributed optimizer: overlapped reductions and gathers
  int cp = 1;
  int ep = 1;  // expert parallelism (MoE models), carved from dp
  int first = 0, last = 0;        // an uneven pipeline split: blocks of the first / last stage
  bool embedding_as_layer = false;  // or the embedding counted as a block
  std::string name() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "tp=%d cp=%d pp=%d dp=%d ep=%d %s%s%s%s", tp, cp, pp, dp, ep, schedule.c_str(), sp ? " +sp" : "",
                  distributed ? (overlap ? " +distopt+overlap" : " +distopt") : "",
                  first || last ? (" stages " + std::to_string(first) + "..." + std::to_string(last)).c_str()
                  : embedding_as_layer ? " +embedding as a block" : "");
    return buf;
  }
};

std::vector<Variant> variants_for(int world) {
  std::vector<Variant> out;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4})
      for (int dp : {1, 2}) {
        if (tp * pp * dp != world) continue;
        out.push_back({tp, pp, dp});
        if (tp > 1) out.push_back({tp, pp, dp, true});
        if (dp > 1) {
          out.push_back({tp, pp, dp, false, true});
          out.push_back({tp, pp, dp, false, true, "1f1b", false});
        }
        if (pp > 1) {
          out.push_back({tp, pp, dp, false, false, "interleaved"});
          out.push_back({tp, pp, dp, false, false, "afab"});
          if (tp > 1 || dp > 1) out.push_back({tp, pp, dp, tp > 1, dp > 1, "interleaved"});
        }
      }
  return out;
}

Config config_of(const Variant& v, const std::string& data, const std::vector<std::string>& extra) {
  std::vector<std::string> o = {"--data.path=" + data,
                                "--system.tensor_model_parallel_size=" + std::to_string(v.tp),
                                "--system.pipeline_model_parallel_size=" + std::to_string(v.pp),
                                "--system.context_parallel_size=" + std::to_string(v.cp),
                                "--system.sequence_parallel=" + std::string(v.sp ? "true" : "false"),
                                "--system.use_distributed_optimizer=" + std::string(v.distributed ? "true" : "false"),
                                "--system.overlap_grad_reduce=" + std::string(v.distributed && v.overlap ? "true" : "false"),
                                "--system.overlap_param_gather=" + std::string(v.distributed && v.overlap ? "true" : "false"),
                                "--system.pipeline_schedule=" + v.schedule,
                                "--system.expert_model_parallel_size=" + std::to_string(v.ep),
                                "--system.virtual_pipeline_model_parallel_size=" +
                                    std::string(v.schedule == "interleaved" || v.schedule == "zbv" ? "2" : "1"),
                                "--system.pipeline_first_stage_layers=" + std::to_string(v.first),
                                "--system.pipeline_last_stage_layers=" + std::to_string(v.last),
                                "--system.pipeline_account_for_embedding=" + std::string(v.embedding_as_layer ? "true" : "false")};
  o.insert(o.end(), extra.begin(), extra.end());
  return load_config("[model]\nnum_layers=8\nhidden_size=32\nnum_attention_heads=4\nseq_length=16\nvocab_size=64\n"
                     "global_batch_size=8\nmicro_batch_size=1\n[training]\ntrain_iters=10\neval_iters=1\n"
                     "[optimizer]\nlr=3e-3\nwarmup_iters=2\n", "layout test", o);
}

// The global fp32 weights (master weights in bf16) of a trained run, on world rank 0 (empty elsewhere).
std::vector<float> global_weights(Trainer& t, const Config& cfg, int rank) {
  std::vector<float> whole(rank == 0 ? whole_model_plan(cfg, 1).arena_size : 0);
  t.gather_full_model(rank == 0 ? whole.data() : nullptr);
  return whole;
}

// Trains every variant at the job's rank count and the one-rank reference (rank 0 alone; the weights
// are compared there), checks losses and final weights against it and (rerun) a bit-identical rerun.
// first_loss_tolerance bounds the loss of the first step (the same weights on every layout), loss_tolerance
// every step's.
// documents: fine-tuning-like data (testing::make_document_test_data) with its end-of-document token.
// rerun: a variant's rerun is bit-identical; tests whose layouts move the messages of the GPT test's
// (another block, packed samples) leave it to that test.
enum class Rerun { checked, left_to_gpt_test };

void check_layouts(const std::vector<Variant>& variants, const std::vector<std::string>& extra, double first_loss_tolerance,
                   double loss_tolerance, double weights_tolerance, bool documents = false, Rerun rerun = Rerun::checked) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (variants.empty()) return;
  const std::string data = documents ? testing::make_document_test_data(MPI_COMM_WORLD) : testing::make_test_data(MPI_COMM_WORLD);
  const std::optional<int> eod = documents ? std::optional<int>(testing::kTestEod) : std::nullopt;
  const Config ref_cfg = config_of({1, 1, 1}, data, extra);
  std::vector<float> ref_weights, init_weights;
  const auto reference = testing::train_alone_on_rank0(
      MPI_COMM_WORLD, ref_cfg, [&](Trainer& t) { ref_weights = global_weights(t, ref_cfg, 0); },
      [&](Trainer& t) { init_weights = global_weights(t, ref_cfg, 0); }, eod);
  const TensorTable table = whole_model_plan(ref_cfg, 1).table;
  if (rank == 0)  // frozen tensors (training.freeze) end as they began; each layout's then equal the reference's
    for (const TensorSpec& t : table.tensors()) {
      INFO(t.name << " is frozen");
      if (!t.trainable) CHECK(std::equal(ref_weights.begin() + t.offset, ref_weights.begin() + t.offset + t.numel, init_weights.begin() + t.offset));
    }
  double worst_loss = 0.0, worst_weights = 0.0, loss_share = 0.0;  // loss_share: the largest deviation / its tolerance
  for (const auto& v : variants) {
    const Config cfg = config_of(v, data, extra);
    double rel_weights = 0.0;
    std::string worst_tensor;
    const auto run = testing::train(
        MPI_COMM_WORLD, cfg,
        [&](Trainer& t) {
          const std::vector<float> w = global_weights(t, cfg, rank);
          if (rank == 0) {
            const testing::UpdateDeviation d = testing::update_deviation(w, ref_weights, init_weights, table);
            rel_weights = d.relative;
            worst_tensor = d.tensor;
          }
          MPI_Bcast(&rel_weights, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        },
        kernels::Backend::host, {}, eod);
    const auto again = rerun == Rerun::checked ? testing::train(MPI_COMM_WORLD, cfg, {}, kernels::Backend::host, {}, eod).losses
                                               : run.losses;
    INFO(v.name());
    REQUIRE(run.losses.size() == reference.losses.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < run.losses.size(); ++i) {
      const double rel = std::abs(run.losses[i] - reference.losses[i]) / std::abs(reference.losses[i]);
      worst = std::max(worst, rel);
      const double tolerance = i == 0 ? first_loss_tolerance : loss_tolerance;
      loss_share = std::max(loss_share, rel / tolerance);
      INFO("step " << i << ": " << run.losses[i] << " vs one rank " << reference.losses[i]);
      CHECK(rel <= tolerance);
      CHECK(run.losses[i] == again[i]);  // bit-identical rerun
    }
    INFO("weights: the largest deviation relative to the update in " << worst_tensor);
    CHECK(rel_weights <= weights_tolerance);
    worst_loss = std::max(worst_loss, worst);
    worst_weights = std::max(worst_weights, rel_weights);
    if (rank == 0)
      std::printf("layout %-44s max loss deviation %.2e, weights deviation %.2e of the update (%s)\n", v.name().c_str(), worst,
                  rel_weights, worst_tensor.c_str());
  }
  if (rank == 0)
    std::printf("np=%d [%s]: largest loss deviation %.2e (%.3f of its tolerance), weights %.2e (%.3f of %.2e)\n", world,
                Catch::getResultCapture().getCurrentTestName().c_str(), worst_loss, loss_share, worst_weights,
                worst_weights / weights_tolerance, weights_tolerance);
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// The layouts of the fp16 and fp8 tests (the bf16 test's, without its np 8 variant without SP).
std::vector<Variant> reduced_precision_variants(int world) {
  if (world == 8) return {{2, 2, 2, true, true}, {2, 2, 2, true, true, "interleaved"}};
  if (world == 4) return {{2, 2, 1}, {2, 1, 2, true, true}, {1, 2, 2, false, true}};
  if (world == 2) return {{2, 1, 1, true}, {1, 2, 1}, {1, 1, 2, false, true}};
  return {};
}

// v at context-parallel size cp.
Variant with_cp(Variant v, int cp) {
  v.cp = cp;
  return v;
}

// The Llama blocks of the context-parallel and packed-document tests, appended to base.
std::vector<std::string> with_llama_blocks(std::vector<std::string> base) {
  for (const char* o : {"--model.normalization=RMSNorm", "--model.position_embedding_type=rope", "--model.swiglu=true",
                        "--model.group_query_attention=true", "--model.num_query_groups=2", "--model.ffn_hidden_size=64"})
    base.push_back(o);
  return base;
}

}  // namespace

// The longest sum whose order a layout changes in the layout model: the MLP projection's 4 x hidden_size
// = 128 inputs (the others are shorter: hidden 32, vocabulary 64, 16 positions, m x dp <= 8 micro-batch
// gradients; the 8 x 16 = 128 tokens of the global batch a weight gradient sums over). Losses and
// weights within reorder_tolerance(128, s) of one rank (1.5e-5 at the first step, 1.7e-4 over 10
// steps), with Adam's eps above the gradients' rounding noise (see
// reorder_tolerance); a wrong slice or a missing reduction is 1e-2 or worse.
constexpr long kLongestSum = 128;
const std::string kSmoothAdam = "--optimizer.eps=1e-4";

TEST_CASE("every layout matches one rank", "[mpi][layouts]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const double steps = testing::reorder_tolerance(kLongestSum, 10);
  check_layouts(variants_for(world), {kSmoothAdam}, testing::reorder_tolerance(kLongestSum, 0), steps, steps);
}

// Uneven pipeline splits of the 8 blocks (Megatron's first/last stage sizes, or the embedding counted as
// a block), 1F1B and interleaved, with tensor and data parallelism and synchronous sends: only the
// blocks' placement changes, so the GPT test's derived tolerances hold. np 2: 3 + 5 and 5 + 3 blocks,
// interleaved 2 + 6 (chunks of 1 and 3); np 3: 2 + 4 + 2, interleaved (chunks 1, 2, 1), the embedding
// as a block (2, 3, 3); np 4: 1 + 3 + 3 + 1, and pp 2 with tp 2 or dp 2.
TEST_CASE("uneven pipeline splits match one rank", "[mpi][layouts][uneven][pipeline]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  const auto uneven = [](Variant v, int first, int last) {
    v.first = first, v.last = last;
    return v;
  };
  if (world == 2) {
    variants = {uneven({1, 2, 1}, 3, 5), uneven({1, 2, 1}, 5, 3), uneven({1, 2, 1, false, false, "interleaved"}, 2, 6)};
  } else if (world == 3) {
    Variant embedding{1, 3, 1};
    embedding.embedding_as_layer = true;
    variants = {uneven({1, 3, 1}, 2, 2), uneven({1, 3, 1, false, false, "interleaved"}, 2, 2), embedding};
  } else if (world == 4) {
    variants = {uneven({1, 4, 1}, 1, 1), uneven({2, 2, 1, true}, 3, 5), uneven({1, 2, 2, false, true, "interleaved"}, 2, 6)};
  }
  const double steps = testing::reorder_tolerance(kLongestSum, 10);
  check_layouts(variants, {kSmoothAdam, "--debug.synchronous_sends=true"}, testing::reorder_tolerance(kLongestSum, 0), steps, steps);
}

// The zero-bubble schedules (split backward: B, then W from what B kept) at the layouts they meet:
// zb-h1 and zbv (two chunks a stage in a V, the embedding and the head on stage 0) with tensor (+SP)
// and data parallelism, the distributed optimizer, an uneven split (zb-h1), pp 3 and 4, ZeRO-2, ZeRO-3
// with full recomputation, bf16 and fp16, with synchronous sends; zbv re-plans its order at step 2 from
// measured times (the reruns check that the values do not depend on it). W adds the same products to
// the same gradients as the joined backward, in the same micro-batch order per tensor (zbv's tied head
// sums apart, as the embedding group does at pp > 1), so the GPT test's derived tolerances hold; bf16 and fp16 those of their tests. The MoE and context-parallel variants are in
// their tests' files of cases below.
TEST_CASE("zero-bubble schedules match one rank", "[mpi][layouts][pipeline][zero-bubble]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const auto uneven = [](Variant v, int first, int last) {
    v.first = first, v.last = last;
    return v;
  };
  std::vector<Variant> variants;
  if (world == 2) variants = {{1, 2, 1, false, false, "zb-h1"}, {1, 2, 1, false, false, "zbv"}};
  if (world == 3) variants = {uneven({1, 3, 1, false, false, "zb-h1"}, 2, 2)};
  if (world == 4)
    variants = {{2, 2, 1, true, false, "zb-h1"}, {1, 2, 2, false, true, "zbv"}, {1, 4, 1, false, false, "zbv"},
                uneven({1, 4, 1, false, false, "zb-h1"}, 1, 1)};
  if (world == 8) variants = {{2, 2, 2, true, true, "zbv"}, {2, 2, 2, true, true, "zb-h1"}};
  const std::string sync = "--debug.synchronous_sends=true";
  const double first = testing::reorder_tolerance(kLongestSum, 0), steps = testing::reorder_tolerance(kLongestSum, 10);
  check_layouts(variants, {kSmoothAdam, sync}, first, steps, steps);
  if (world == 4) {
    // ZeRO-2 (a bucket reduce-scattered after each micro-batch's last W) and ZeRO-3 with full
    // recomputation (W's operands from replayed blocks; parameters gathered for B, not for W). The
    // reduction per micro-batch reorders each element's sum over the step's 8 x 16 tokens, kLongestSum.
    check_layouts({{1, 2, 2, false, true, "zb-h1"}}, {kSmoothAdam, sync, "--system.zero_stage=2"}, first, steps, steps, false,
                  Rerun::left_to_gpt_test);
    check_layouts({{1, 2, 2, false, true, "zbv"}},
                  {kSmoothAdam, sync, "--system.zero_stage=3", "--model.recompute_granularity=full", "--model.recompute_num_layers=2"},
                  first, steps, steps, false, Rerun::left_to_gpt_test);
  }
  if (world == 2) {
    const std::vector<Variant> both = {{1, 2, 1, false, false, "zb-h1"}, {1, 2, 1, false, false, "zbv"}};
    check_layouts(both, {"--system.precision=bf16", kSmoothAdam, sync}, testing::kBf16Resolution, testing::kBf16Resolution,
                  testing::kBf16Resolution, false, Rerun::left_to_gpt_test);
    check_layouts(both,
                  {"--system.precision=fp16", "--optimizer.initial_loss_scale=256", "--optimizer.loss_scale_window=4", kSmoothAdam, sync},
                  testing::kFp16Resolution, testing::kFp16Resolution, testing::kFp16Resolution, false, Rerun::left_to_gpt_test);
  }
}

// The Llama family (RMSNorm, RoPE, SwiGLU, grouped-query attention, untied LM head, no linear biases)
// at every layout of the GPT test: 8 query heads on 4 key/value groups (at tp <= 2 a rank holds several
// whole groups, at tp = 4 one), and on 2 at tp = 2 (one group a rank, its heads split from another
// count) with tp=2 pp=2 dp=2, sequence parallelism and the distributed optimizer at np 8. fp32, so
// layouts differ by summation order only: the GPT test's derived tolerances (its longest sum bounds
// Llama's too: SwiGLU's 64 inputs). The messages are the GPT test's, whose reruns it checks.
TEST_CASE("Llama layouts match one rank", "[mpi][layouts][llama]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::vector<std::string> llama = {"--model.num_attention_heads=8", "--model.normalization=RMSNorm", "--model.norm_epsilon=1e-6",
                                          "--model.position_embedding_type=rope", "--model.swiglu=true", "--model.ffn_hidden_size=64",
                                          "--model.group_query_attention=true", "--model.untie_embeddings_and_output_weights=true",
                                          "--model.add_bias_linear=false"};
  for (int groups : {2, 4}) {
    std::vector<Variant> variants;
    for (const Variant& v : variants_for(world))
      if (groups == 4 ? v.tp <= 4 : v.tp == 2) variants.push_back(v);
    if (world == 8 && groups == 2) variants.push_back({2, 2, 2, true, true});
    std::vector<std::string> extra = llama;
    extra.push_back("--model.num_query_groups=" + std::to_string(groups));
    extra.push_back(kSmoothAdam);
    const double steps = testing::reorder_tolerance(kLongestSum, 10);
    check_layouts(variants, extra, testing::reorder_tolerance(kLongestSum, 0), steps, steps, false, Rerun::left_to_gpt_test);
  }
}

// bf16 (bf16 storage, fp32 arithmetic on the host): tensor-parallel partial sums are reduced in fp32
// and rounded once, pipeline stages pass bf16 activations unchanged and gradients are reduced in fp32,
// so a layout differs from one rank only by fp32 summation order, which rounding to bf16 turns into
// whole bf16 steps of single values: losses and master weights within kBf16Resolution (2^-8, derived
// there), Adam's eps above the noise. A wrong slice or a missing reduction shows as 1e-2 or worse. The
// acceptance layout is tp=2 pp=2 dp=2 with the distributed optimizer (np=8).
TEST_CASE("bf16 layouts match one rank in bf16", "[mpi][layouts][bf16]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  if (world == 8) variants = {{2, 2, 2, false, true}, {2, 2, 2, true, true}, {2, 2, 2, true, true, "interleaved"}};
  if (world == 4) variants = {{2, 2, 1}, {2, 1, 2, true, true}, {1, 2, 2, false, true}};
  if (world == 2) variants = {{2, 1, 1, true}, {1, 2, 1}, {1, 1, 2, false, true}};
  check_layouts(variants, {"--system.precision=bf16", kSmoothAdam}, testing::kBf16Resolution, testing::kBf16Resolution,
                testing::kBf16Resolution);
}

// fp16 (fp16 storage, fp32 arithmetic, fp32 master weights, dynamic loss scaling) at the layouts of the
// bf16 test: the same argument at fp16's resolution (kFp16Resolution, 2^-11). The scale starts at 256
// and doubles every 4 clean steps (256, 512, 1024 over the 10 steps): the largest scaled loss gradient
// is 1024 / 128 tokens = 8, far from fp16's 65504, so no layout overflows and every layout's scaling
// (and unscaling: a power of two, exact) is the same. A layout that skipped a step, mis-scaled or
// failed to unscale a gradient is off by a whole update.
TEST_CASE("fp16 layouts match one rank in fp16", "[mpi][layouts][fp16]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::vector<Variant> variants = reduced_precision_variants(world);
  check_layouts(variants,
                {"--system.precision=fp16", "--optimizer.initial_loss_scale=256", "--optimizer.loss_scale_window=4", kSmoothAdam},
                testing::kFp16Resolution, testing::kFp16Resolution, testing::kFp16Resolution);
}

// fp8 (bf16 storage; the blocks' linear layers' GEMMs on fp8 operands, model/linear_gemms.hpp) at the
// layouts of the bf16 test, with context parallelism and the zero-bubble schedules (their weight halves
// quantize at W): each tensor's amax is reduced over the ranks
// holding its pieces (tensor and context parallelism), a maximum and so exact, and every layout picks one
// rank's scales; what remains is the bf16 argument at fp8's resolutions (kFp8ForwardResolution for the
// losses, kFp8GradientResolution for the weights).
TEST_CASE("fp8 layouts match one rank in fp8", "[mpi][layouts][fp8]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants = reduced_precision_variants(world);
  if (world == 2) variants.insert(variants.end(), {with_cp({1, 1, 1}, 2), {1, 2, 1, false, false, "zbv"}});
  if (world == 4) variants.insert(variants.end(), {with_cp({2, 1, 1, true}, 2), {2, 2, 1, true, false, "zb-h1"}});
  check_layouts(variants, {"--system.precision=fp8", kSmoothAdam}, testing::kFp8ForwardResolution, testing::kFp8ForwardResolution,
                testing::kFp8GradientResolution);
}

// Context parallelism: every sample cut into 2 x cp chunks (zig-zag), ring attention over the cp group,
// gradients reduced over dp x cp. Against one rank at T = 64: cp = 2 and 4 alone, with tp (+SP, an odd
// number of heads per rank: 6 heads over tp 2), dp (distributed optimizer), pp (interleaved), and
// cp2 x tp2 x pp2; GPT-2 (learned positions: each chunk reads its own rows of wpe) and Llama (RoPE at
// the chunks' global positions, grouped-query attention); at np=4 also cp2 x dp2 under ZeRO-3 with
// selective and full recomputation, and in bf16. fp32: the online softmax adds each row's T key terms
// in another order (per chunk, then the chunks), tp splits the MLP projection's 4 x hidden inputs and
// cp a weight gradient's sum over the global batch's tokens, so the first loss within
// reorder_tolerance(n, 0) and every step's and the weights within reorder_tolerance(n, 10), n =
// max(T, 4 x hidden, tokens) = 8 x 64 = 512 (6.1e-5 and 6.7e-4; a wrong position, mask or chunk is
// 1e-2 or worse); bf16 within 2 x kBf16Resolution (the probabilities' rounding); reruns bit-identical.
TEST_CASE("context-parallel layouts match one rank", "[mpi][layouts][cp]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  if (world == 2) variants = {with_cp({1, 1, 1}, 2)};
  if (world == 4)
    variants = {with_cp({1, 1, 1}, 4), with_cp({2, 1, 1, true}, 2), with_cp({1, 1, 2, false, true}, 2),
                with_cp({1, 2, 1, false, false, "interleaved"}, 2), with_cp({1, 2, 1, false, false, "zbv"}, 2)};
  if (world == 8) variants = {with_cp({2, 2, 1, true}, 2), with_cp({2, 2, 1, false, false, "interleaved"}, 2)};
  const std::vector<std::string> shape = {"--model.seq_length=64", "--model.hidden_size=48", "--model.num_attention_heads=6",
                                          "--optimizer.eps=1e-4"};  // see reorder_tolerance
  const std::vector<std::string> llama = with_llama_blocks(shape);
  // The longest reordered sum: a weight gradient's over the 8 x 64 tokens of the global batch (cp
  // ranks add partial sums), longer than the T = 64 keys of a row's softmax and, with tp, the MLP
  // projection's 4 x 48 = 192 inputs.
  const long n = std::max<long>({64, 4 * 48, 8 * 64});
  const double first = testing::reorder_tolerance(n, 0), later = testing::reorder_tolerance(n, 10);
  check_layouts(variants, shape, first, later, later);
  std::vector<Variant> llama_variants;
  for (const Variant& v : variants)
    if (v.tp <= 2) llama_variants.push_back(v);
  check_layouts(llama_variants, llama, first, later, later);
  // ZeRO-3 shards over the dp x cp replicas; recomputation (selective keeps the output and log-sum-exp,
  // full replays the ring) and bf16 (kBf16Resolution).
  if (world == 4) {
    const std::vector<Variant> zero = {with_cp({1, 1, 2, false, true}, 2)};
    for (const char* recompute : {"selective", "full"}) {
      std::vector<std::string> extra = llama;
      extra.push_back("--system.zero_stage=3");
      extra.push_back(std::string("--model.recompute_granularity=") + recompute);
      check_layouts(zero, extra, first, later, later);
    }
    // bf16: ring attention keeps its probabilities in fp32 (flash-style) where one rank's attention
    // rounds them to bf16 before the product with V: one more bf16 rounding, of every attention output
    // and so of every gradient through it, beside the layouts' own: 2 x kBf16Resolution.
    std::vector<std::string> bf16 = llama;
    bf16.push_back("--system.precision=bf16");
    const double rounded_twice = 2 * testing::kBf16Resolution;
    check_layouts(zero, bf16, rounded_twice, rounded_twice, rounded_twice);
  }
  // Ring messages of 2 MiB (4 samples x 256 rows x 512 key/value values, fp32) with synchronous sends:
  // every ring step's receive is posted before its send, nothing relies on MPI's buffering. Two blocks
  // (the size of a message does not depend on their number). The longest reordered sum: a weight
  // gradient's over the 8 x 512 tokens of the global batch.
  if (world == 2) {
    const long tokens = 8 * 512;
    check_layouts(variants, {"--model.seq_length=512", "--model.hidden_size=256", "--model.num_attention_heads=4", "--model.num_layers=2",
                             "--model.micro_batch_size=4", "--training.train_iters=2", "--debug.synchronous_sends=true",
                             "--optimizer.eps=1e-4"},
                  testing::reorder_tolerance(tokens, 0), testing::reorder_tolerance(tokens, 2), testing::reorder_tolerance(tokens, 2));
  }
}

// Qwen2's blocks: biases on the query, key and value projections only (model.add_qkv_bias), split by
// heads like their weights (q_b by query heads, kv_b by key/value groups) under tensor parallelism, on
// tp2 with sequence parallelism and tp2 pp2 with it. fp32: summation order only (kLongestSum).
TEST_CASE("Qwen2 blocks (query/key/value biases) match one rank", "[mpi][layouts][llama][qwen2]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  if (world == 2) variants = {{2, 1, 1, true}};
  if (world == 4) variants = {{2, 2, 1, true}};
  std::vector<std::string> qwen2 = with_llama_blocks({"--model.add_bias_linear=false", "--model.add_qkv_bias=true", kSmoothAdam});
  const double steps = testing::reorder_tolerance(kLongestSum, 10);
  check_layouts(variants, qwen2, testing::reorder_tolerance(kLongestSum, 0), steps, steps, false, Rerun::left_to_gpt_test);
}

// training.freeze on the GPT blocks: the embedding (wte, also the tied head, and wpe), a whole block, a
// norm's weight, a linear weight and the final norm's bias. Tensor parallelism with sequence parallelism
// (the frozen norms are not summed over tp), pipelines (the tied embedding's copies are not summed),
// zb-h1's split backward (no W for what is frozen) and the distributed optimizer at ZeRO-2 and ZeRO-3
// (with parameter offload) over the trainable tensors' buckets train the rest as one rank does, and the frozen tensors end as they began
// (check_layouts). The GPT test's tolerances: the layouts differ by summation order only.
TEST_CASE("frozen tensors: layouts match one rank", "[mpi][layouts][freeze]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  if (world == 2) variants = {{2, 1, 1, true}, {1, 2, 1, false, false, "zb-h1"}};
  if (world == 4) variants = {{2, 2, 1, true}, {1, 2, 2, false, true}};
  const double steps = testing::reorder_tolerance(kLongestSum, 10);
  const std::string freeze = "--training.freeze=wte,wpe,h2.*,h5.ln2_w,h6.fc_w,lnf_b";
  check_layouts(variants, {kSmoothAdam, freeze, "--system.zero_stage=2"}, testing::reorder_tolerance(kLongestSum, 0), steps, steps,
                false, Rerun::left_to_gpt_test);
  // ZeRO-3 gathers the trainable tensors' buckets and keeps the frozen ones whole, the owned slices in
  // host memory (parameter offload; its arena is backed only where gathered, the frozen tensors always).
  if (world == 4)
    check_layouts({{1, 2, 2, false, true}}, {kSmoothAdam, freeze, "--system.zero_stage=3", "--system.offload_params=true"},
                  testing::reorder_tolerance(kLongestSum, 0), steps, steps, false, Rerun::left_to_gpt_test);
}

// Qwen3's attention: model.kv_channels (heads of 16 dims at hidden 32 with 4 heads: 64 attention
// columns, twice the hidden size), so every split of the attention (tp's heads, cp's ring, the
// projection's row-parallel input) works on the attention's width, not the hidden size; and
// qk_layernorm, whose weights' gradients are partial over tp (each rank's heads) and summed there: cp2,
// tp2 + sp and, at np 4, tp2 pp2 + sp.
TEST_CASE("Qwen3's attention (kv_channels, qk_layernorm) matches one rank", "[mpi][layouts][cp][kv_channels]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  if (world == 2) variants = {with_cp({1, 1, 1}, 2), {2, 1, 1, true}};
  if (world == 4) variants = {{2, 2, 1, true}};
  const std::vector<std::string> wide =
      with_llama_blocks({"--model.seq_length=32", "--model.kv_channels=16", "--model.qk_layernorm=true", kSmoothAdam});
  const long n = 8 * 32;
  const double first = testing::reorder_tolerance(n, 0), later = testing::reorder_tolerance(n, 10);
  check_layouts(variants, wide, first, later, later, false, Rerun::left_to_gpt_test);
}

// A sliding window (model.window_size = 10 keys at T = 32, Llama blocks; window_attn_skip_freq = 2, so
// every second block attends to every key, Gemma-style local and global blocks): one rank's fused kernel skips
// the key tiles before each row's window, ring attention the chunk pairs wholly before it (cp = 2 cuts
// T into chunks of 8: the chunk at 16 sees the last key of the chunk at 0 from its first row, the chunk
// at 24 nothing of it), and the tensor-parallel
// and pipeline splits run the same kernel on fewer heads. fp32: the layouts differ by summation order
// only, the longest reordered sum a weight gradient's over the 8 x 32 tokens of the global batch.
TEST_CASE("sliding-window layouts match one rank", "[mpi][layouts][cp][window]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  if (world == 2) variants = {with_cp({1, 1, 1}, 2), {2, 1, 1, true}};
  if (world == 4) variants = {with_cp({2, 1, 1, true}, 2), {2, 2, 1, true}};
  const std::vector<std::string> window =
      with_llama_blocks({"--model.seq_length=32", "--model.window_size=10", "--model.window_attn_skip_freq=2", "--optimizer.eps=1e-4"});
  const long n = 8 * 32;
  const double first = testing::reorder_tolerance(n, 0), later = testing::reorder_tolerance(n, 10);
  check_layouts(variants, window, first, later, later, false, Rerun::left_to_gpt_test);
}

// Documents packed in samples with a fine-tuning loss mask: attention inside each document (on one
// rank the fused kernel's block-diagonal mask, under cp ring attention's blocks), positions restarting
// at each document (learned for GPT-2, RoPE for Llama), no loss where the input ends a document, and the
// loss the mean over the global batch's counted targets, whose count every layout sums alike. GPT-2
// takes packed bins (data.pack), Llama windows cut across documents; at np 4 also AFAB under ZeRO-3 and
// a MoE model at ep=2. fp32: layouts differ by summation order only, the longest reordered sum a weight
// gradient's over the 8 x 32 tokens of the global batch. The messages are those of the GPT, ZeRO and
// MoE tests' layouts (reruns are checked by the GPT and MoE tests).
TEST_CASE("packed documents with a loss mask match one rank on every layout", "[mpi][layouts][documents]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  if (world == 2) variants = {{2, 1, 1, true}, {1, 2, 1}, {1, 1, 2, false, true}, with_cp({1, 1, 1}, 2)};
  if (world == 4) variants = {{2, 2, 1, true}, with_cp({1, 1, 2, false, true}, 2), {1, 2, 2, false, true, "interleaved"}, with_cp({2, 1, 1}, 2)};
  const std::vector<std::string> documents = {"--model.seq_length=32", "--data.reset_attention_mask=true", "--data.reset_position_ids=true",
                                              "--data.eod_mask_loss=true", "--optimizer.eps=1e-4"};
  std::vector<std::string> gpt2 = documents;
  gpt2.push_back("--data.pack=true");
  const std::vector<std::string> llama = with_llama_blocks(documents);
  const long n = 8 * 32;
  const double first = testing::reorder_tolerance(n, 0), later = testing::reorder_tolerance(n, 10);
  check_layouts(variants, gpt2, first, later, later, true, Rerun::left_to_gpt_test);
  check_layouts(variants, llama, first, later, later, true, Rerun::left_to_gpt_test);
  if (world == 4) {
    // The other schedule, ZeRO stage and expert layout: AFAB with ZeRO-3 (parameters gathered per
    // block, gradients reduce-scattered), and a MoE model (4 experts, top-2, every other block) at dp=4
    // with ep=2, whose expert gradients are reduced over the expert-data-parallel group.
    std::vector<std::string> zero3 = gpt2;
    zero3.push_back("--system.zero_stage=3");
    check_layouts({{1, 2, 2, false, true, "afab"}}, zero3, first, later, later, true, Rerun::left_to_gpt_test);
    Variant ep{1, 1, 4, false, true};
    ep.ep = 2;
    std::vector<std::string> moe = gpt2;
    for (const char* o : {"--model.num_experts=4", "--model.moe_router_topk=2", "--model.moe_ffn_hidden_size=48", "--model.moe_layer_freq=2",
                          "--model.moe_aux_loss_coeff=1e-2", "--training.seed=2"})
      moe.push_back(o);
    check_layouts({ep}, moe, first, later, later, true, Rerun::left_to_gpt_test);
  }
}

// Activation recomputation reruns the same kernels on the same values, so every option trains exactly
// the run that keeps its activations: losses and final weights bit-identical, on a plain, a sequence-
// parallel and an interleaved layout of the job's size, GPT-2, Llama and MoE blocks (MoE activations are
// kept under selective recomputation; full recomputation reruns the routing, which records nothing again).
TEST_CASE("recomputation equals keeping the activations bit for bit", "[mpi][layouts][recompute]") {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const std::vector<std::vector<std::string>> options = {
      {"--model.recompute_granularity=selective"},
      {"--model.recompute_granularity=full"},
      {"--model.recompute_granularity=full", "--model.recompute_num_layers=3"},
      {"--model.recompute_granularity=full", "--model.recompute_method=block", "--model.recompute_num_layers=1"}};
  const std::vector<std::string> llama = {"--model.normalization=RMSNorm", "--model.position_embedding_type=rope", "--model.swiglu=true",
                                          "--model.group_query_attention=true", "--model.num_query_groups=2"};
  // One layout of each kind the job's size has: plain 1F1B, sequence parallel, interleaved.
  std::vector<Variant> variants;
  auto first = [&](const std::function<bool(const Variant&)>& kind) {
    for (const Variant& v : variants_for(world))
      if (!v.distributed && kind(v)) return variants.push_back(v);
  };
  first([](const Variant& v) { return !v.sp && v.schedule == "1f1b"; });
  first([](const Variant& v) { return v.sp && v.schedule == "1f1b"; });
  first([](const Variant& v) { return v.schedule == "interleaved"; });
  const std::vector<std::string> moe = {"--model.num_experts=4", "--model.moe_layer_freq=2", "--model.moe_aux_loss_coeff=1e-2",
                                        "--model.moe_capacity_factor=1"};
  for (const Variant& v : variants)
    for (const auto* model_of : {"gpt2", "llama", "moe"}) {
      const std::string kind = model_of;
      std::vector<std::string> model = kind == "llama" ? llama : kind == "moe" ? moe : std::vector<std::string>{};
      model.push_back("--training.train_iters=3");  // bit for bit from the first step: 3 are enough
      const Config plain = config_of(v, data, model);
      std::vector<float> plain_weights;
      MoeStats plain_stats;  // the last step's MoE statistics (a replayed forward must not count again)
      const auto reference = testing::train(MPI_COMM_WORLD, plain, [&](Trainer& t) {
        plain_weights = global_weights(t, plain, rank);
        plain_stats = t.model().moe_stats();
      });
      for (const auto& option : options) {
        std::vector<std::string> extra = model;
        extra.insert(extra.end(), option.begin(), option.end());
        const Config cfg = config_of(v, data, extra);
        std::vector<float> weights;
        MoeStats stats;
        const auto run = testing::train(MPI_COMM_WORLD, cfg, [&](Trainer& t) {
          weights = global_weights(t, cfg, rank);
          stats = t.model().moe_stats();
        });
        std::string what = v.name() + " " + kind;
        for (const auto& o : option) what += " " + o;
        INFO(what);
        CHECK(run.losses == reference.losses);
        CHECK((weights == plain_weights));  // rank 0 holds them; empty on the others
        CHECK(stats.aux_loss == plain_stats.aux_loss);
        CHECK(stats.tokens == plain_stats.tokens);
        if (rank == 0) std::printf("recompute %-70s losses and weights bit-identical: %s\n", what.c_str(),
                                   run.losses == reference.losses && weights == plain_weights ? "yes" : "NO");
      }
    }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// Optimizer offload (system.offload_optimizer) runs the same AdamW arithmetic on host copies of the
// owned gradients and weights, on several host threads; parameter offload (system.offload_params,
// ZeRO-3) keeps the owned parameter slices in a host buffer and copies each to its bucket before the
// bucket's gather: losses and final weights are bit-identical to the same run without them (the
// kernel's single loop, the same gathered values). Optimizer offload is checked under ZeRO-1, 2 and 3
// (each rank offloads its slices) and without the distributed optimizer (the whole arena); parameter
// offload alone and with the optimizer's; with tensor and pipeline parallelism, in fp32 and bf16 (master
// weights; fp16 with the default loss scale of 2^32, whose first steps overflow and are skipped, so the
// gradient copies the backward pass started for them are dropped): at 1, 2 and 4 ranks (8 adds no new
// case).
TEST_CASE("optimizer and parameter offload train bit-identically", "[mpi][layouts][offload]") {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  struct Case {
    Variant v;
    int stage;  // ZeRO stage; 0 = no distributed optimizer
    const char* precision;
    bool optimizer, params;  // what is offloaded
  };
  std::vector<Case> cases;
  if (world == 1) cases = {{{1, 1, 1}, 0, "fp32", true, false}, {{1, 1, 1}, 0, "bf16", true, false}};
  if (world == 2)
    cases = {{{1, 1, 2, false, true}, 1, "fp32", true, false}, {{1, 1, 2, false, true}, 2, "fp32", true, false},
             {{1, 1, 2, false, true}, 3, "fp32", true, false}, {{1, 1, 2, false, true}, 1, "bf16", true, false},
             {{1, 2, 1}, 0, "fp32", true, false},           {{2, 1, 1}, 0, "bf16", true, false},
             {{1, 1, 2, false, true}, 3, "fp32", false, true}, {{1, 1, 2, false, true}, 3, "bf16", true, true},
             {{1, 1, 2, false, true}, 2, "fp16", true, false}};
  if (world == 4)
    cases = {{{2, 1, 2, false, true}, 1, "fp32", true, false}, {{2, 1, 2, false, true}, 2, "fp32", true, false},
             {{2, 1, 2, false, true}, 3, "bf16", true, false}, {{1, 2, 2, false, true}, 3, "fp32", true, false},
             {{2, 1, 2, false, true}, 3, "bf16", false, true}, {{1, 2, 2, false, true}, 3, "fp32", true, true}};
  if (cases.empty()) return;
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  for (const auto& c : cases) {
    auto run = [&, c = c](bool offload, std::vector<float>& weights) {
      std::vector<std::string> extra = {"--system.precision=" + std::string(c.precision),
                                        "--system.offload_optimizer=" + std::string(offload && c.optimizer ? "true" : "false"),
                                        "--system.offload_params=" + std::string(offload && c.params ? "true" : "false")};
      if (c.stage > 0) extra.push_back("--system.zero_stage=" + std::to_string(c.stage));
      const Config cfg = config_of(c.v, data, extra);
      // Offloaded, the update runs on 3 host threads: the same bits as the kernel's one loop.
      return testing::train(
                 MPI_COMM_WORLD, cfg, [&](Trainer& t) { weights = global_weights(t, cfg, rank); }, kernels::Backend::host,
                 [&](Trainer& t) { t.set_optimizer_threads(3); })
          .losses;
    };
    std::vector<float> plain_weights, offloaded_weights;
    const auto plain = run(false, plain_weights), offloaded = run(true, offloaded_weights);
    const std::string what = std::string(c.optimizer ? " optimizer" : "") + (c.params ? " params" : "");
    INFO(c.v.name() + " zero=" + std::to_string(c.stage) + " " + c.precision + what);
    CHECK(offloaded == plain);
    CHECK((offloaded_weights == plain_weights));  // rank 0 holds them; empty on the others
    if (rank == 0)
      std::printf("offload%-17s %-45s zero=%d %s: losses and weights bit-identical: %s\n", what.c_str(), c.v.name().c_str(), c.stage,
                  c.precision, offloaded == plain && offloaded_weights == plain_weights ? "yes" : "NO");
  }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// ZeRO-3's all-gathers copy the owners' slices, so it trains exactly as ZeRO-2 (losses and final
// weights bit-identical). ZeRO-2 reduce-scatters every micro-batch and sums the slices: with one
// micro-batch per rank and step that is ZeRO-1's reduction bit for bit; with several the sums round in
// another order (per micro-batch over ranks, then over micro-batches): within reorder_tolerance of
// the step's tokens (a lost or doubled micro-batch is 1e-2; bf16 within kBf16Resolution). At every layout with dp in {2, 4}
// and tp, pp in {1, 2} the job's size allows: GPT-2 blocking and overlapped; overlapped also Llama, bf16,
// full recomputation (a replayed group needs its parameters again) at every layout of 4 ranks and at
// tp=2 pp=2 dp=2 of 8 (dp=4 with tp or pp: GPT-2 only; these models change what is gathered, not how dp
// slices it), and a model of realistic message sizes at dp=2 on 2 ranks, where pipeline sends meet the
// gathers on 4 (pp=2 dp=2) and at tp=2 pp=2 dp=2 of 8. ZeRO-1 matches one rank.
TEST_CASE("ZeRO-2 and ZeRO-3 train exactly as ZeRO-1", "[mpi][layouts][zero]") {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<Variant> layouts;
  for (int dp : {2, 4})
    for (int pp : {1, 2})
      for (int tp : {1, 2})
        if (tp * pp * dp == world) layouts.push_back({tp, pp, dp, tp > 1, true});
  if (layouts.empty()) return;
  const std::string data = testing::make_test_data(MPI_COMM_WORLD);
  const std::vector<std::string> llama = {"--model.normalization=RMSNorm", "--model.position_embedding_type=rope", "--model.swiglu=true",
                                          "--model.group_query_attention=true", "--model.num_query_groups=2"};
  // The last model has 3 MiB buckets and 256 KiB activations, with synchronous pipeline sends: the
  // prefetched gathers meet the pipeline's transfers above every eager limit. 4 layers of 3 MiB (two
  // buckets a stage at pp=2) keep those sizes at half the arithmetic of 8.
  // 4 steps: equality needs no more, and the ZeRO-1 bounds follow the steps taken.
  std::vector<std::string> llama_steps = llama;
  llama_steps.push_back("--training.train_iters=4");
  const std::vector<std::vector<std::string>> models = {
      {"--training.train_iters=4"}, llama_steps, {"--system.precision=bf16", "--training.train_iters=4"},
      {"--model.recompute_granularity=full", "--model.recompute_num_layers=2", "--training.train_iters=4"},
      {"--model.hidden_size=256", "--model.num_layers=4", "--model.seq_length=64", "--model.micro_batch_size=4", "--model.global_batch_size=16",
       "--training.train_iters=3", "--debug.synchronous_sends=true"}};
  // Blocking and overlapped reductions and gathers on the first model; the other models, which change
  // what is gathered and when (another block, bf16 copies, replayed groups, realistic sizes), overlapped.
  for (Variant v : layouts)
    for (bool overlap : {false, true})
      for (const auto& model : models) {
        if (&model != &models.front() && (!overlap || (world == 8 && v.dp == 4))) continue;
        if (&model == &models.back() && world == 4 && v.pp == 1) continue;  // its sizes matter where pipeline sends meet the gathers
        v.overlap = overlap;
        std::vector<float> init;  // the initial weights, the same at every stage
        auto run_stage = [&](int stage, std::vector<float>& weights) {
          std::vector<std::string> extra = model;
          extra.push_back("--system.zero_stage=" + std::to_string(stage));
          extra.push_back("--optimizer.eps=1e-4");  // see reorder_tolerance
          const Config cfg = config_of(v, data, extra);
          return testing::train(
                     MPI_COMM_WORLD, cfg, [&](Trainer& t) { weights = global_weights(t, cfg, rank); }, kernels::Backend::host,
                     [&](Trainer& t) { init = global_weights(t, cfg, rank); })
              .losses;
        };
        std::vector<float> w1, w2, w3;
        const auto zero1 = run_stage(1, w1), zero2 = run_stage(2, w2), zero3 = run_stage(3, w3);
        const Config cfg = config_of(v, data, model);  // the shape and steps of the runs above
        const long m = cfg.model.global_batch_size / (cfg.model.micro_batch_size.value * v.dp);
        std::string what = v.name() + " m=" + std::to_string(m);
        for (const auto& o : model) what += " " + o;
        INFO(what);
        CHECK(zero3 == zero2);
        CHECK((w3 == w2));  // rank 0 holds them; empty on the others
        double loss_dev = 0.0, weights_dev = 0.0;
        for (std::size_t i = 0; i < zero1.size(); ++i) loss_dev = std::max(loss_dev, std::abs(zero2[i] - zero1[i]) / std::abs(zero1[i]));
        std::string worst_tensor;
        if (rank == 0) {
          const testing::UpdateDeviation d = testing::update_deviation(w2, w1, init, whole_model_plan(cfg, 1).table);
          weights_dev = d.relative;
          worst_tensor = d.tensor;
        }
        MPI_Bcast(&weights_dev, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (m == 1) {
          CHECK(zero2 == zero1);
          CHECK((w2 == w1));
        }
        // The first step's loss comes before any update: the same forward, equal. After it, fp32: ZeRO-2
        // adds each element's m x dp micro-batch gradients in another order, which reorders its sum over
        // the step's tokens, so reorder_tolerance(tokens, steps) with optimizer.eps = 1e-4 (above the
        // noise floor; with eps 1e-8 the noise-driven sign flips reached 2e-6 on one CPU). n = tokens
        // rather than the m x dp partial sums also covers the weights measured against their update:
        // those carry the gradient's relative difference, which is the reordered sum's bound times how
        // much the sum cancels (LayerNorm gains' gradients cancel most: the worst tensors, 4e-6 to 8e-6
        // of their update here). bf16: a last-bit difference of a master weight sometimes flips the
        // rounding of its bf16 copy: kBf16Resolution.
        const bool bf16 = cfg.system.precision == Precision::bf16;
        const long tokens = static_cast<long>(cfg.model.global_batch_size) * cfg.model.seq_length;
        const double reordered = testing::reorder_tolerance(tokens, cfg.training.train_iters);
        CHECK(zero2[0] == zero1[0]);
        CHECK(loss_dev <= (bf16 ? testing::kBf16Resolution : reordered));
        CHECK(weights_dev <= (bf16 ? testing::kBf16Resolution : reordered));
        if (rank == 0)
          std::printf("zero %-60s ZeRO-3 %s ZeRO-2; ZeRO-2 vs ZeRO-1: losses %.1e, weights %.1e of the update (%s)\n", what.c_str(),
                      zero3 == zero2 && w3 == w2 ? "equals" : "DIFFERS FROM", loss_dev, weights_dev, worst_tensor.c_str());
      }
  testing::remove_test_data(MPI_COMM_WORLD, data);
}

// Expert parallelism: a MoE model (4 experts, top-2, every block) at ep = 2 and 4 carved from dp = 2
// and 4 (np 2, 4, 8), with the distributed optimizer (expert buckets sliced over the expert-data-
// parallel group) and without (all-reduced over it), with tp 2 and pp 2 at np 8, dropless and with
// capacity dropping (0.5: drops happen per micro-batch, so every layout drops the same assignments).
// fp32: the all-to-alls move rows unchanged and the experts compute the same rows in the same order,
// so layouts differ by summation order only: the GPT test's derived tolerances (an expert's weight
// gradient sums at most the global batch's 128 tokens, no longer than kLongestSum), and at T = 64 with
// context parallelism those of 512 tokens; reruns bit-identical.
TEST_CASE("expert-parallel layouts match one rank", "[mpi][layouts][moe][ep]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Variant> variants;
  auto add = [&](int tp, int pp, int dp, int ep) {
    for (bool distributed : {false, true}) {
      Variant v{tp, pp, dp, false, distributed};
      v.ep = ep;
      variants.push_back(v);
    }
  };
  if (world == 2) add(1, 1, 2, 2);
  if (world == 4) {
    add(1, 1, 4, 2), add(1, 1, 4, 4);
    Variant zbv{1, 2, 2, false, true, "zbv"};  // the zero-bubble V schedule: W of the experts' gradients
    zbv.ep = 2;
    variants.push_back(zbv);
  }
  if (world == 8) add(2, 2, 2, 2), add(2, 1, 4, 4), add(1, 2, 4, 4);
  // The MoE test's model (seed 2: no near-tie of router probabilities at these layouts, see below).
  const std::vector<std::string> moe = {"--model.num_experts=4", "--model.moe_router_topk=2", "--model.moe_ffn_hidden_size=48",
                                        "--model.moe_layer_freq=2", "--model.moe_aux_loss_coeff=1e-2", "--training.seed=2"};
  const double steps = testing::reorder_tolerance(kLongestSum, 10);
  for (const char* capacity : {"none", "0.5"}) {
    std::vector<std::string> extra = moe;
    extra.push_back(std::string("--model.moe_capacity_factor=") + capacity);
    extra.push_back(kSmoothAdam);
    check_layouts(variants, extra, testing::reorder_tolerance(kLongestSum, 0), steps, steps);
  }
  // Qwen3-MoE's shape: Llama blocks with qk_layernorm and heads of 16 dims, every block MoE, the top-2
  // renormalised (moe_router_pre_softmax=false, the weights' gradient through the renormalisation on
  // the host): ep 2 at np 2, and with tp 2 + sp at np 4.
  std::vector<Variant> renormalised;
  Variant ep2{1, 1, 2, false, true};
  ep2.ep = 2;
  Variant tp_ep2{2, 1, 2, true, true};
  tp_ep2.ep = 2;
  if (world == 2) renormalised = {ep2};
  if (world == 4) renormalised = {tp_ep2};
  std::vector<std::string> qwen3_moe = with_llama_blocks(moe);
  for (const char* o : {"--model.moe_layer_freq=1", "--model.moe_router_pre_softmax=false", "--model.qk_layernorm=true",
                        "--model.kv_channels=16", kSmoothAdam.c_str()})
    qwen3_moe.push_back(o);
  check_layouts(renormalised, qwen3_moe, testing::reorder_tolerance(kLongestSum, 0), steps, steps, false, Rerun::left_to_gpt_test);
  // training.freeze on MoE tensors: a router and one expert layer frozen, the other trained, over ep 2
  // with the distributed optimizer (the expert buckets hold the trainable experts' tensors only).
  std::vector<std::string> frozen = moe;
  frozen.push_back("--training.freeze=h2.router_w,h4.expert_fc_w");
  frozen.push_back(kSmoothAdam);
  check_layouts(renormalised, frozen, testing::reorder_tolerance(kLongestSum, 0), steps, steps, false, Rerun::left_to_gpt_test);
  // With context parallelism (dropless): a micro-batch's load-balancing loss from the sums of its cp
  // ranks; at T = 64 (2 chunks of 16 per rank at cp 2).
  std::vector<Variant> with_cp;
  for (bool distributed : {false, true}) {
    Variant v{1, 1, world / 2, false, distributed};
    v.cp = 2;
    v.ep = world / 2;
    if (world >= 4) with_cp.push_back(v);
  }
  std::vector<std::string> long_moe = moe;
  long_moe.push_back("--model.seq_length=64");
  long_moe.push_back(kSmoothAdam);
  const long tokens = 8 * 64;  // the global batch: the longest sum an expert's weight gradient reorders
  const double long_steps = testing::reorder_tolerance(tokens, 10);
  check_layouts(with_cp, long_moe, testing::reorder_tolerance(tokens, 0), long_steps, long_steps);
}

// Mixture of experts: 4 experts, top-2, in every other block (blocks 0, 2, 4, 6), load-balancing loss
// 1e-2, GPT-2 and Llama blocks (SwiGLU experts, no biases), dropless and with capacity factor 0.5: 4
// assignments per expert of a micro-batch's 16 x 2, so at least half of them are dropped. Every 1F1B
// layout of the job's size (tp with and without SP, pp, dp with and without the distributed
// optimizer) and, dropless, context parallelism (cp 2 alone, with tp2+SP, with dp2+distopt, cp 4, cp2
// tp2 pp2) against one rank: fp32, so layouts differ by summation order only: the GPT test's derived
// tolerances (reorder_tolerance(kLongestSum, s), Adam's eps above the noise), reruns bit-identical.
// Routing is a discrete choice: a
// token whose k-th and (k+1)-th router probabilities differ by less than that summation noise can go
// to another expert on another layout, and the runs part: the default seed 1234 has such a near-tie at
// step 6 of the dropless GPT run (2.5e-5 at tp2 dp2 and at tp4+sp, the same on both, ~1e-8 before it),
// seed 1 one at step 10 of the dropping GPT run at tp2+sp. Seeds 2, 3 and 4 have none at np 2 and 4;
// the test runs seed 2. Capacity dropping compares probabilities across tokens, so it meets near-ties
// more often than top-k alone.
TEST_CASE("MoE layouts match one rank", "[mpi][layouts][moe]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::vector<std::string> moe = {"--model.num_experts=4", "--model.moe_router_topk=2", "--model.moe_ffn_hidden_size=48",
                                        "--model.moe_layer_freq=2", "--model.moe_aux_loss_coeff=1e-2", "--training.seed=2"};
  const std::vector<std::string> llama = {"--model.normalization=RMSNorm", "--model.position_embedding_type=rope", "--model.swiglu=true",
                                          "--model.group_query_attention=true", "--model.num_query_groups=2",
                                          "--model.untie_embeddings_and_output_weights=true", "--model.add_bias_linear=false"};
  // A micro-batch is one sample of 16 tokens: 32 assignments, capacity ceil(0.5 x 32 / 4) = 4 per expert.
  REQUIRE(expert_capacity(0.5, 16, 2, 4) * 4 < 16 * 2);
  for (bool is_llama : {false, true})
    for (bool drop : {false, true}) {
      std::vector<std::string> extra = moe;
      if (is_llama) extra.insert(extra.end(), llama.begin(), llama.end());
      if (drop) extra.push_back("--model.moe_capacity_factor=0.5");
      std::vector<Variant> variants;
      // 1F1B (the schedules move the same messages) and overlapped reductions; Llama: whole key/value
      // groups per rank (tp <= 2).
      for (const Variant& v : variants_for(world))
        if (v.schedule == "1f1b" && (!v.distributed || v.overlap) && (!is_llama || v.tp <= 2)) variants.push_back(v);
      // Context parallelism (dropless only: a capacity is per micro-batch): the load-balancing loss sums
      // its statistics over the cp group.
      if (!drop) {
        if (world == 2) variants.push_back({1, 1, 1, false, false, "1f1b", true, 2});
        if (world == 4) {
          variants.push_back({2, 1, 1, true, false, "1f1b", true, 2});
          variants.push_back({1, 1, 2, false, true, "1f1b", true, 2});
          if (!is_llama) variants.push_back({1, 1, 1, false, false, "1f1b", true, 4});
        }
        if (world == 8) variants.push_back({2, 2, 1, true, false, "1f1b", true, 2});
      }
      // The zero-bubble schedules: the router's and the experts' weight gradients deferred to W (GPT,
      // dropless; zbv with dp 2 at np 4, both schedules at np 2).
      if (!is_llama && !drop) {
        if (world == 2) variants.push_back({1, 2, 1, false, false, "zb-h1"}), variants.push_back({1, 2, 1, false, false, "zbv"});
        if (world == 4) variants.push_back({1, 2, 2, false, true, "zbv"});
      }
      extra.push_back(kSmoothAdam);
      const double steps = testing::reorder_tolerance(kLongestSum, 10);
      check_layouts(variants, extra, testing::reorder_tolerance(kLongestSum, 0), steps, steps);
    }
}
