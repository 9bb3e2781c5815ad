// What a user would do without SeqPoint, at the same number of measured iterations: profile the
// first n iterations, every (N/n)-th iteration, or n random iterations, and scale the mean by N.
// Used by `seqpoint evaluate` to put the SeqPoint error in context.
#pragma once

#include <cstdint>
#include <span>

namespace seqpoint::selector {

// Each returns the projected total of `values` (one per iteration; NaN = missing, skipped)
// from n of them, or NaN when none of the chosen iterations has a value.
double ProjectFirstN(std::span<const double> values, uint64_t n);
double ProjectUniformStride(std::span<const double> values, uint64_t n);
double ProjectRandom(std::span<const double> values, uint64_t n, uint64_t seed);

// Median, over `draws` seeded draws, of the absolute relative error (percent) of ProjectRandom.
double MedianRandomErrorPct(std::span<const double> values, uint64_t n, double actual, int draws);

}  // namespace seqpoint::selector
