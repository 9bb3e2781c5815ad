#include "collectors/counter_groups.h"

#include <doctest/doctest.h>

namespace seqpoint::collectors {

TEST_CASE("counter groups: greedy split keeps order, drops what fits nowhere") {
  // A PMU with 3 counters on which "bogus" does not exist.
  auto probe = [](std::span<const std::string> g) -> Status {
    for (const auto& e : g) {
      if (e == "bogus") return Unsupported("no such event");
    }
    return g.size() <= 3 ? Status::Ok() : Unavailable("too many");
  };
  std::vector<std::string> events = {"a", "b", "bogus", "c", "d", "e", "f", "g", "a"};
  EventGroups g = SplitIntoGroups(events, 0, probe);
  REQUIRE(g.groups.size() == 3);
  CHECK(DescribeGroups(g) == "a, b, c; d, e, f; g");
  REQUIRE(g.rejected.size() == 2);
  CHECK(g.rejected[0].event == "bogus");
  CHECK(g.rejected[0].reason.message() == "no such event");
  CHECK(g.rejected[1].event == "a");  // duplicate
  CHECK(DescribeGroups(SplitIntoGroups(events, 2, probe)) == "a, b; c, d; e, f; g");
}

TEST_CASE("counter groups: visit k measures group k mod G") {
  CHECK(GroupForVisit(0, 3) == 0);
  CHECK(GroupForVisit(4, 3) == 1);
  CHECK(GroupForVisit(5, 3) == 2);
  CHECK(GroupForVisit(7, 1) == 0);
  CHECK(GroupForVisit(7, 0) == 0);
  auto all_ok = [](std::span<const std::string>) { return Status::Ok(); };
  CHECK(SplitIntoGroups({}, 0, all_ok).groups.empty());
}

}  // namespace seqpoint::collectors
