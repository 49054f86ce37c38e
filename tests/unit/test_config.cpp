// Config loading and validation: INI + overrides, unknown keys with suggestions, wrong types, and
// every layout error naming its key.
// Tolerances: Approx() (relative 100 x float epsilon, 1.2e-5) compares double-precision formulas of a
// few dozen operations on exact inputs (each within ~1e-14 relative, whatever the CPU) with values
// written in decimal; any wrong term moves a result by far more.
#include <catch2/catch.hpp>

#include <algorithm>

#include "support/user_error.hpp"

#include "app/command_line.hpp"
#include "common/error.hpp"
#include "config/load.hpp"
#include "config/options.hpp"
#include "config/validate.hpp"
#include "plan/cluster.hpp"
#include "plan/layout_checks.hpp"
#include "plan/tensor_table.hpp"

using namespace dtrain;
using testing::contains;
using testing::error_of;

namespace {

const char* kIni =
    "[model]\nnum_layers = 4\nhidden_size = 64\nnum_attention_heads = 4\nseq_length = 32\nvocab_size = 256\n"
    "global_batch_size = 8\nmicro_batch_size = 2\n[system]\ntensor_model_parallel_size = 2\n";

}  // namespace

TEST_CASE("INI values and command-line overrides land in the Config", "[config]") {
  const Config c = load_config(kIni, "t.ini", {"--model.hidden_size=128", "--system.sequence_parallel=true"});
  CHECK(c.model.num_layers == 4);
  CHECK(c.model.hidden_size == 128);  // the override wins
  CHECK(!c.model.micro_batch_size.automatic);
  CHECK(c.model.micro_batch_size.value == 2);
  CHECK(c.system.tensor_model_parallel_size == 2);
  CHECK(c.system.sequence_parallel);
  CHECK(c.ffn_hidden() == 512);
  CHECK(c.optimizer.beta1 == Approx(0.9));  // default
  // The last of repeated overrides wins.
  CHECK(load_config(kIni, "t.ini", {"--model.num_layers=2", "--model.num_layers=6"}).model.num_layers == 6);
}

TEST_CASE("every unknown key is listed at once, with a suggestion", "[config]") {
  const std::string e = error_of([] { load_config("[model]\nhiden_size = 3\nnum_layerz = 2\n[system]\nhidden_size=1\n", "t.ini", {}); });
  CHECK(contains(e, "'model.hiden_size' (did you mean 'model.hidden_size'?)"));
  CHECK(contains(e, "'model.num_layerz' (did you mean 'model.num_layers'?)"));
  CHECK(contains(e, "'system.hidden_size' (did you mean 'model.hidden_size'?)"));
  CHECK(contains(e, "t.ini"));
  const std::string cmd = error_of([] { load_config("[model]\n", "t.ini", {"--optimizer.learning_rate=1"}); });
  CHECK(contains(cmd, "command line"));
  CHECK(contains(cmd, "optimizer.learning_rate"));
}

// Found by the ini_config fuzz target (tests/fuzz): each unknown key was compared with every known one
// by edit distance, so 100,000 unknown keys took 7 s to refuse and one key of a megabyte 3 s, and the
// error printed all of them. It names the first 20, each cut to 80 characters.
TEST_CASE("many unknown keys, or a very long one, make one short error", "[config]") {
  std::string ini = "[model]\n";
  for (int i = 0; i < 100; ++i) ini += "unknown_key_" + std::to_string(i) + " = 1\n";
  const std::string many = error_of([&] { load_config(ini, "many.ini", {}); });
  CHECK(contains(many, "'model.unknown_key_19' and 80 more;"));
  CHECK_FALSE(contains(many, "unknown_key_20"));
  const std::string key(100000, 'x');
  const std::string one = error_of([&] { load_config("[model]\n" + key + "hidden_size = 1\n", "long.ini", {}); });
  CHECK(contains(one, "'model." + std::string(74, 'x') + "...' (100017 characters)"));
  CHECK(one.size() < 300);
}

