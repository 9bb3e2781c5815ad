# seqpoint_add_test(NAME SOURCES a.cpp [b.cpp] LIBS lib... [LABELS l...] [PROPERTIES ...])
# One helper for every doctest binary, so nothing compiled is left out of ctest.
# Each test case becomes its own ctest entry via doctest_discover_tests.
function(seqpoint_add_test name)
  if(NOT SEQPOINT_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS;PROPERTIES" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} seqpoint_doctest_main doctest::doctest)
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
