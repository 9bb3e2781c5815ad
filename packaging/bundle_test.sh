#!/bin/bash
# ctest packaging_bundle: packaging/bundle.sh makes a tarball that runs with none of the build's
# packages: unpacked at another path inside (a) an empty root holding nothing but the bundle
# (the bundled loader run directly) and (b) a root with only a shell and its libc (the bin/
# launchers), it prints its config, checks a config file, and selects SeqPoints from a trace.
# Needs root (chroot); exits 77 (skip) with the reason otherwise.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bundle_test.sh BUILD_DIR}
if [ "$(id -u)" != 0 ]; then echo "SKIP: the clean-root test needs root (chroot)"; exit 77; fi
command -v chroot >/dev/null || { echo "SKIP: no chroot(8) here"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$("$src/packaging/bundle.sh" "$build" "$work/out" | tail -1)
[ -f "$tarball" ] || { echo "FAIL: bundle.sh made no tarball"; exit 1; }
name=$(basename "$tarball" .tar.gz)
trace='seq_len,time_ns
12,1200
40,4100
12,1180
90,9300
40,4050
'
fail() { echo "FAIL: $*"; exit 1; }

# (a) An empty root: the bundle at /srv/agent and a trace, nothing else (no /lib, no /bin/sh).
a=$work/root-a
mkdir -p "$a/srv" "$a/tmp"
tar -C "$a/srv" -xzf "$tarball"
mv "$a/srv/$name" "$a/srv/agent"
printf '%s' "$trace" > "$a/tmp/t.csv"
run_a() { chroot "$a" /srv/agent/lib/ld-linux-x86-64.so.2 --library-path /srv/agent/lib "$@"; }
out=$(run_a /srv/agent/libexec/seqpointd --print-default-config) || fail "seqpointd in an empty root"
grep -q '^# \[probes\]\|^\[probes\]\|zero_code' <<<"$out" || fail "seqpointd printed no config"
printf '[probes]\nzero_code = ["cudnn9-rnn"]\n' > "$a/tmp/c.toml"
run_a /srv/agent/libexec/seqpointd --config /tmp/c.toml --check-config ||
  fail "seqpointd --check-config in an empty root"
sel=$(run_a /srv/agent/libexec/seqpoint select --trace /tmp/t.csv --budget 2 --warmup 0 --json) ||
  fail "seqpoint select in an empty root"
grep -q 'seq' <<<"$sel" || fail "seqpoint select printed no selection: $sel"
echo "ok: empty root (bundled loader, no /lib, no shell)"

# (b) A shell and its libc only, the launchers as an operator runs them, from another path.
b=$work/root-b
mkdir -p "$b/opt" "$b/tmp" "$b/bin"
tar -C "$b/opt" -xzf "$tarball"
cp /bin/dash "$b/bin/sh"
for lib in $(ldd /bin/dash | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }'); do
  mkdir -p "$b$(dirname "$lib")"
  cp "$(readlink -f "$lib")" "$b$lib"
done
printf '%s' "$trace" > "$b/tmp/t.csv"
chroot "$b" "/opt/$name/bin/seqpoint" select --trace /tmp/t.csv --budget 2 --warmup 0 >/dev/null ||
  fail "bin/seqpoint launcher in a shell-only root"
chroot "$b" "/opt/$name/bin/seqpointd" --print-default-config >/dev/null ||
  fail "bin/seqpointd launcher in a shell-only root"
echo "ok: shell-only root (launchers)"

# The Python module loads its bundled library in this host's Python (the library is static).
if command -v python3 >/dev/null; then
  mkdir -p "$work/py" && tar -C "$work/py" -xzf "$tarball"
  PYTHONPATH="$work/py/$name/python" python3 -c \
    'import seqpoint_probe as s; assert s.available(), "library not loaded"; print("ok: python module,", s.library_path())'
fi
(cd "$work/py/$name" 2>/dev/null && sha256sum --quiet -c MANIFEST) || fail "MANIFEST does not match"
echo "PASS: $(du -h "$tarball" | cut -f1) bundle runs without the build's packages"