// Found by the cluster_description fuzz target: Boost.ProgramOptions' what() replaced its placeholders
// until none was left, so a malformed line or a value holding one ("%invalid_line%", "%value%") made
// dtrain --dry-run loop for ever (SIGTERM blocked by the launcher: only SIGKILL ended it).
TEST_CASE("a line or value holding Boost's placeholders is one error", "[config]") {
  const std::string line = error_of([] { load_config("[model]\nthis %invalid_line% is malformed\n", "pct.ini", {}); });
  CHECK(contains(line, "pct.ini: malformed line"));
  CHECK(contains(line, "this %25invalid_line%25 is malformed"));
  const std::string value = error_of([] { load_config("[model]\n[system]\ndevice = %value%\n", "pct.ini", {}); });
  CHECK(contains(value, "system.device"));
  CHECK(contains(value, "%25value%25"));
  CHECK(contains(error_of([] { load_config("[model]\n", "pct.ini", {"--system.device=%canonical_option%"}); }), "system.device"));
  CHECK(contains(error_of([] { parse_cluster("[cluster]\n%invalid_line%\n", "c.ini"); }), "c.ini: malformed line"));
}

TEST_CASE("a wrong type names the key", "[config]") {
  const std::string e = error_of([] { load_config("[model]\nhidden_size = big\n", "t.ini", {}); });
  CHECK(contains(e, "model.hidden_size"));
  CHECK(contains(e, "big"));
  CHECK(contains(error_of([] { load_config("[model]\n[system]\nsequence_parallel = maybe\n", "t.ini", {}); }), "system.sequence_parallel"));
}

// A very long run of blank characters (3 MB of spaces on a line before the sections) is read in one
// pass: the [model] check's std::regex recursed per character and overflowed the stack (SIGSEGV);
// a file without [model] is still refused.
TEST_CASE("an input with a 3 MB line of spaces loads", "[config]") {
  const std::string spaces(3000000, ' ');
  const Config cfg = load_config("\n" + spaces + "\n[model]\nnum_layers=3\n\t \n  [system]  \r\ndevice=cpu\n", "spaces.ini", {});
  CHECK(cfg.model.num_layers == 3);
  CHECK(testing::contains(testing::error_of([&] { load_config("\n" + spaces + "\n[system]\n", "spaces.ini", {}); }),
                          "spaces.ini has no [model] section"));
  CHECK(testing::contains(testing::error_of([] { load_config("[model ]\nx[model]\n", "near.ini", {}); }), "near.ini has no [model] section"));
}

TEST_CASE("a malformed line is reported", "[config]") {
  CHECK(contains(error_of([] { load_config("[model\nnum_layers 4\n", "t.ini", {}); }), "t.ini"));
}

