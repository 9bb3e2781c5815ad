// The one main() of every doctest binary (linked through seqpoint_add_test).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
