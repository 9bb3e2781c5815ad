#include "common/status.h"

#include <doctest/doctest.h>

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
