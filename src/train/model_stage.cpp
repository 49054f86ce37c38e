// ModelStage: micro-batch views into the step's batch, then the model's forward and backward.
#include "train/model_stage.hpp"

namespace dtrain {

void ModelStage::bind(const BatchView& batch, double* loss_sum, float loss_weight, std::function<void(int)> before_forward) {
  batch_ = batch;
  loss_sum_ = loss_sum;
  loss_weight_ = loss_weight;
  before_forward_ = std::move(before_forward);
}

MicroBatch ModelStage::batch(int micro_batch) const {
  const long offset = static_cast<long>(micro_batch) * model_.dims().N();
  const auto at = [&](const auto* plane) { return plane ? plane + offset : nullptr; };
  MicroBatch b{batch_.tokens + offset, batch_.targets + offset, loss_sum_};
  b.loss_mask = at(batch_.loss_mask), b.doc_start = at(batch_.doc_start), b.positions = at(batch_.positions);
  return b;
}

void ModelStage::forward(int slot, int chunk, int micro_batch) {
  if (before_forward_) before_forward_(micro_batch);
  model_.forward(slot, chunk, batch(micro_batch));
}

void ModelStage::backward(int slot, int chunk, int micro_batch, const void* output_grad, void* input_grad) {
  model_.backward(slot, chunk, batch(micro_batch), loss_weight_, output_grad, input_grad);
}

void ModelStage::backward_input(int slot, int chunk, int micro_batch, const void* output_grad, void* input_grad) {
  model_.backward_input(slot, chunk, batch(micro_batch), loss_weight_, output_grad, input_grad);
}

}  // namespace dtrain
