#include "agent/cli/cli_args.h"

#include <doctest/doctest.h>

using seqpoint::cli::ParseArgs;

TEST_CASE("cli args: values, flags, inline values and positionals") {
  const char* argv[] = {"--trace", "t.csv", "--json", "--budget=5", "extra"};
  auto r = ParseArgs(argv, {{"--trace", true, ""}, {"--json", false, ""}, {"--budget", true, ""}});
  REQUIRE(r.ok());
  CHECK(*r->Get("--trace") == "t.csv");
  CHECK(r->Has("--json"));
  CHECK(**r->GetInt("--budget") == 5);
  CHECK(r->positional().size() == 1);
}

TEST_CASE("cli args: unknown option, missing value and bad numbers name the option") {
  const char* unknown[] = {"--nope"};
  auto r1 = ParseArgs(unknown, {});
  CHECK(!r1.ok());
  CHECK(r1.status().message().find("--nope") != std::string::npos);
  const char* missing[] = {"--trace"};
  auto r2 = ParseArgs(missing, {{"--trace", true, ""}});
  CHECK(!r2.ok());
  const char* bad[] = {"--budget", "ten"};
  auto r3 = ParseArgs(bad, {{"--budget", true, ""}});
  REQUIRE(r3.ok());
  auto n = r3->GetInt("--budget");
  CHECK(!n.ok());
  CHECK(n.status().message().find("ten") != std::string::npos);
}
