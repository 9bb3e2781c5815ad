// A selector loaded from a checkpoint goes on exactly as the one that wrote it: the same
// decisions, the same strata and changes, the same image afterwards. The run has a warm-up and
// a jump in cost half way, so every part of the state (early iterations, settled cells, the
// change detectors) is in the image.
#include <doctest/doctest.h>

#include "selector/online_selector.h"
#include "selector/test_runs.h"

using namespace seqpoint::selector;
using seqpoint::selector::testing::MakeRun;

namespace {

// Iteration i of the run: slow warm-up for 30 iterations, 3x slower from 6000 on.
double TimeOf(const testing::Run& r, size_t i) {
  return r.time[i] * (i < 30 ? 2.0 : 1.0) * (i >= 6000 ? 3.0 : 1.0);
}

void FeedRange(OnlineSelector& s, const testing::Run& r, size_t from, size_t to,
               std::vector<bool>* decisions) {
  for (size_t i = from; i < to; ++i) {
    decisions->push_back(s.OnIteration(i, r.seq_len[i], r.batch[i], 0).measure);
    s.OnTime(i, r.seq_len[i], r.batch[i], TimeOf(r, i));
  }
}

}  // namespace

TEST_CASE("selector checkpoint: a loaded selector decides and stratifies as the original") {
  auto r = MakeRun(12000, 11);
  OnlineOptions o;  // seqpointd's defaults: paced, capped
  o.budget_count = 4096;
  o.per_doubling = 16;
  for (size_t at : {size_t{20}, size_t{1500}, size_t{7000}}) {
    CAPTURE(at);
    auto a = OnlineSelector::Create(o);
    REQUIRE(a.ok());
    std::vector<bool> da, db;
    FeedRange(*a, r, 0, at, &da);
    const std::string image = a->Checkpoint();
    auto b = OnlineSelector::Create(o);
    REQUIRE(b.ok());
    REQUIRE_MESSAGE(b->LoadCheckpoint(image).ok(), b->LoadCheckpoint(image).ToString());
    CHECK(b->Checkpoint() == image);
    FeedRange(*a, r, at, r.seq_len.size(), &da);
    FeedRange(*b, r, at, r.seq_len.size(), &db);
    CHECK(std::equal(da.begin() + static_cast<long>(at), da.end(), db.begin()));
    CHECK(a->measured() == b->measured());
    CHECK(b->strata().changes().size() >= 1);
    CHECK(a->strata().changes().size() == b->strata().changes().size());
    CHECK(a->strata().warmup_end() == b->strata().warmup_end());
    CHECK(a->Checkpoint() == b->Checkpoint());
    // Bounded: the image holds no per-iteration data once the warm-up is settled.
    if (at == 7000) CHECK(image.size() < 64 * 1024);
  }
}

TEST_CASE("selector checkpoint: a short, foreign or newer image is refused, not misread") {
  auto r = MakeRun(3000, 12);
  OnlineOptions o;
  o.per_doubling = 16;
  auto a = OnlineSelector::Create(o);
  REQUIRE(a.ok());
  std::vector<bool> d;
  FeedRange(*a, r, 0, r.seq_len.size(), &d);
  std::string image = a->Checkpoint();
  auto fresh = [&] { return *OnlineSelector::Create(o); };
  CHECK(fresh().LoadCheckpoint(image.substr(0, image.size() - 3)).code() ==
        seqpoint::ErrorCode::kInvalidArgument);
  CHECK(fresh().LoadCheckpoint(image + "x").code() == seqpoint::ErrorCode::kInvalidArgument);
  CHECK(fresh().LoadCheckpoint("not a checkpoint").code() == seqpoint::ErrorCode::kInvalidArgument);
  std::string newer = image;
  newer[4] = 9;  // the version after the magic
  CHECK(fresh().LoadCheckpoint(newer).code() == seqpoint::ErrorCode::kUnsupported);
}