TEST_CASE("layout checks name the key and the fix", "[config]") {
  Config c = load_config(kIni, "t.ini", {});
  CHECK(error_of([&] { validate_config(c); }).empty());
  CHECK(error_of([&] { check_layout(c, 4); }).empty());

  SECTION("world not divisible by tp*pp") {
    c.system.tensor_model_parallel_size = 3;
    const auto e = error_of([&] { check_layout(c, 4); });
    CHECK(contains(e, "system.tensor_model_parallel_size=3"));
    CHECK(contains(e, "does not divide the 4 ranks"));
  }
  SECTION("heads not divisible by tp") {
    c.model.num_attention_heads = 3;
    c.model.hidden_size = 63;
    CHECK(contains(error_of([&] { check_layout(c, 4); }), "model.num_attention_heads=3 is not divisible"));
  }
  SECTION("a sliding window longer than the sequence") {
    c.model.window_size = c.model.seq_length;  // every key: allowed, the same as no window
    CHECK(error_of([&] { validate_config(c); }).empty());
    c.model.window_size = c.model.seq_length + 1;
    const std::string e = error_of([&] { validate_config(c); });
    CHECK(contains(e, "model.window_size=" + std::to_string(c.model.seq_length + 1) + " is larger than model.seq_length"));
    CHECK(contains(e, "or 0 for full causal attention"));
    c.model.window_size = -1;
    CHECK(contains(error_of([&] { validate_config(c); }), "model.window_size"));
    c.model.window_size = 0;
    c.model.window_attn_skip_freq = 2;
    CHECK(contains(error_of([&] { validate_config(c); }), "model.window_attn_skip_freq=2 chooses the blocks without a sliding window, "
                                                          "but model.window_size=0 gives none a window"));
    // Megatron's is_layer_window_attention(layer_number from 1): windowed unless layer_number % freq == 0.
    c.model.window_size = 4;
    c.model.window_attn_skip_freq = 3;
    c.model.num_layers = 6;
    const ModelShape shape = ModelShape::from(c);
    for (int l = 0; l < 6; ++l) CHECK(shape.window_at(l) == ((l + 1) % 3 != 0 ? 4 : 0));
  }
  SECTION("qk_layernorm without RoPE or RMSNorm") {
    c.model.qk_layernorm = true;
    CHECK(contains(error_of([&] { validate_config(c); }), "model.qk_layernorm=true needs model.position_embedding_type=rope"));
    c.model.position_embedding_type = PositionEmbedding::rope;
    CHECK(contains(error_of([&] { validate_config(c); }), "model.qk_layernorm=true normalises each head with RMSNorm"));
    c.model.normalization = Normalization::rmsnorm;
    CHECK(error_of([&] { validate_config(c); }).empty());
  }
  SECTION("hidden size not divisible by heads") {
    c.model.num_attention_heads = 5;
    CHECK(contains(error_of([&] { validate_config(c); }), "model.hidden_size=64 is not divisible by model.num_attention_heads=5"));
  }
  SECTION("layers not divisible by pp*v") {
    c.system.pipeline_model_parallel_size = 2;
    c.system.tensor_model_parallel_size = 1;
    c.system.virtual_pipeline_model_parallel_size = 3;
    c.system.pipeline_schedule = PipelineSchedule::interleaved;
    CHECK(contains(error_of([&] { check_layout(c, 4); }), "model.num_layers=4 is not divisible"));
  }
  SECTION("recompute_method=block over more blocks than a pipeline stage holds") {
    c.system.pipeline_model_parallel_size = 2;  // 4 layers: 2 a stage
    c.system.tensor_model_parallel_size = 2;
    c.model.recompute_granularity = RecomputeGranularity::full;
    c.model.recompute_method = RecomputeMethod::block;
    c.model.recompute_num_layers = 2;
    CHECK(error_of([&] { check_layout(c, 4); }).empty());
    c.model.recompute_num_layers = 3;
    CHECK(contains(error_of([&] { check_layout(c, 4); }), "model.recompute_num_layers=3 with recompute_method=block"));
    c.model.recompute_method = RecomputeMethod::uniform;  // groups of 3: one group of 2 per stage, as Megatron does
    CHECK(error_of([&] { check_layout(c, 4); }).empty());
  }
  SECTION("an out-of-range hidden size or head count is one error, not one per key that depends on it") {
    for (const auto [hidden, heads] : {std::pair<int, int>{100001, 4}, {64, 65537}}) {
      c.model.hidden_size = hidden;
      c.model.num_attention_heads = heads;
      const std::string e = error_of([&] { validate_config(c); });
      INFO(e);
      CHECK(contains(e, "must be between 1 and 65536"));
      CHECK(std::count(e.begin(), e.end(), '\n') == 0);
    }
  }
  SECTION("global batch not divisible by micro batch x dp") {
    c.model.global_batch_size = 6;  // dp = 2, micro 2 -> needs multiples of 4
    const auto e = error_of([&] { check_layout(c, 4); });
    CHECK(contains(e, "model.global_batch_size=6"));
    CHECK(contains(e, "multiple of 4"));
  }
  SECTION("vocab not divisible by tp") {
    c.model.vocab_size = 255;
    CHECK(contains(error_of([&] { check_layout(c, 4); }), "model.vocab_size=255"));
  }
  SECTION("context parallelism cuts sequences into 2cp chunks") {
    c.system.tensor_model_parallel_size = 1;
    c.system.context_parallel_size = 16;  // seq_length 32 / 2 = 16: 32 chunks of one token
    CHECK(error_of([&] { validate_config(c); }).empty());
    CHECK(error_of([&] { check_layout(c, 16); }).empty());
    c.system.context_parallel_size = 3;
    const auto e = error_of([&] { validate_config(c); });
    CHECK(contains(e, "system.context_parallel_size=3"));
    CHECK(contains(e, "model.seq_length/2=16; choose cp among: 1, 2, 4, 8, 16"));
    c.system.context_parallel_size = 2;
    c.system.sequence_parallel = true;
    c.system.tensor_model_parallel_size = 32;  // 16 rows per cp rank cannot shard over 32
    CHECK(contains(error_of([&] { check_layout(c, 64); }), "model.seq_length=32 / system.context_parallel_size=2 = 16"));
  }
  SECTION("expert parallelism: ep divides num_experts and the data-parallel size") {
    c.system.expert_model_parallel_size = 2;
    CHECK(contains(error_of([&] { validate_config(c); }), "system.expert_model_parallel_size=2 needs a mixture-of-experts model"));
    c.model.num_experts = 6;
    c.system.expert_model_parallel_size = 4;  // dp = 2 at 4 ranks with tp 2
    auto e = error_of([&] { check_layout(c, 4); });
    CHECK(contains(e, "model.num_experts=6 is not divisible by system.expert_model_parallel_size=4"));
    CHECK(contains(e, "system.expert_model_parallel_size=4 does not divide the data-parallel size 2"));
    c.system.expert_model_parallel_size = 2;
    CHECK(error_of([&] { check_layout(c, 4); }).empty());
    c.system.use_distributed_optimizer = true;
    c.system.zero_stage = 2;
    CHECK(contains(error_of([&] { validate_config(c); }), "system.zero_stage=2 with system.expert_model_parallel_size=2"));
    c.system.zero_stage = 1;
    c.system.expert_model_parallel_size = 0;
    CHECK(contains(error_of([&] { validate_config(c); }), "system.expert_model_parallel_size"));
  }
  SECTION("ZeRO-2/3 need the distributed optimizer, on either device") {
    c.system.zero_stage = 3;
    CHECK(contains(error_of([&] { validate_config(c); }), "set system.use_distributed_optimizer=true"));
    c.system.use_distributed_optimizer = true;
    CHECK(error_of([&] { validate_config(c); }).empty());
    c.system.device = ComputeDevice::cuda;
    CHECK(error_of([&] { validate_config(c); }).empty());
    c.system.zero_stage = 4;
    CHECK(contains(error_of([&] { validate_config(c); }), "system.zero_stage"));
  }
  SECTION("parameter offload needs ZeRO-3") {
    c.system.offload_params = true;
    c.system.use_distributed_optimizer = true;
    c.system.zero_stage = 2;
    CHECK(contains(error_of([&] { validate_config(c); }), "system.offload_params=true keeps the parameter slices ZeRO-3 shards"));
    c.system.zero_stage = 3;
    CHECK(error_of([&] { validate_config(c); }).empty());
  }
  SECTION("loss scaling keys: a scale > 0, min not above initial, window and hysteresis >= 1") {
    c.optimizer.initial_loss_scale = 0;
    CHECK(contains(error_of([&] { validate_config(c); }), "optimizer.initial_loss_scale"));
    c.optimizer.initial_loss_scale = 128;
    c.optimizer.min_loss_scale = 256;
    CHECK(contains(error_of([&] { validate_config(c); }), "optimizer.min_loss_scale=256 is larger than optimizer.initial_loss_scale=128"));
    c.optimizer.min_loss_scale = 1;
    c.optimizer.loss_scale_window = 0;
    CHECK(contains(error_of([&] { validate_config(c); }), "optimizer.loss_scale_window"));
    c.optimizer.loss_scale_window = 1;
    c.optimizer.hysteresis = 0;
    CHECK(contains(error_of([&] { validate_config(c); }), "optimizer.hysteresis"));
    c.optimizer.hysteresis = 1;
    c.optimizer.loss_scale = -1;
    CHECK(contains(error_of([&] { validate_config(c); }), "optimizer.loss_scale"));
    c.optimizer.loss_scale = 0;
    CHECK(error_of([&] { validate_config(c); }).empty());
  }
}

