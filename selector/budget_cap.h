// The online budget's cap: how many iterations may have been measured after t iterations
// (online_selector.h, docs/estimators.md "The budget that lasts"). The least of
//  - a count budget B, or B * t / (t + pacing) when paced;
//  - k per doubling: k * t / W for t < W, k * (1 + log2(t / W)) after, plus a bonus;
//  - a fraction f of t.
// Each term is a non-decreasing step function of t, and t grows by one per iteration, so the
// cap is evaluated only where it steps (found by galloping and bisecting on the exact formula),
// not at every iteration: the log2 of the paced term was the selector's largest per-iteration
// cost. Not thread-safe.
#pragma once

#include <cstdint>

namespace seqpoint::selector {

struct BudgetCapTerms {
  uint64_t count = 0;         // 0: no count cap
  uint64_t pacing = 0;        // 0: the count is released at once
  uint32_t per_doubling = 0;  // 0: no paced term
  uint64_t window = 64;       // W
  double fraction = 0;        // 0: no fraction cap
};

class BudgetCap {
 public:
  explicit BudgetCap(const BudgetCapTerms& terms) : terms_(terms) {}

  // The cap by the formula, evaluated afresh (UINT64_MAX: no cap).
  uint64_t Exact(uint64_t t, uint64_t bonus) const;
  // The same value, cached between the steps of the cap.
  uint64_t At(uint64_t t, uint64_t bonus) {
    return bonus == bonus_ && t >= from_ && t < until_ ? value_ : Step(t, bonus);
  }
  // The same value without moving the cache (a look ahead: the next iteration's cap).
  uint64_t Peek(uint64_t t, uint64_t bonus) const {
    return bonus == bonus_ && t >= from_ && t < until_ ? value_ : Exact(t, bonus);
  }

 private:
  uint64_t Step(uint64_t t, uint64_t bonus);  // evaluates at t and finds the next step

  BudgetCapTerms terms_;
  uint64_t value_ = 0;
  uint64_t bonus_ = 0;
  uint64_t from_ = 1, until_ = 0;  // value_ holds for t in [from_, until_); empty at first
};

}  // namespace seqpoint::selector
