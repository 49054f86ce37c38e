// training.freeze: which tensors train. The patterns (glob, as fnmatch) name tensors of the tensor
// table; a frozen tensor keeps its values and has no gradient, optimizer state or master copy (the
// tensor table places it after every trainable one: see TensorTable).
#pragma once
#include <string>
#include <vector>

#include "config/config.hpp"

namespace dtrain {

// The patterns of training.freeze: split at commas, spaces trimmed, empty pieces dropped.
std::vector<std::string> freeze_patterns(const std::string& freeze);

// Whether `name` matches one of the patterns.
bool frozen_by(const std::vector<std::string>& patterns, const std::string& name);

// What the run cannot do with its training.freeze, one message each: a pattern that matches no tensor
// of the model, every tensor frozen, wte and wpe apart (one kernel makes both gradients), one of the
// packed q/kv weights.
std::vector<std::string> freeze_errors(const Config& cfg);

}  // namespace dtrain
