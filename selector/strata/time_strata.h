// Time strata of a run, found from every iteration's time (which the agent has for free): the
// warm-up, doubling windows of the run, and the changes of iteration cost that a drift
// detector finds (docs/estimators.md). The projections estimate each stratum from its own
// measurements, so a budget spent early never stands for a later, different, part of the run.
//
//  - Warm-up: iterations are normalized by a cost model fitted on the later half of the first
//    iterations (time ~ a + b * cost proxy); the warm-up ends after the last window of
//    `warmup_window` iterations whose median normalized time exceeds 1 + warmup_excess, among
//    windows at least half of which do. It is settled once the run is 4x as long (or at
//    warmup_horizon); until then strata are provisional and the first iterations are kept.
//  - Windows: after the warm-up, a stratum starts at each first_window * 2^k, so every
//    doubling of the run has its own measurements (with a paced budget, k per window).
//  - Changes: Page-Hinkley (page_hinkley.h) on log(time / model) of every iteration after the
//    warm-up, once over all iterations and once per SL octave [2^k, 2^(k+1)); an alarm starts
//    a new stratum where the detector places the change's beginning (the extremum of its sum,
//    since_change() observations back; never before the last boundary), and the iterations
//    already filed from there on move with it: a ring of the last kChangeRing observations
//    keeps them (at most max_changes strata are opened this way).
//  - First occurrences: the first iteration of each SL (its cost, time and ordinal) is kept
//    apart, so the projections can estimate first occurrences as their own post-stratum.
//
// Iterations are identified by ordinal (arrival order in the run); they may be observed out of
// order. Memory: the first iterations until the warm-up is settled (<= warmup_horizon), then
// one cell per (stratum, SL) seen. Not thread-safe (const calls fill a memo too).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "selector/state_codec.h"
#include "selector/strata/page_hinkley.h"

namespace seqpoint::selector {

struct TimeStrataOptions {
  // Strata also start at first_window * 2^k (0: not): each doubling of the run is estimated
  // from its own measurements, so a drift too slow for the change detector still cannot make
  // early samples stand for late iterations. It thins the samples per cell: the price of that
  // protection, paid in interval width.
  uint64_t first_window = 64;
  uint64_t warmup_horizon = 2048;  // the warm-up is looked for in these first iterations
  uint32_t warmup_window = 8;
  double warmup_excess = 0.10;  // a window this much slower than steady state is warm-up
  bool detect_changes = true;
  PageHinkleyOptions change;
  uint32_t max_changes = 64;
};

enum class StratumKind { kWarmup, kSteady, kWindow, kChange };
std::string_view StratumKindName(StratumKind kind);

struct Stratum {
  uint64_t begin = 0;  // first ordinal
  StratumKind kind = StratumKind::kSteady;
};

struct TimeChange {
  uint64_t ordinal = 0;           // the first iteration of the new stratum
  uint32_t sl_lo = 0, sl_hi = 0;  // the SL octave whose detector alarmed; 0, 0: all iterations
  int direction = 0;              // +1 slower, -1 faster
  double ratio = 0;               // new level / old level once learnt; 0 until then
};

// The first iteration seen of one SL (the lowest ordinal observed with it).
struct FirstOccurrence {
  uint64_t ordinal = 0;
  double cost = 0, time = 0;
};

struct StrataCell {
  uint64_t n = 0;
  double time = 0;  // summed iteration time
  double cost = 0;  // summed cost proxy
  // The process CPU time of the iterations that have one (AddCpu): how many, their summed CPU
  // and their summed iteration time (so a cell's CPU can be scaled to all of its n).
  uint64_t cpu_n = 0;
  double cpu = 0, cpu_time = 0;
};
// (stratum index, SL) -> sums.
using StrataCells = std::map<std::pair<uint32_t, uint32_t>, StrataCell>;

class TimeStrata {
 public:
  explicit TimeStrata(TimeStrataOptions o = {}) : o_(o) {}

  void Observe(uint64_t ordinal, uint32_t seq_len, double cost, double time);
  // The process CPU time over an iteration already observed (it comes later than its time:
  // the process's CPU clock is sampled periodically, agent/runs/process_cpu_sampler.h). Filed
  // in the cell that holds the iteration's time, and moved with it when a change stratum is
  // back-dated. False when the iteration is not found (never observed, or a second time).
  bool AddCpu(uint64_t ordinal, uint32_t seq_len, double cpu);

