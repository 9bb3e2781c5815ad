// SplitMix64 (Steele, Lea, Flood 2014): the one integer hash behind the agent's pseudo-random
// but reproducible choices (which chosen iteration is a control, the selector's coin per
// ordinal). Keyed only by its argument, so a replay of the same inputs makes the same choices.
#pragma once

#include <cstdint>

namespace seqpoint {

inline constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace seqpoint
