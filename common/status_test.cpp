#include "common/status.h"

#include <doctest/doctest.h>

#include <string>

TEST_CASE("status: ok, error and context") {
  seqpoint::Status ok;
  CHECK(ok.ok());
  auto e = seqpoint::InvalidArgument("bad trace").WithContext("reading t.csv");
  CHECK(!e.ok());
  CHECK(e.ToString() == "invalid argument: reading t.csv: bad trace");
  seqpoint::Result<int> r = 3;
  CHECK(r.ok());
  CHECK(*r == 3);
  seqpoint::Result<int> bad = seqpoint::NotFound("x");
  CHECK(!bad.ok());
  CHECK(bad.status().code() == seqpoint::ErrorCode::kNotFound);
}

namespace {
seqpoint::Result<int> Half(int x) {
  if (x % 2 != 0) return seqpoint::InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}
seqpoint::Result<int> Quarter(int x) {
  SEQPOINT_ASSIGN_OR_RETURN(int half, Half(x));
  SEQPOINT_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}
}  // namespace

TEST_CASE("status: assign-or-return passes the value on or returns the error") {
  CHECK(*Quarter(12) == 3);
  CHECK(Quarter(6).status().message() == "odd: 3");
}