TEST_CASE("steps to skip and the non-finite policy", "[config]") {
  const Config c = load_config(kIni, "t.ini", {"--training.iterations_to_skip=9,3,3"});
  CHECK(c.training.iterations_to_skip.steps == std::vector<long>{3, 9});  // sorted, each once
  CHECK(c.training.iterations_to_skip.contains(9));
  CHECK_FALSE(c.training.iterations_to_skip.contains(4));
  CHECK(load_config(kIni, "t.ini", {}).training.iterations_to_skip.steps.empty());
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--training.iterations_to_skip=3,x"}); }),
                 "a comma-separated list of 1-based steps"));
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--training.iterations_to_skip=0"}); }), "1-based steps"));
  // A number beyond 64 bits was read as the largest long, silently.
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--training.iterations_to_skip=5,99999999999999999999"}); }),
                 "1-based steps"));
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--training.on_nonfinite=retry"}); }), "use stop or rollback"));
  Config rollback = load_config(kIni, "t.ini", {"--training.on_nonfinite=rollback"});
  rollback.checkpoint.dir.clear();
  CHECK(contains(error_of([&] { validate_config(rollback); }), "training.on_nonfinite=rollback goes back to the latest checkpoint"));
  rollback.checkpoint.dir = "ck";
  CHECK(error_of([&] { validate_config(rollback); }).empty());
  // Early stopping ends with the best validation's checkpoint: validations and keep_best needed.
  Config early = load_config(kIni, "t.ini", {"--training.early_stop_patience=3", "--checkpoint.dir=ck"});
  CHECK(contains(error_of([&] { validate_config(early); }), "training.early_stop_patience=3 ends with the best validation's weights"));
  early.checkpoint.keep_best = 1;
  CHECK(error_of([&] { validate_config(early); }).empty());
  early.training.eval_interval = 0;
  CHECK(contains(error_of([&] { validate_config(early); }), "checkpoint.keep_best=1 keeps the checkpoints of the lowest"));
}

