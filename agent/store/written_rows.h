// What a flush needs to know of a run's rows in the store to write only those that changed
// (store_save.cpp, docs/bounds.md): a digest of each row as it was last committed.
//
// A digest is taken from the very values a row binds (RowWriter below binds and digests in one
// call), so a field added to a row is compared as soon as it is written: no list of fields to
// keep in step. Two different rows share a digest with odds of about 2^-64; a row whose value
// changed and kept its digest would keep its older value until its next change.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/store/sqlite_db.h"

namespace seqpoint::daemon {

// 64-bit FNV-1a with a final mix (splitmix64's), over typed values.
class RowDigest {
 public:
  void Add(int64_t v) { Bytes(&v, sizeof v); }
  void Add(double v) { Bytes(&v, sizeof v); }  // by bit pattern: NaN equals NaN, -0 is not 0
  void Add(std::string_view v) {
    Add(static_cast<int64_t>(v.size()));
    Bytes(v.data(), v.size());
  }
  uint64_t value() const {
    uint64_t z = h_ + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  void Bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// Binds a row's values into a prepared statement (or, with none, only digests them). Plain
// columns are bound and not compared (the row's key, a time stamp of the write); Set columns
// are its content.
class RowWriter {
 public:
  explicit RowWriter(SqliteStatement* statement, RowDigest* digest) : s_(statement), d_(digest) {}
  RowWriter& Plain(int i, int64_t v) {
    if (s_) s_->Bind(i, v);
    return *this;
  }
  RowWriter& Plain(int i, std::string_view v) {
    if (s_) s_->Bind(i, v);
    return *this;
  }
  template <typename T>
  RowWriter& Set(int i, T v) {
    if (s_) s_->Bind(i, v);
    d_->Add(v);
    return *this;
  }

 private:
  SqliteStatement* s_;
  RowDigest* d_;
};

// A run's rows as last committed. Histogram rows are never deleted (a bin stays once seen).
struct WrittenRows {
  std::vector<std::pair<uint32_t, uint64_t>> histogram;       // (seq_len, digest), by seq_len
  std::vector<std::pair<std::string, uint64_t>> projections;  // (metric, digest), by metric
  bool have_seqpoints = false;
  uint64_t seqpoints = 0;  // one digest over the whole set (rewritten whole when it changes)
};

// Finds a digest in a sorted (key, digest) list; null when absent.
template <typename K, typename Key>
uint64_t* FindDigest(std::vector<std::pair<K, uint64_t>>& rows, const Key& key) {
  auto it = std::lower_bound(rows.begin(), rows.end(), key,
                             [](const auto& row, const Key& k) { return row.first < k; });
  return it != rows.end() && it->first == key ? &it->second : nullptr;
}

}  // namespace seqpoint::daemon
