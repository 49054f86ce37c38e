// model_grads INPUT.ini WEIGHTS.h5 BATCH.bin GRADS.h5: the whole model of INPUT.ini (micro_batch_size 1)
// with the weights of WEIGHTS.h5, one forward and backward pass on the sample of BATCH.bin, for tests
// that check dtrain's masked loss, document-masked attention and position ids against PyTorch
// (tests/e2e/hf_reference.py packed). BATCH.bin: int32 T, then T int32 token ids, T int32 targets, T
// float32 loss-mask values, T int32 document starts, T int32 position ids. Prints the loss (the mean of
// the counted targets' losses) and writes the parameters' gradients of that loss as a weights file
// (the model's configuration kept), which ckpt-consolidate --export-hf turns into Hugging Face names.
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
  if (argc != 5) {
    std::cerr << "usage: model_grads INPUT.ini WEIGHTS.h5 BATCH.bin GRADS.h5\n";
    return 2;
  }
  try {
    kernels::HostRuntime host_kernels;
    const testing::WholeModel whole = testing::load_whole_model(argv[1], argv[2]);
    const Config& cfg = whole.cfg;
    GptModel* model = whole.model.get();
    std::ifstream batch(argv[3], std::ios::binary);
    int T = 0;
    batch.read(reinterpret_cast<char*>(&T), sizeof T);
    if (!batch || T != cfg.model.seq_length || cfg.model.micro_batch_size.value != 1)
      throw UserError("BATCH.bin must hold one sample of model.seq_length tokens (micro_batch_size 1)");
    std::vector<int> tokens(T), targets(T), doc_start(T), positions(T);
    std::vector<float> mask(T);
    batch.read(reinterpret_cast<char*>(tokens.data()), 4 * T);
    batch.read(reinterpret_cast<char*>(targets.data()), 4 * T);
    batch.read(reinterpret_cast<char*>(mask.data()), 4 * T);
    batch.read(reinterpret_cast<char*>(doc_start.data()), 4 * T);
    batch.read(reinterpret_cast<char*>(positions.data()), 4 * T);
    if (!batch) throw UserError("BATCH.bin is truncated");
    double counted = 0.0;
    for (const float m : mask) counted += m;

    double loss_sum = 0.0;
    MicroBatch mb{tokens.data(), targets.data(), &loss_sum};
    mb.loss_mask = mask.data(), mb.doc_start = doc_start.data(), mb.positions = positions.data();
    model->forward(0, 0, mb);
    model->backward(0, 0, mb, static_cast<float>(1.0 / counted), nullptr, nullptr);
    std::printf("loss %.17g\n", loss_sum / counted);

    WeightsMeta meta = weights_meta(argv[2]);
    write_weights(argv[4], model->table(), model->grads().as<float>(), meta);
  } catch (const UserError& e) {
    std::cerr << "model_grads: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
