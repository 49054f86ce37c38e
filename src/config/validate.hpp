// Checks of a Config on its own: every key within its range (finite numbers, sane upper bounds so
// that no size arithmetic can overflow) and the model's shape. Problems that depend on the job size
// (divisibility by the parallel sizes, memory) are the plan's (plan/layout_checks.hpp). Every problem
// becomes one line naming the key and the fix; all of them are reported together in one UserError.
#pragma once
#include <string>

#include "config/config.hpp"

namespace dtrain {

// Upper bounds of the size keys: far beyond any real model, small enough that products of sizes
// fit in 64 bits.
constexpr long kMaxLayers = 4096;
constexpr long kMaxHidden = 65536;
constexpr long kMaxFfn = 1 << 20;
constexpr long kMaxExperts = 4096;
constexpr long kMaxSeqLength = 1 << 20;
constexpr long kMaxVocab = 1 << 24;
constexpr long kMaxGlobalBatch = 1 << 24;
constexpr long kMaxRanks = 1 << 20;
constexpr long kMaxSteps = 2147483647;

// Throws UserError listing every problem found.
void validate_config(const Config& cfg);

// "1, 2, 4, 8": the divisors of n, for messages that suggest a size.
std::string divisor_list(long n);

}  // namespace dtrain
