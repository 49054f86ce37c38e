// Whether saved weights (a checkpoint, a weights file) fit a run: the model they were saved for must be
// the run's model. Layout and batch keys may differ (a checkpoint reshards to any layout, the batch is
// the run's); every key that changes the model's tensors or their meaning may not.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

// The [model] keys that define the model's tensors and their meaning, as (key, value text) in the
// options table's order and spelling, canonical: ffn_hidden_size resolved, grouped-query keys as the
// tensors see them (num_query_groups = the key/value heads). A key the model does not use (rotary keys
// without rope, num_query_groups without grouped-query attention, the moe_ keys of a dense model) has the
// value "". moe_ffn_hidden_size is resolved; the routing keys that do not shape tensors (capacity factor,
// auxiliary loss) may change between runs.
std::vector<std::pair<std::string, std::string>> model_key_values(const Config& cfg);

// "model.num_layers = 4 in <saved_as>, 2 in this run" for every model key that differs. seq_length
// counts only with learned positions (a rope model's tensors do not depend on it).
std::vector<std::string> model_differences(const Config& saved, const Config& run, const std::string& saved_as);

// UserError naming every difference, when there is one: "<what> was saved for another model: ...".
// what = "checkpoint 'DIR'", saved_as = "the checkpoint"; what = "weights file 'F'", saved_as = "the weights file".
void check_same_model(const Config& saved, const Config& run, const std::string& what, const std::string& saved_as);

}  // namespace dtrain
