// A byte image of the online selector's state (selector_checkpoint.cpp), so that seqpointd can
// store a run's selector once in a while instead of the whole ordered iteration log it would
// otherwise replay on restart (agent/runs/run_checkpoint.cpp, docs/bounds.md).
//
// Fields are written one by one in host byte order (never a struct with its padding), so the
// same state always gives the same bytes: tests compare images. The image lives in the node's
// own state database and is read back by the same build or a newer one; the header's version
// says when a layout changed, and a reader refuses what it cannot read rather than misread it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace seqpoint::selector {

inline constexpr uint32_t kStateMagic = 0x4b435053;  // "SPCK"
// 2: time strata keep a ring for back-dating changes and each SL's first occurrence. A
// version-1 image still loads (without them: changes found later are back-dated only as far
// as the ring refills, and SLs seen before the restart have no first occurrence).
// 3: the online selector keeps its current stratum's iteration times (runs.target_error) and
// the run's time; a version-2 image loads with them empty (the stratum's times start afresh).
// 4: the online selector counts the picks the overhead budget thinned and keeps its current
// stratum's keep share; a version-3 image loads with none thinned and all kept.
// 5: time strata keep each iteration's process CPU time (the auxiliary of CPU counters,
// docs/estimators.md); a version-4 image loads with none (those projections fall back to time).
inline constexpr uint32_t kStateVersion = 5;
inline constexpr uint32_t kOldestStateVersion = 1;

class StateWriter {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  // A count, then each element written by `each(writer, element)`.
  template <typename C, typename F>
  void PutAll(const C& items, F each) {
    Put<uint64_t>(items.size());
    for (const auto& item : items) each(*this, item);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class StateReader {
 public:
  explicit StateReader(std::string_view in) : in_(in) {}
  // The layout version of the image being read (set from its header by the reader of it).
  uint32_t version = kStateVersion;
  // False (and stays false) once the image is short.
  template <typename T>
  bool Get(T* v) {
    static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>);
    if (!ok_ || in_.size() - at_ < sizeof(T)) return ok_ = false;
    std::memcpy(v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  // A count written by PutAll; refuses one larger than the bytes left could hold.
  bool Count(uint64_t* n, size_t min_bytes_each) {
    if (!Get(n)) return false;
    if (*n > (in_.size() - at_) / std::max<size_t>(1, min_bytes_each)) return ok_ = false;
    return true;
  }
  bool ok() const { return ok_; }
  // What is left to read (another image appended after this one).
  std::string_view rest() const { return ok_ ? in_.substr(at_) : std::string_view(); }
  bool done() const { return ok_ && at_ == in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace seqpoint::selector
