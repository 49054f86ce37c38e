// run_generate: the whole model from its weights file, then the tokenizer of data.tokenizer around
// generate: one prompt's text streamed as its tokens come, or a file of prompts as one batch printed at
// the end; a stop signal ends it at the next token (exit 3); the tokens per second on stderr.
#include "app/generate_command.hpp"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include "ckpt/compatibility.hpp"
#include "ckpt/weights_file.hpp"
#include "config/load.hpp"
#include "common/error.hpp"
#include "model/generate.hpp"
#include "plan/rank_plan.hpp"
#include "runtime/stop_signal.hpp"
#include "tokenizer/tokenizer.hpp"

namespace dtrain {
namespace {

// A batch's continuations are printed whole at the end: at most this many tokens in all (one prompt
// streams, whatever its length).
constexpr long kBatchTokens = 1l << 24;

// Whether text ends at a character's end: not inside a UTF-8 sequence whose last bytes are still to come.
bool ends_whole(const std::string& text) {
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    const std::size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
    return back >= need;
  }
  return true;
}

// One sequence's text printed as its tokens come. New ids are decoded after the last few printed ones
// (a tokenizer may decode a token differently at the start of a text: SentencePiece drops the space
// there) and held back while they end inside a character; only those few ids are kept.
class TextStream {
 public:
  explicit TextStream(const Tokenizer& t) : t_(t) {}
  void add(std::uint32_t id) {
    pending_.push_back(id);
    flush(false);
  }
  void finish() { flush(true); }

 private:
  bool flush(bool force) {
    if (pending_.empty()) return true;
    std::vector<std::uint32_t> all = context_;
    all.insert(all.end(), pending_.begin(), pending_.end());
    const std::string before = t_.decode(context_), after = t_.decode(all);
    if (!force && !ends_whole(after) && pending_.size() < 16) return false;
    std::size_t same = 0;  // what was printed already: the common start of the two decodings
    while (same < before.size() && same < after.size() && before[same] == after[same]) ++same;
    std::fwrite(after.data() + same, 1, after.size() - same, stdout);
    std::fflush(stdout);
    context_.assign(all.end() - std::min<long>(static_cast<long>(all.size()), 4), all.end());
    pending_.clear();
    return true;
  }
  const Tokenizer& t_;
  std::vector<std::uint32_t> context_, pending_;
};

}  // namespace

