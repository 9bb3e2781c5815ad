#!/usr/bin/env bash
# Installs every build, test and run-time dependency of the project from Debian 12 packages.
# Idempotent: re-running installs nothing new. Needs root (or sudo).
set -euo pipefail

PKGS=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang llvm lld libclang-rt-14-dev clang-format
  # eBPF
  libbpf-dev bpftool libelf-dev zlib1g-dev systemtap-sdt-dev linux-libc-dev
  # counters and vendor libraries
  libpapi-dev papi-tools librocm-smi-dev
  # agent
  libboost-dev libboost-system-dev libtomlplusplus-dev libsqlite3-dev sqlite3 nlohmann-json3-dev
  libprotobuf-dev protobuf-compiler libsnappy-dev libssl-dev
  # tests
  doctest-dev prometheus python3 systemd util-linux iproute2 procps curl
  # `seqpoint report --html` rendered in headless Chromium (report_html_test)
  chromium
  # tests of the TLS upload: certificates (openssl CLI), Prometheus basic_auth_users hashes
  openssl python3-bcrypt
  # training workload
  libtorch-dev libopenblas0-pthread python3-torch xz-utils
  # packaging
  dpkg-dev fakeroot file time man-db shellcheck adduser init-system-helpers
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
