#include "selector/selection_json.h"

#include <doctest/doctest.h>

using namespace seqpoint::selector;

TEST_CASE("selection json: round trip") {
  Selection s;
  s.iterations = 10;
  s.method = "seqpoint-offline";
  SeqPoint p;
  p.iter = 4;
  p.iters = {4, 7};
  p.groups = {0, 1};
  p.seq_len = 12;
  p.weight = 10;
  p.bin_lo = 3;
  p.bin_hi = 20;
  p.mean_cost = 11.5;
  s.points = {p};
  auto back = SelectionFromJson(SelectionToJson(s), "sel.json");
  REQUIRE(back.ok());
  CHECK(back->iterations == 10);
  CHECK(back->points[0].iters == std::vector<uint64_t>{4, 7});
  CHECK(back->points[0].groups == std::vector<uint32_t>{0, 1});
  CHECK(back->points[0].mean_cost == 11.5);
}

TEST_CASE("selection json: bad files name the file and the problem") {
  auto msg = [](const char* text) {
    auto r = SelectionFromJson(text, "sel.json");
    REQUIRE(!r.ok());
    return r.status().message();
  };
  CHECK(msg("not json").find("sel.json: not valid JSON") == 0);
  CHECK(msg("{}").find("'iterations'") != std::string::npos);
  CHECK(msg(R"({"iterations":5,"seqpoints":[]})").find("no SeqPoints") != std::string::npos);
  CHECK(
      msg(R"({"iterations":5,"seqpoints":[{"iter":1,"seq_len":3,"weight":4}]})").find("sum to 4") !=
      std::string::npos);
  CHECK(msg(R"({"iterations":5,"seqpoints":[{"iter":1,"iters":[2],"seq_len":3,"weight":5}]})")
            .find("must start with") != std::string::npos);
  CHECK(msg(R"({"iterations":5,"seqpoints":[{"iter":1,"iters":[1,1],"seq_len":3,"weight":5}]})")
            .find("two places") != std::string::npos);
  CHECK(msg(R"({"iterations":5,"seqpoints":[{"iter":1,"seq_len":3,"weight":5,"groups":["x"]}]})")
            .find("sel.json") == 0);
}
