// Whether a checkpoint can be resumed by a run: the model it was saved for must be the run's model.
// Layout and batch keys may differ (a checkpoint reshards to any layout, the batch is the run's);
// every key that changes the model's tensors or their meaning may not.
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

// "model.num_layers = 4 in the checkpoint, 2 in this run" for every model key that differs.
std::vector<std::string> model_differences(const Config& saved, const Config& run);

// UserError naming every difference and the checkpoint, when there is one.
void check_same_model(const Config& saved, const Config& run, const std::string& checkpoint);

}  // namespace dtrain
