// The model chunks of a pipeline stage as the pipeline executor sees them: the model's forward and
// backward on activation slots, fed with the current step's micro-batches (owned by the trainer).
#pragma once
#include <functional>

#include "model/gpt.hpp"
#include "parallel/pipeline_stage.hpp"
#include "train/step_batches.hpp"

namespace dtrain {

class ModelStage final : public PipelineStage {
 public:
  explicit ModelStage(GptModel& model) : model_(model) {}

  // The micro-batches of the next run: each plane of the batch (m, B, T) in device memory; the last
  // stage adds their summed token losses (the counted ones, with a loss mask) to *loss_sum (device
  // memory); every counted token loss's gradient is weighted by loss_weight (1 / the global batch's
  // counted targets, times the loss scale of an fp16 run). before_forward(micro_batch), when set, runs
  // before each forward (fault injection).
  void bind(const BatchView& batch, double* loss_sum, float loss_weight, std::function<void(int)> before_forward = {});

  int slots() const override { return model_.num_slots(); }
  DType message_type() const override { return model_.compute_type(); }
  std::size_t message_count() const override { return model_.message_count(); }
  Device& device() const override { return model_.device(); }
  void* input(int slot) override { return model_.stage_input(slot); }
  void forward(int slot, int chunk, int micro_batch) override;
  const void* output(int slot, int chunk) override { return model_.stage_output(slot, chunk); }
  void backward(int slot, int chunk, int micro_batch, const void* output_grad, void* input_grad) override;
  void backward_input(int slot, int chunk, int micro_batch, const void* output_grad, void* input_grad) override;
  void backward_weight(int slot, int chunk, int) override { model_.backward_weight(slot, chunk); }

 private:
  MicroBatch batch(int micro_batch) const;
  GptModel& model_;
  BatchView batch_;
  double* loss_sum_ = nullptr;
  float loss_weight_ = 0.0f;
  std::function<void(int)> before_forward_;
};

}  // namespace dtrain
