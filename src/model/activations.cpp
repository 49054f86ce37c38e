// Activations: allocate what the layout counts, then carve the same layout into it.
#include "model/activations.hpp"

namespace dtrain {

Activations::Activations(const ActivationLayout& layout) : layout_(layout), arena_(layout.floats()) {
  carve_activations(arena_.data(), layout_, slots_, scratch_);
}

}  // namespace dtrain