  // Strata as of now, ascending by begin; the first is the warm-up when one was found.
  std::vector<Stratum> Strata() const;
  // Index into Strata() of the stratum holding `ordinal`.
  uint32_t StratumOf(uint64_t ordinal) const;
  // The same, and the ordinals [*begin, *end) that stratum spans as of now.
  uint32_t StratumOf(uint64_t ordinal, uint64_t* begin, uint64_t* end) const;
  // Changes whenever the strata may have changed: at every observation until the warm-up is
  // settled, then at each new stratum (strata are only ever added at the end after that).
  uint64_t version() const { return settled_ ? uint64_t{1} << 63 | bounds_.size() : observed_; }
  StrataCells Cells() const;
  uint64_t warmup_end() const;  // first ordinal after the warm-up (0: none found)
  bool warmup_settled() const { return settled_; }
  const std::vector<TimeChange>& changes() const { return changes_; }
  // SL -> its first occurrence (one entry per distinct SL observed).
  const std::unordered_map<uint32_t, FirstOccurrence>& FirstOccurrences() const { return firsts_; }
  // How far back a change can be dated: the observations kept for it.
  static constexpr size_t kChangeRing = 512;
  uint64_t observed() const { return observed_; }
  size_t MemoryBytes() const;
  // The state as bytes and back (selector_checkpoint.cpp); Load is false on a short image.
  void SaveState(StateWriter& w) const;
  bool LoadState(StateReader& r);
  bool LoadCpu(StateReader& r);  // LoadState's version-5 part

 private:
  struct Raw {
    uint64_t ordinal;
    uint32_t seq_len;
    double cost, time;
    double cpu = -1;  // the process CPU time over it (< 0: not known yet)
  };
  static void AddTo(StrataCell& c, const Raw& r, double sign);
  struct Model {
    double a = 0, b = 0, sigma = 0;
    double At(double cost) const { return a + b * cost; }
  };
  std::vector<uint64_t> Boundaries(uint64_t warmup, uint64_t upto) const;
  uint64_t FindWarmup(const std::vector<Raw>& sorted) const;
  static Model FitModel(const std::vector<Raw>& sorted, size_t from);
  void Settle();
  void Track(const Raw& r);
  void Detect(const Raw& r);
  // One detector (key: SL octave + 1, 0: all iterations) fed x; true on an alarm.
  bool Feed(uint32_t key, PageHinkley& det, double x, const Raw& r);
  void OpenChange(uint32_t key, int direction, double level_before, uint64_t since, const Raw& r);
  // The ordinal the change found by detector `key` began at, `since` of its observations back.
  uint64_t ChangeStart(uint32_t key, uint64_t since, const Raw& r) const;
  // Moves the cells of ring observations at or after `from` into the last stratum (just opened).
  void RefileFrom(uint64_t from);
  void NoteFirst(const Raw& r);
  void ExtendBounds();
  const std::vector<uint64_t>& ProvisionalBounds() const;

  TimeStrataOptions o_;
  uint64_t observed_ = 0;
  bool settled_ = false;
  std::vector<Raw> early_;  // until settled, in ordinal order
  // Memo of the provisional warm-up end and strata (before settling), as of observed_.
  mutable uint64_t memo_observed_ = UINT64_MAX;
  mutable uint64_t memo_warmup_ = 0;
  mutable std::vector<uint64_t> memo_bounds_;
  uint64_t warmup_ = 0;
  Model model_;
  std::vector<uint64_t> changes_at_;  // ordinals that start a change stratum
  std::vector<TimeChange> changes_;
  uint64_t max_ordinal_ = 0;
  std::unordered_map<uint64_t, StrataCell> cells_;  // once settled; key stratum << 32 | SL
  std::vector<uint64_t> bounds_;  // once settled: Boundaries(warmup_, max_ordinal_), kept current
  uint64_t next_window_ = 0;
  // Track's stratum, for ordinals [track_begin_, track_end_) while bounds_ has track_bounds_,
  // and that stratum's cells by SL (SLs below kTrackedSls), so that most observations skip the
  // hash. The pointers are into cells_ (node-based: they survive its rehashing) and are used
  // only by the object that took them (track_owner_): a copy starts afresh.
  static constexpr uint32_t kTrackedSls = 4096;
  uint32_t track_stratum_ = 0;
  uint64_t track_begin_ = 1, track_end_ = 0;
  size_t track_bounds_ = 0;
  std::vector<StrataCell*> track_cells_;
  const TimeStrata* track_owner_ = nullptr;
  PageHinkley all_;
  std::array<std::optional<PageHinkley>, 33> by_octave_;  // SL octave k at [k]
  std::map<uint32_t, size_t> pending_ratio_;  // detector key (octave + 1, 0: all) -> change
  std::map<uint32_t, double> old_level_;
  std::vector<Raw> ring_;  // the last kChangeRing observations fed to Detect (circular)
  size_t ring_next_ = 0;
  uint64_t ring_evicted_max_ = 0;  // the highest ordinal that left the ring
  std::unordered_map<uint32_t, FirstOccurrence> firsts_;
};

}  // namespace seqpoint::selector