TEST_CASE("word-valued keys accept their words only", "[config]") {
  const auto e = error_of([] { load_config(kIni, "t.ini", {"--system.pipeline_schedule=gpipe"}); });
  CHECK(contains(e, "'system.pipeline_schedule' = 'gpipe' is not accepted; use 1f1b, interleaved, afab, zb-h1 or zbv"));
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--system.device=tpu"}); }), "'system.device' = 'tpu' is not accepted"));
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--system.precision=fp4"}); }),
                 "'system.precision' = 'fp4' is not accepted; use fp32, bf16, fp16 or fp8"));
  CHECK(load_config(kIni, "t.ini", {"--system.precision=fp8"}).system.precision == Precision::fp8);
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--model.micro_batch_size=two"}); }),
                 "'model.micro_batch_size' = 'two' is not accepted; use a positive integer or auto"));
  CHECK(load_config(kIni, "t.ini", {"--model.micro_batch_size=auto"}).model.micro_batch_size.automatic);
  const Config c = load_config(kIni, "t.ini", {"--checkpoint.load=/runs/a/step_00000010"});
  CHECK(c.checkpoint.load.mode == CheckpointLoad::Mode::path);
  CHECK(c.checkpoint.load.path == "/runs/a/step_00000010");
  CHECK(load_config(kIni, "t.ini", {"--checkpoint.load=none"}).checkpoint.load.mode == CheckpointLoad::Mode::none);
}

TEST_CASE("command line: input, flags and overrides", "[config]") {
  const char* argv[] = {"dtrain", "--dry-run", "in.ini", "--model.num_layers=2", "--system.device", "cpu"};
  const CommandLine cl = parse_dtrain_command_line(6, argv);
  CHECK(cl.dry_run);
  CHECK(cl.input == "in.ini");
  CHECK(cl.overrides == std::vector<std::string>{"--model.num_layers=2", "--system.device=cpu"});
  const char* two[] = {"dtrain", "a.ini", "b.ini"};
  CHECK(contains(error_of([&] { parse_dtrain_command_line(3, two); }), "more than one input file"));
  const char* bad[] = {"dtrain", "--bogus"};
  CHECK(contains(error_of([&] { parse_dtrain_command_line(2, bad); }), "unrecognised option '--bogus'; see 'dtrain --help'"));
  const char* gen[] = {"dtrain", "generate", "in.ini", "--tokens", "12", "--prompt=Call me"};
  const CommandLine g = parse_dtrain_command_line(6, gen);
  CHECK(g.command == CommandLine::Command::generate);
  CHECK(g.generate.tokens == 12);
  CHECK(g.generate.prompt == "Call me");
  const char* nan_tokens[] = {"dtrain", "generate", "in.ini", "--tokens", "abc"};
  const std::string e = error_of([&] { parse_dtrain_command_line(5, nan_tokens); });
  CHECK(contains(e, "--tokens"));
  CHECK(contains(e, "see 'dtrain generate --help'"));
  // dtrain plan --nodes: a number of nodes, given or left out (0 inside means "the description's").
  const char* nodes4[] = {"dtrain", "plan", "in.ini", "--nodes", "4"};
  CHECK(parse_dtrain_command_line(5, nodes4).plan.nodes == 4);
  const char* no_nodes[] = {"dtrain", "plan", "in.ini"};
  CHECK(parse_dtrain_command_line(3, no_nodes).plan.nodes == 0);
  const char* zero[] = {"dtrain", "plan", "in.ini", "--nodes", "0"};
  CHECK(contains(error_of([&] { parse_dtrain_command_line(5, zero); }), "--nodes must be between 1 and 2^20, not 0"));
  const char* negative[] = {"dtrain", "plan", "in.ini", "--nodes=-4"};
  CHECK(contains(error_of([&] { parse_dtrain_command_line(4, negative); }), "--nodes must be between 1 and 2^20, not -4"));
}

