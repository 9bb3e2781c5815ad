#!/bin/bash
# Makes a relocatable tarball of the agent that runs on any x86-64 Linux node (Ubuntu 22.04/24.04,
# RHEL 9, Debian 12, ...) without installing a package: the binaries, the Python marker module,
# and every shared library they load, glibc and its loader included.
#
#   packaging/bundle.sh [BUILD_DIR [OUT_DIR]]     -> OUT_DIR/seqpoint-<version>-x86_64.tar.gz
#
# Layout (unpack anywhere; nothing is written outside it):
#   bin/seqpointd, bin/seqpoint       launchers: run libexec/<name> through the bundled loader
#   libexec/seqpointd, libexec/seqpoint   the ELF binaries, unchanged
#   bin/ + libexec/seqpoint-syncwatch  when the build has it (bench/gpu/sync_watch.cpp): the CUDA
#                                     syncs of a trainer, for bench/gpu/prove.sh
#   lib/                              private libraries: ld-linux-x86-64.so.2, libc, libstdc++,
#                                     libbpf, libsqlite3, libssl, ... (what ldd lists)
#   python/seqpoint_probe/            the marker module with its libseqpoint_usdt.so (static:
#                                     loads into any Python); PYTHONPATH=<bundle>/python
#   share/seqpointd.toml              the documented default configuration
#   MANIFEST                          every file with its sha256
# Why the loader and not an rpath: a build on Debian 12 needs glibc 2.36 (its libstdc++ does),
# newer than RHEL 9's 2.34, so glibc must travel too, and a binary can only use a bundled glibc
# through the bundled loader: `lib/ld-linux-x86-64.so.2 --library-path lib libexec/X` is the
# $ORIGIN-relative equivalent of an rpath, needs no patchelf, and is not inherited by child
# processes (no LD_LIBRARY_PATH). Vendor libraries that belong to the node's driver
# (libnvidia-ml.so.1, librocm_smi64 when absent from the build) are not bundled: they are
# dlopen'ed from the node, where the driver installed them. Caveat: `ps` shows the daemon's
# command name as ld-linux-x86-64 (its argv[0] is seqpointd).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:-$PWD}
build=$(cd "$build" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

die() { echo "bundle.sh: $*" >&2; exit 1; }
[ "$(uname -m)" = x86_64 ] || die "x86-64 only (this machine: $(uname -m))"
for b in agent/daemon/seqpointd agent/cli/seqpoint sdk/python/seqpoint_probe/libseqpoint_usdt.so; do
  [ -f "$build/$b" ] || die "$build/$b is missing: build first (cmake --build $build)"
done
version=$(sed -n 's/^project(seqpoint VERSION \([0-9.]*\).*/\1/p' "$here/CMakeLists.txt" | head -1)
[ -n "$version" ] || version=0
name=seqpoint-$version-x86_64
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/$name
mkdir -p "$root"/{bin,libexec,lib,python,share}

# The shared libraries an ELF file loads, by resolved path (ldd: "name => /path (addr)" and the
# loader's own "/lib64/ld-linux-x86-64.so.2 (addr)").
deps() {
  ldd "$1" | awk '/=> \// { print $3 } /^\t\/.*ld-linux/ { print $1 }'
}

binaries="seqpointd seqpoint"
[ -x "$build/bench/seqpoint-syncwatch" ] && binaries="$binaries seqpoint-syncwatch"
for b in $binaries; do
  src=$build/agent/${b/seqpointd/daemon}/$b
  [ "$b" = seqpoint ] && src=$build/agent/cli/seqpoint
  [ "$b" = seqpoint-syncwatch ] && src=$build/bench/seqpoint-syncwatch
  install -m 0755 "$src" "$root/libexec/$b"
  # Debug sections are most of a -g build's size; symbols stay (backtraces, uprobes).
  if command -v strip >/dev/null; then strip --strip-debug "$root/libexec/$b"; fi
  for lib in $(deps "$src"); do
    base=$(basename "$lib")
    case "$base" in
      libnvidia-ml.so*) continue ;;  # the driver's, never bundled
    esac
    if [ ! -e "$root/lib/$base" ]; then install -m 0755 "$(readlink -f "$lib")" "$root/lib/$base"; fi
  done
done
loader=$(ls "$root"/lib/ld-linux-x86-64.so.2 2>/dev/null) || die "ldd listed no ld-linux-x86-64.so.2"
# glibc's libraries a binary may dlopen or get through NSS (getpwnam for the service user).
for extra in libnss_files.so.2 libresolv.so.2 libdl.so.2 libpthread.so.0 librt.so.1; do
  path=$(ldconfig -p | awk -v n="$extra" '$1 == n && /x86-64/ && !found { print $NF; found = 1 }')
  if [ -n "$path" ] && [ ! -e "$root/lib/$extra" ]; then
    install -m 0755 "$(readlink -f "$path")" "$root/lib/$extra"
  fi
done

for b in $binaries; do
  cat > "$root/bin/$b" <<LAUNCH
#!/bin/sh
# Runs the bundled $b with the bundle's own libraries (see MANIFEST's bundle.sh notes).
# Shell builtins only: the node may lack coreutils on the path (a minimal container).
dir=\${0%/*}
[ "\$dir" = "\$0" ] && dir=.
here=\$(cd "\$dir/.." && pwd -P)
exec "\$here/lib/ld-linux-x86-64.so.2" --library-path "\$here/lib" --argv0 "\$0" "\$here/libexec/$b" "\$@"
LAUNCH
  chmod 0755 "$root/bin/$b"
done

mkdir -p "$root/python/seqpoint_probe"
install -m 0644 "$here/sdk/python/seqpoint_probe/__init__.py" "$root/python/seqpoint_probe/"
install -m 0755 "$build/sdk/python/seqpoint_probe/libseqpoint_usdt.so" "$root/python/seqpoint_probe/"
"$root/bin/seqpointd" --print-default-config > "$root/share/seqpointd.toml" ||
  die "the bundled seqpointd does not run here (see above)"
(cd "$root" && find . -type f ! -name MANIFEST | sort | xargs sha256sum > MANIFEST)
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"
echo "$out/$name.tar.gz"