int run_generate(const Config& cfg, const LaunchEnv& env, const GenerateOptions& options, kernels::Backend backend,
                 StartupStop& startup) {
  if (env.world_size != 1) throw UserError("dtrain generate runs on one rank; start it without mpirun/srun or with -np 1");
  if (options.tokens < 0) throw UserError("dtrain generate: --tokens must be >= 0");
  if (!(options.temperature >= 0) || options.temperature > 1e6)
    throw UserError("dtrain generate: --temperature must be a finite number >= 0 (0 = greedy)");
  if (options.top_k < 0) throw UserError("dtrain generate: --top-k must be >= 0 (0 = every token)");
  if (!(options.top_p > 0 && options.top_p <= 1)) throw UserError("dtrain generate: --top-p must be in (0, 1]");
  if (options.prompt_given && !options.prompts_file.empty())
    throw UserError("dtrain generate: give --prompt or --prompts, not both");
  // The prompts: --prompt, or the lines of --prompts ("\n" in a line stands for a newline).
  std::vector<std::string> texts;
  if (!options.prompts_file.empty()) {
    std::ifstream in(options.prompts_file);
    if (!in) throw UserError("dtrain generate: cannot read the prompts file '" + options.prompts_file + "'");
    for (std::string line; std::getline(in, line);) {
      for (std::size_t at; (at = line.find("\\n")) != std::string::npos;) line.replace(at, 2, "\n");
      if (!line.empty()) texts.push_back(line);
    }
    if (texts.empty()) throw UserError("dtrain generate: the prompts file '" + options.prompts_file + "' has no prompt (one a line)");
    if (texts.size() > 4096) throw UserError("dtrain generate: at most 4096 prompts in one batch");
    if (static_cast<long>(texts.size()) * options.tokens > kBatchTokens)
      throw UserError("dtrain generate: " + std::to_string(texts.size()) + " prompts x --tokens " + std::to_string(options.tokens) +
                      " is more than the " + std::to_string(kBatchTokens) + " tokens a batch prints at its end; ask for fewer, or "
                      "give one prompt with --prompt, whose text streams as it is made");
  } else {
    texts.push_back(options.prompt.empty() ? "\n" : options.prompt);
  }
  const std::string weights = options.weights.empty() ? cfg.checkpoint.dir + "/model-final.h5" : options.weights;
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(cfg.data.tokenizer);
  const WeightsMeta meta = weights_meta(weights);
  if (!meta.config_text.empty())
    check_same_model(load_config(meta.config_text, weights + " (stored configuration)", {}), cfg, "weights file '" + weights + "'",
                     "the weights file");
  if (meta.tokenizer == kUnrecordedTokenizer)
    std::fprintf(stderr, "dtrain generate: warning: weights file '%s' does not record its tokenizer; data.tokenizer=%s must be "
                 "the one the model was trained with\n", weights.c_str(), cfg.data.tokenizer.c_str());
  else
    check_made_with(cfg.data.tokenizer, tokenizer->identity(), meta.tokenizer, "weights file '" + weights + "'");
  check_vocab_fits(*tokenizer, cfg.model.vocab_size, "weights file '" + weights + "'");
  const RankPlan whole = whole_model_plan(cfg, 1);
  std::vector<float> values(whole.arena_size);
  read_weights(weights, whole.table, values.data());
  const std::unique_ptr<GptModel> model = make_gpt_model(whole, nullptr, backend);
  model->set_parameters(values.data());
  std::vector<std::vector<std::uint32_t>> prompts;
  for (const std::string& t : texts) prompts.push_back(tokenizer->encode(t));
  SamplingOptions sampling;
  sampling.temperature = options.temperature, sampling.top_k = options.top_k, sampling.top_p = options.top_p;
  sampling.seed = options.seed.value_or(cfg.training.seed), sampling.use_cache = !options.no_cache;
  startup.done();  // from here on the loop below stops at the next token
  const auto t0 = std::chrono::steady_clock::now();
  const bool batch = prompts.size() > 1;
  std::vector<std::vector<std::uint32_t>> ids(prompts.size());
  TextStream stream(*tokenizer);
  if (!batch) {
    std::fputs(texts[0].c_str(), stdout);
    std::fflush(stdout);
  }
  const long made = generate(*model, prompts, tokenizer->vocab_size(), options.tokens, sampling, [&](const std::vector<std::uint32_t>& next) {
    if (batch)
      for (std::size_t b = 0; b < next.size(); ++b) ids[b].push_back(next[b]);
    else
      stream.add(next[0]);
    return received_stop_signal() == 0;
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stream.finish();
  if (!batch) std::printf("\n");
  for (std::size_t b = 0; batch && b < ids.size(); ++b) {
    std::printf("=== prompt %zu\n", b + 1);
    std::printf("%s%s\n", texts[b].c_str(), tokenizer->decode(ids[b]).c_str());
  }
  std::fflush(stdout);
  std::fprintf(stderr, "dtrain generate: %zu x %ld tokens in %.2f s (%.1f tokens/s, %s)\n", prompts.size(), made, seconds,
               static_cast<double>(prompts.size()) * static_cast<double>(made) / std::max(seconds, 1e-9),
               options.no_cache ? "no key/value cache" : "key/value cache");
  if (const int signo = received_stop_signal()) {
    std::fprintf(stderr, "dtrain generate: stopped by %s after %ld of %d tokens\n", signal_name(signo), made, options.tokens);
    return kPreemptedExit;
  }
  return 0;
}

}  // namespace dtrain