TEST_CASE("the help text lists every key with its default", "[config]") {
  Config c;
  OptionTable t(c);
  const std::string help = options_help(t);
  for (const auto& o : t.options()) CHECK(contains(help, o.name));
  CHECK(contains(help, "(default: 1f1b)"));
  // The INI written back parses to the same values.
  c.model.hidden_size = 96;
  const Config back = load_config(config_as_ini(t), "round-trip", {});
  CHECK(back.model.hidden_size == 96);
}

TEST_CASE("non-finite and out-of-range hyperparameters are all named at once", "[config]") {
  const Config c = load_config(kIni, "t.ini",
                               {"--optimizer.lr=nan", "--optimizer.beta1=nan", "--optimizer.beta2=2", "--optimizer.eps=0",
                                "--optimizer.weight_decay=-1", "--optimizer.warmup_iters=-3", "--optimizer.clip_grad=-1",
                                "--system.collective_timeout_s=nan", "--system.step_timeout_s=-1", "--training.eval_iters=0",
                                "--checkpoint.keep_last=0", "--debug.save_write_delay_s=nan"});
  const std::string e = error_of([&] { validate_config(c); });
  for (const char* key : {"optimizer.lr=nan", "optimizer.beta1=nan", "optimizer.beta2=2", "optimizer.eps=0", "optimizer.weight_decay=-1",
                          "optimizer.warmup_iters=-3", "optimizer.clip_grad=-1", "system.collective_timeout_s=nan",
                          "system.step_timeout_s=-1", "training.eval_iters=0", "checkpoint.keep_last=0",
                          "debug.save_write_delay_s=nan"}) {
    INFO(key);
    CHECK(contains(e, key));
  }
  Config ok = load_config(kIni, "t.ini", {"--optimizer.min_lr=0.5", "--optimizer.lr=0.1"});
  CHECK(contains(error_of([&] { validate_config(ok); }), "optimizer.min_lr=0.5 is larger than optimizer.lr=0.1"));
}

