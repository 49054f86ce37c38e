// What the pipeline executor needs from the model chunks of one stage: compute on activation slots,
// and the buffers it moves between stages (device memory, message_count() elements of
// message_type()). The trainer implements it over the model and the step's micro-batches; the
// executor knows neither.
#pragma once
#include <cstddef>

#include "comm/communicator.hpp"
#include "runtime/device.hpp"

namespace dtrain {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  virtual int slots() const = 0;                    // activation slots (micro-batch x chunk in flight)
  virtual DType message_type() const = 0;           // of activations and gradients between stages
  virtual std::size_t message_count() const = 0;    // elements of one activation or gradient
  virtual Device& device() const = 0;               // where the slots and messages live
  virtual void* input(int slot) = 0;                // where a chunk's input from the previous stage goes
  // Forward of `micro_batch` through `chunk` in `slot` (the last virtual stage adds the summed token
  // loss where the stage keeps it, on the device).
  virtual void forward(int slot, int chunk, int micro_batch) = 0;
  virtual const void* output(int slot, int chunk) = 0;  // the chunk's output after its forward
  // Backward; output_grad is null on the last virtual stage, input_grad null on the first.
  virtual void backward(int slot, int chunk, int micro_batch, const void* output_grad, void* input_grad) = 0;
  // The backward in two halves (zero-bubble schedules): the input gradient now, with what the weight
  // gradients need kept in the slot; then the weight gradients. Together the same as backward().
  virtual void backward_input(int slot, int chunk, int micro_batch, const void* output_grad, void* input_grad) = 0;
  virtual void backward_weight(int slot, int chunk, int micro_batch) = 0;
};

}  // namespace dtrain
