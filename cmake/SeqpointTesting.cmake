# seqpoint_add_test(NAME SOURCES a.cpp [b.cpp] LIBS lib... [LABELS l...] [PROPERTIES ...])
# One helper for every doctest binary, so nothing compiled is left out of ctest.
# Each test case becomes its own ctest entry via doctest_discover_tests.
#
# The tests' own sources (doctest cases, their fixtures) compile at SEQPOINT_TEST_OPTIMIZE in
# optimised builds: -O1 compiles them in about three quarters of -O2's CPU time (0.65-0.80 on
# four test files, measured side by side), and test files are most of a clean build. The
# libraries and programs under test, the test workloads run as real processes and the benches
# keep the build type's flags, so what a test measures is built as released.
set(SEQPOINT_TEST_OPTIMIZE "-O1" CACHE STRING
    "Optimisation flag for the tests' own sources in optimised builds (empty: the build type's)")

function(seqpoint_add_test name)
  if(NOT SEQPOINT_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS;PROPERTIES" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} seqpoint_doctest_main doctest::doctest)
  if(SEQPOINT_TEST_OPTIMIZE)
    # Last -O wins: only the test's own sources; what it links keeps the build type's flags.
    target_compile_options(${name} PRIVATE
      "$<$<NOT:$<CONFIG:Debug>>:${SEQPOINT_TEST_OPTIMIZE}>")
  endif()
  set(_props "")
  if(T_LABELS)
    list(APPEND _props LABELS "${T_LABELS}")
  endif()
  if(T_PROPERTIES)
    list(APPEND _props ${T_PROPERTIES})
  endif()
  # Tests find the source and build trees through the environment. doctest's discovery splits
  # a list-valued ENVIRONMENT property into separate properties, so the variables are set by
  # running each test through env(1), which discovery supports as the target's "emulator".
  set_target_properties(${name} PROPERTIES CROSSCOMPILING_EMULATOR
    "/usr/bin/env;SEQPOINT_SOURCE_DIR=${PROJECT_SOURCE_DIR};SEQPOINT_BINARY_DIR=${PROJECT_BINARY_DIR}")
  if(_props)
    doctest_discover_tests(${name} PROPERTIES ${_props})
  else()
    doctest_discover_tests(${name})
  endif()
endfunction()