TEST_CASE("mixture-of-experts keys: Megatron's defaults, ranges and refusals name the key", "[config][moe]") {
  const Config d = load_config(kIni, "t.ini", {"--model.num_experts=4"});
  CHECK(d.model.moe_router_topk == 2);
  CHECK(d.moe_ffn_hidden() == d.ffn_hidden());
  CHECK(d.model.moe_aux_loss_coeff == 0.0);
  CHECK(d.model.moe_router_load_balancing_type == MoeLoadBalancing::aux_loss);
  CHECK_FALSE(d.model.moe_capacity_factor.set);
  CHECK(d.model.moe_layer_freq == 1);
  CHECK(error_of([&] { validate_config(d); }).empty());
  const Config f = load_config(kIni, "t.ini", {"--model.num_experts=4", "--model.moe_capacity_factor=1.25", "--model.moe_layer_freq=2",
                                               "--model.moe_router_load_balancing_type=none"});
  CHECK(f.model.moe_capacity_factor.set);
  CHECK(f.model.moe_capacity_factor.value == 1.25);
  CHECK(f.model.moe_layer(0));
  CHECK_FALSE(f.model.moe_layer(1));
  CHECK(f.model.moe_layer(2));
  CHECK(f.model.moe_router_load_balancing_type == MoeLoadBalancing::none);
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--model.moe_capacity_factor=lots"}); }),
                 "'model.moe_capacity_factor' = 'lots' is not accepted; use none (dropless) or a number > 0"));
  CHECK(contains(error_of([] { load_config(kIni, "t.ini", {"--model.moe_router_load_balancing_type=sinkhorn"}); }),
                 "'model.moe_router_load_balancing_type' = 'sinkhorn' is not accepted; use aux_loss or none"));
  Config c = d;
  c.model.moe_router_topk = 5;
  CHECK(contains(error_of([&] { validate_config(c); }), "model.moe_router_topk=5 must be between 1 and 4"));
  c = d;
  c.model.moe_capacity_factor = {true, 0.0};
  CHECK(contains(error_of([&] { validate_config(c); }), "model.moe_capacity_factor=0 must be > 0"));
  c.model.moe_capacity_factor = {true, 1.0};
  c.system.context_parallel_size = 2;
  CHECK(contains(error_of([&] { validate_config(c); }), "use moe_capacity_factor=none (dropless) with context parallelism"));
  c = d;
  c.model.moe_layer_freq = 0;
  CHECK(contains(error_of([&] { validate_config(c); }), "model.moe_layer_freq=0 must be between 1 and"));
  // Megatron's list form: one flag per block (num_layers = 4), written as a list or as digits.
  const Config p = load_config(kIni, "t.ini", {"--model.num_experts=4", "--model.moe_layer_pattern=[0,1,1,0]"});
  CHECK(error_of([&] { validate_config(p); }).empty());
  CHECK_FALSE(p.model.moe_layer(0));
  CHECK(p.model.moe_layer(1));
  CHECK(p.model.moe_layer(2));
  CHECK_FALSE(p.model.moe_layer(3));
  CHECK(load_config(kIni, "t.ini", {"--model.num_experts=4", "--model.moe_layer_pattern=0001"}).model.moe_layer(3));
  for (const char* bad : {"[1,0,1]", "[0,0,0,0]", "[1,2,1,1]", "1,0,1,1,1"}) {
    c = d;
    c.model.moe_layer_pattern = bad;
    CHECK(contains(error_of([&] { validate_config(c); }), "model.moe_layer_pattern=" + std::string(bad) +
                                                              " is not one 0 or 1 per block (model.num_layers=4) with at least one 1"));
  }
  c = p;
  c.model.moe_layer_freq = 2;
  CHECK(contains(error_of([&] { validate_config(c); }), "model.moe_layer_pattern and model.moe_layer_freq=2 both place the MoE blocks"));
  c = d;
  c.model.moe_aux_loss_coeff = -1;
  CHECK(contains(error_of([&] { validate_config(c); }), "model.moe_aux_loss_coeff=-1 must be a finite number >= 0"));
  c = d;
  c.model.num_experts = -1;
  CHECK(contains(error_of([&] { validate_config(c); }), "model.num_experts=-1 must be between 0 and 4096"));
  // The dense model ignores the MoE keys.
  c = load_config(kIni, "t.ini", {"--model.moe_router_topk=9"});
  CHECK(error_of([&] { validate_config(c); }).empty());
  // A width the tensor-parallel ranks cannot split.
  c = load_config(kIni, "t.ini", {"--model.num_experts=4", "--model.moe_ffn_hidden_size=33"});
  CHECK(contains(error_of([&] { check_layout(c, 2); }), "model.moe_ffn_hidden_size=33 is not divisible by system.tensor_model_parallel_size=2"));
}

TEST_CASE("Llama 3.1's RoPE scaling: its keys load, and a scaling that cannot be is refused by name", "[config]") {
  const std::string rope = std::string(kIni) + "[model]\nposition_embedding_type = rope\nrope_scaling = llama3\n";
  const Config c = load_config(rope, "t.ini", {"--model.rope_scaling_factor=32"});
  CHECK(c.model.rope_scaling == RopeScaling::llama3);
  CHECK(c.model.rope_scaling_factor == 32);
  CHECK(c.model.rope_scaling_original_max_position_embeddings == 8192);  // Llama 3.1's published defaults
  CHECK(c.model.rope_scaling_high_freq_factor == 4);
  validate_config(c);
  CHECK(contains(error_of([&] { validate_config(load_config(rope, "t.ini", {"--model.rope_scaling_high_freq_factor=1"})); }),
                 "model.rope_scaling_high_freq_factor=1 must exceed model.rope_scaling_low_freq_factor=1"));
  CHECK(contains(error_of([&] { validate_config(load_config(rope, "t.ini", {"--model.rope_scaling_factor=0.5"})); }),
                 "model.rope_scaling_factor=0.5 must be a number >= 1"));
  CHECK(contains(error_of([&] { validate_config(load_config(rope, "t.ini", {"--model.position_embedding_type=learned_absolute"})); }),
                 "model.rope_scaling=llama3 needs model.position_embedding_type=rope"));
  CHECK(contains(error_of([] { load_config("[model]\nrope_scaling = yarn\n", "t.ini", {}); }), "none or llama3"));
}
