// model_logits INPUT.ini WEIGHTS.h5 OUT.f32 ID...: the whole model of INPUT.ini with the weights of
// WEIGHTS.h5, one forward pass on the token ids ID... (at most seq_length), its logits written to OUT.f32
// as float32 rows (one per id, vocab_size each), for tests that check dtrain's model against others
// (tests/e2e/hf_reference.py).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/weights_file.hpp"
#include "common/error.hpp"
#include "config/load.hpp"
#include "kernels/host_runtime.hpp"
#include "model/gpt.hpp"
#include "plan/rank_plan.hpp"
#include "whole_model.hpp"

int main(int argc, char** argv) {
  using namespace dtrain;
  if (argc < 5) {
    std::cerr << "usage: model_logits INPUT.ini WEIGHTS.h5 OUT.f32 ID...\n";
    return 2;
  }
  try {
    kernels::HostRuntime host_kernels;
    const testing::WholeModel whole = testing::load_whole_model(argv[1], argv[2]);
    const Config& cfg = whole.cfg;
    GptModel* model = whole.model.get();
    const int count = argc - 4, T = cfg.model.seq_length, V = cfg.model.vocab_size;
    if (count > T) throw UserError("more ids than model.seq_length");
    std::vector<int> tokens(static_cast<std::size_t>(T), 0), targets(tokens.size(), 0);
    for (int i = 0; i < count; ++i) tokens[static_cast<std::size_t>(i)] = std::stoi(argv[4 + i]);
    model->forward(0, 0, MicroBatch{tokens.data(), targets.data()});
    std::vector<float> logits(static_cast<std::size_t>(count) * V);
    for (int i = 0; i < count; ++i) model->logits_row(0, i, logits.data() + static_cast<std::size_t>(i) * V);
    std::FILE* out = std::fopen(argv[3], "wb");
    if (!out || std::fwrite(logits.data(), sizeof(float), logits.size(), out) != logits.size() || std::fclose(out) != 0)
      throw UserError(std::string("cannot write ") + argv[3]);
  } catch (const UserError& e) {
    std::cerr << "model_logits: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
