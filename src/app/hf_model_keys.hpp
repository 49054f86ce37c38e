// checkpoint.init_from=hf:DIR without copying the model into the input: the [model] keys the input does
// not give are taken from DIR/config.json, and those it gives must agree with it.
#pragma once
#include <string>
#include <vector>

#include "comm/host_comm.hpp"
#include "config/config.hpp"

namespace dtrain {

// The overrides ("--model.num_layers=4") that complete cfg, as loaded from the input (`given`: the keys
// it set, load_config), from DIR/config.json when checkpoint.init_from is hf:DIR: every model key the
// input does not give (seq_length too where positions are learned; with RoPE it is the run's own
// choice). Rank 0 reads and compares, and prints a note of the keys taken; every rank gets the same
// overrides, or the same UserError naming each key the input gives another value. None for another
// init_from.
std::vector<std::string> hf_model_overrides(HostComm world, const Config& cfg, const std::vector<std::string>& given);

}  // namespace dtrain
