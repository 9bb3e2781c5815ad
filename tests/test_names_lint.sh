#!/usr/bin/env bash
# ctest turns each doctest TEST_CASE into a test whose command line filters by name; a ';' in
# a name splits that command, the filter matches nothing, and the test "passes" without
# running. This check fails on any such name so none can slip in.
set -euo pipefail
src=${1:?usage: test_names_lint.sh SOURCE_DIR}
bad=$(grep -rn --include='*.cpp' -E 'TEST_CASE\("[^"]*;' "$src" --exclude-dir='build*' || true)
if [ -n "$bad" ]; then
  echo "test names must not contain ';' (ctest would run nothing for them):"
  echo "$bad"
  exit 1
fi
echo "test names: ok"
