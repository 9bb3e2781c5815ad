#!/usr/bin/env bash
# The .deb end to end (ctest: packaging_deb; root; runs alone). On this machine, as in CI:
#   1. cpack builds the package twice from the build tree, as versions V~pkgtest1 and V~pkgtest2;
#      the control data (Depends from dpkg-shlibdeps, conffiles, scripts) and file list are
#      checked, and the paths the package would create are recorded.
#   2. dpkg -i V~pkgtest1: user, state directory, enablement, the installed unit passes
#      `systemd-analyze verify` (man page included) and the exposure limit, the config passes
#      --check-config, Debian's python3 imports seqpoint_probe, the header builds through
#      `pkg-config --cflags seqpoint`.
#   3. seqpointd starts from the installed files. Under systemd, postinst has started the
#      service. Without systemd (containers, CI), the unit is emulated: user seqpoint, exactly
#      the unit's capabilities (read from the installed unit), no_new_privs, and /home and
#      /root hidden in a private mount namespace (ProtectHome=yes).
#   4. Training jobs mark iterations, run by user nobody from a 0700 directory under /home:
#      a C++ program built against the installed header, a Python loop using the installed
#      module, and the real trainer (examples/seqpoint-train) when it is built. The agent must
#      report each as a run with iterations (`seqpoint status`/`runs`, or the control socket),
#      and /metrics must answer.
#   5. Upgrade to V~pkgtest2 after editing the conffile: the edits and the state survive (the
#      restarted agent lists the runs of before), and the README's recipe for non-root
#      operators works (control.group = "seqpoint": a member may query, others may not).
#   6. dpkg -r keeps config and state; dpkg -P leaves nothing: every path the package created
#      is gone, with /etc/seqpoint, /var/lib/seqpoint, /run/seqpoint and systemd's records.
# A build without the live eBPF source (SEQPOINT_HAVE_EBPF=0) replays a recorded trace in step
# 4 instead (SEQPOINT_PKGTEST_MODE=replay forces it). Exit 77 = skipped.
set -euo pipefail

PKG=seqpoint-agent
UNIT=/lib/systemd/system/seqpointd.service
CONF=/etc/seqpoint/seqpointd.toml
SOCK=/run/seqpoint/control.sock

log() { echo "[packaging_deb] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

[ "$(id -u)" = 0 ] || skip "needs root (dpkg -i); CI runs it as root"
for tool in dpkg dpkg-deb cpack setpriv unshare python3 curl getent; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/setup.sh)"
done
src=${SEQPOINT_SOURCE_DIR:?} bin=${SEQPOINT_BINARY_DIR:?}
[ -f "$bin/CPackConfig.cmake" ] || fail "$bin/CPackConfig.cmake missing: configure the tree"
[ -x "${SEQPOINTD:-}" ] || skip "seqpointd is not built"
[ -x "${SEQPOINT_CLI:-}" ] || skip "seqpoint is not built"

installed_version() { dpkg-query -W -f='${db:Status-Status} ${Version}' "$PKG" 2>/dev/null || true; }
case "$(installed_version)" in
  "" | not-installed*) ;;
  *~pkgtest*) log "purging $PKG left by an interrupted run"; dpkg -P "$PKG" >/dev/null ;;
  *) skip "$PKG $(installed_version) is installed on this machine; the test would replace it" ;;
esac

systemd_running=0
[ -d /run/systemd/system ] && systemd_running=1
user_existed=0
getent passwd seqpoint >/dev/null && user_existed=1
work=$(mktemp -d /tmp/seqpoint-pkgtest.XXXXXX)
mkdir -p /home
jobdir=$(mktemp -d /home/seqpoint-pkgtest.XXXXXX)
pids=()
dropin_dir=/run/systemd/system/seqpointd.service.d

cleanup() {
  local rc=$?
  set +e
  if [ -f "$dropin_dir/pkgtest.conf" ]; then
    rm -f "$dropin_dir/pkgtest.conf"
    rmdir "$dropin_dir" 2>/dev/null
    systemctl daemon-reload
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  case "$(installed_version)" in *~pkgtest*) dpkg -P "$PKG" >/dev/null 2>&1 ;; esac
  if [ "$user_existed" = 0 ] && getent passwd seqpoint >/dev/null; then
    deluser --system --quiet seqpoint >/dev/null 2>&1 || userdel seqpoint
    getent group seqpoint >/dev/null && groupdel seqpoint 2>/dev/null
  fi
  if [ "$rc" != 0 ] && [ -f "$work/daemon.log" ]; then
    echo "--- seqpointd log (last 40 lines)"; tail -40 "$work/daemon.log"
  fi
  rm -rf "$work" "$jobdir"
  exit "$rc"
}
trap cleanup EXIT

mode=${SEQPOINT_PKGTEST_MODE:-}
if [ -z "$mode" ]; then
  mode=replay
  grep -q 'SEQPOINT_HAVE_EBPF 1' "$bin/generated/seqpoint/features.h" && mode=live
fi
log "mode: $mode; systemd running: $systemd_running"

# --- 1. build and inspect --------------------------------------------------------------------
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$bin/CPackConfig.cmake")
[ -n "$version" ] || fail "no CPACK_PACKAGE_VERSION in $bin/CPackConfig.cmake"
for n in 1 2; do
  cpack --config "$bin/CPackConfig.cmake" -G DEB -B "$work/v$n" \
        -D CPACK_DEBIAN_PACKAGE_VERSION="$version~pkgtest$n" > "$work/cpack$n.log" 2>&1 ||
    { cat "$work/cpack$n.log"; fail "cpack (version $version~pkgtest$n)"; }
done
deb1=$(ls "$work"/v1/${PKG}_*.deb) deb2=$(ls "$work"/v2/${PKG}_*.deb)
log "built $(basename "$deb1") ($(du -k "$deb1" | cut -f1) KiB) and $(basename "$deb2")"

[ "$(dpkg-deb -f "$deb1" Package)" = "$PKG" ] || fail "package name"
[ "$(dpkg-deb -f "$deb1" Version)" = "$version~pkgtest1" ] || fail "package version"
depends=$(dpkg-deb -f "$deb1" Depends)
log "Depends: $depends"
for dep in libc6 libstdc++6 libsqlite3-0 libssl adduser init-system-helpers; do
  grep -q "$dep" <<<"$depends" || fail "Depends lacks $dep (dpkg-shlibdeps or CPACK_DEBIAN_PACKAGE_DEPENDS)"
done
if grep -q 'SEQPOINT_HAVE_EBPF 1' "$bin/generated/seqpoint/features.h"; then
  grep -q libbpf <<<"$depends" || fail "Depends lacks libbpf although seqpointd links it"
fi
dpkg-deb -e "$deb1" "$work/control"
[ "$(cat "$work/control/conffiles")" = "$CONF" ] || fail "conffiles: $(cat "$work/control/conffiles")"
for s in postinst prerm postrm; do [ -x "$work/control/$s" ] || fail "$s missing or not executable"; done
grep -q 'activate-noawait ldconfig' "$work/control/triggers" || fail "no ldconfig trigger"

dpkg-deb -c "$deb1" | awk '{print $NF}' | sed 's#^\./#/#; s#/$##' | grep -v '^$' > "$work/files"
for f in /usr/sbin/seqpointd /usr/bin/seqpoint "$UNIT" "$CONF" \
         /usr/share/man/man8/seqpointd.8.gz /usr/share/man/man1/seqpoint.1.gz \
         /usr/include/seqpoint/usdt.h /usr/lib/python3/dist-packages/seqpoint_probe/__init__.py \
         /usr/share/doc/$PKG/README.md; do
  grep -qx "$f" "$work/files" || fail "the package lacks $f"
done
grep -qE '/pkgconfig/seqpoint\.pc$' "$work/files" || fail "the package lacks seqpoint.pc"
grep -qE '/libseqpoint_usdt\.so$' "$work/files" || fail "the package lacks libseqpoint_usdt.so"
if grep -E 'seqpoint-train|corpora|_test$' "$work/files"; then
  fail "examples or tests leaked into the package (above)"
fi
# What the package will create: every listed path absent now must be absent after purge.
while read -r f; do [ -e "$f" ] || echo "$f"; done < "$work/files" > "$work/created"
log "package: $(wc -l < "$work/files") paths, $(wc -l < "$work/created") new on this machine"

# --- 2. install ------------------------------------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
dpkg -i "$deb1" > "$work/dpkg-i1.log" 2>&1 || { cat "$work/dpkg-i1.log"; fail "dpkg -i $deb1"; }
[ "$(installed_version)" = "installed $version~pkgtest1" ] || fail "status: $(installed_version)"
getent passwd seqpoint >/dev/null || fail "postinst did not create user seqpoint"
[ "$(stat -c '%U:%G %a' /var/lib/seqpoint)" = "seqpoint:seqpoint 750" ] ||
  fail "/var/lib/seqpoint is $(stat -c '%U:%G %a' /var/lib/seqpoint)"
[ -L /etc/systemd/system/multi-user.target.wants/seqpointd.service ] ||
  fail "postinst did not enable seqpointd.service"
man_opt=()
command -v man >/dev/null || man_opt=(--man=no)
out=$(systemd-analyze verify "${man_opt[@]}" "$UNIT" 2>&1) || fail "verify $UNIT: $out"
[ -z "$out" ] || fail "verify $UNIT warns: $out"
systemd-analyze security --offline=yes --threshold=30 "$UNIT" > "$work/security.txt" 2>&1 ||
  fail "exposure over 3.0: $(tail -1 "$work/security.txt")"
log "installed unit: verify clean, $(tail -1 "$work/security.txt" | sed 's/^→ //')"
/usr/sbin/seqpointd --check-config --config "$CONF" || fail "--check-config on the packaged config"
/usr/bin/seqpoint --version | grep -q "$(cut -d~ -f1 <<<"$version")" || fail "seqpoint --version"
if command -v man >/dev/null; then
  man -w seqpointd >/dev/null && man -w 1 seqpoint >/dev/null || fail "man pages not found by man"
fi
# Debian's python3, clean environment, from /: the module and its library from the package.
pyout=$(cd / && env -i PATH=/usr/bin:/bin /usr/bin/python3 -c '
import seqpoint_probe, sys
print(seqpoint_probe.__file__, seqpoint_probe.library_path())
sys.exit(0 if seqpoint_probe.available() else 1)' 2>&1) || fail "python3 import seqpoint_probe: $pyout"
log "python3: $pyout"

# --- the training jobs -----------------------------------------------------------------------
chown nobody "$jobdir"
chmod 0700 "$jobdir"
cat > "$jobdir/job.py" <<'EOF'
import sys, time, seqpoint_probe
if not seqpoint_probe.available():
    sys.exit("seqpoint_probe: library not loaded")
i = 0
while True:
    sl = 16 + (i * 37) % 240
    with seqpoint_probe.iteration(seq_len=sl, batch=8, tokens=sl * 6):
        time.sleep(sl * 20e-6)
    i += 1
EOF
have_cpp_job=0
if command -v pkg-config >/dev/null && command -v g++ >/dev/null &&
   echo '#include <sys/sdt.h>' | g++ -E -x c++ - >/dev/null 2>&1; then
  cat > "$work/job.cpp" <<'EOF'
// A training loop in miniature: marks each iteration with the installed header.
#include <seqpoint/usdt.h>
#include <unistd.h>
#include <cstdint>
int main() {
  for (uint64_t i = 0;; ++i) {
    uint32_t sl = 16 + (i * 53) % 496;
    SEQPOINT_ITERATION_BEGIN(i, sl, 16, sl * 12);
    usleep(sl * 20);
    SEQPOINT_ITERATION_END(i);
  }
}
EOF
  cflags=$(pkg-config --cflags seqpoint) || fail "pkg-config --cflags seqpoint"
  # shellcheck disable=SC2086
  g++ -O1 $cflags "$work/job.cpp" -o "$jobdir/job" || fail "building against the installed header"
  chown nobody "$jobdir/job"
  have_cpp_job=1
  log "pkg-config --cflags seqpoint: '$cflags'; C++ job built against the installed header"
else
  log "note: pkg-config, g++ or sys/sdt.h missing: the C++ job is not built"
fi

# Starts job `$2...` in the background as user nobody (another user than the agent's) from the
# hidden job directory, with SEQPOINT_RUN_ID=$1; records its pid (exec keeps it the job's own).
start_job() {
  local run_id=$1
  shift
  ( exec setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=-all \
      env -i -C "$jobdir" PATH=/usr/bin:/bin HOME="$jobdir" SEQPOINT_RUN_ID="$run_id" "$@" \
      > "$work/job-$run_id.log" 2>&1 ) &
  pids+=($!)
  runs+=("$run_id")
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts the agent as the unit would, with extra daemon flags "$@"; sets daemon_pid, port.
start_agent() {
  port=$(free_port)
  if [ "$systemd_running" = 1 ]; then
    # The real unit, with the test's flags in a runtime drop-in (gone at cleanup or reboot).
    mkdir -p "$dropin_dir"
    printf '[Service]\nExecStart=\nExecStart=/usr/sbin/seqpointd --config %s --metrics-listen 127.0.0.1:%s %s\n' \
      "$CONF" "$port" "$*" > "$dropin_dir/pkgtest.conf"
    systemctl daemon-reload
    systemctl restart seqpointd.service
    daemon_pid=$(systemctl show -p MainPID --value seqpointd.service)
  else
    install -d -o seqpoint -g seqpoint -m 0750 /run/seqpoint
    # The unit's ExecStartPre, as root: the directory of the probes' pins (probes.pin_dir).
    eval "$(sed -n 's/^ExecStartPre=+//p' "$UNIT")"
    local caps setpriv_caps
    caps=$(sed -n 's/^AmbientCapabilities=//p' "$UNIT")
    setpriv_caps=$(tr ' ' '\n' <<<"$caps" | tr '[:upper:]' '[:lower:]' | sed 's/^cap_/+/' | paste -sd,)
    # ProtectHome=yes: empty /home and /root, in a mount namespace of the agent's own.
    local hide=(unshare --mount --propagation private -- sh -c '
      mount -t tmpfs -o mode=0755 tmpfs /home && mount -t tmpfs -o mode=0700 tmpfs /root &&
      exec "$@"' sh)
    if ! unshare --mount --propagation private true 2>/dev/null; then
      log "note: no mount namespaces here (a container?): /home is not hidden from the agent"
      hide=()
    fi
    "${hide[@]}" setpriv --reuid=seqpoint --regid=seqpoint --init-groups --no-new-privs \
        --inh-caps=-all,"$setpriv_caps" --ambient-caps=-all,"$setpriv_caps" \
        --bounding-set=-all,"$setpriv_caps" \
        /usr/sbin/seqpointd --config "$CONF" --metrics-listen "127.0.0.1:$port" "$@" \
        >> "$work/daemon.log" 2>&1 &
    daemon_pid=$!
    pids+=("$daemon_pid")
  fi
  local deadline=$((SECONDS + 60))
  until [ -S "$SOCK" ] && control '{"cmd":"status"}' >/dev/null 2>&1; do
    kill -0 "$daemon_pid" 2>/dev/null || fail "seqpointd exited at start"
    [ "$SECONDS" -lt "$deadline" ] || fail "seqpointd did not open $SOCK within 60 s"
    sleep 0.5
  done
  agent_started=$SECONDS
  log "seqpointd running (pid $daemon_pid, /metrics on 127.0.0.1:$port)"
}

stop_agent() {
  if [ "$systemd_running" = 1 ]; then
    systemctl stop seqpointd.service
  else
    kill -TERM "$daemon_pid"
    local rc=0
    wait "$daemon_pid" || rc=$?
    [ "$rc" = 0 ] || fail "seqpointd exited with $rc on SIGTERM"
  fi
}

# One control request (a JSON line) through the socket; prints the result JSON.
control() {
  python3 - "$SOCK" "$1" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
reply = json.loads(s.makefile().readline())
if not reply.get("ok"):
    sys.exit("control: %s" % reply)
print(json.dumps(reply["result"]))
EOF
}

# Iterations the agent counted for the run whose key contains $1 (0 when it has none).
run_iterations() {
  control '{"cmd":"runs","all":true,"limit":1000}' | python3 -c '
import json, sys
runs = [r for r in json.load(sys.stdin)["runs"] if sys.argv[1] in r["key"]]
print(max([r["iterations"] for r in runs] or [0]))' "$1"
}

wait_for_run() {
  local key=$1 want=$2 deadline=$((SECONDS + 120)) n=0
  while :; do
    n=$(run_iterations "$key")
    [ "$n" -ge "$want" ] && break
    kill -0 "$daemon_pid" 2>/dev/null || fail "seqpointd died while waiting for run $key"
    [ "$SECONDS" -lt "$deadline" ] || fail "run $key: $n iterations after 120 s (want $want)"
    sleep 1
  done
  log "run $key: $n iterations seen by the agent"
}

# --- 3/4. run the agent against the jobs -----------------------------------------------------
runs=()
# In the state directory: the unit's PrivateTmp= hides /tmp from the agent; purge removes it.
replay_trace=/var/lib/seqpoint/pkgtest-replay.csv
if [ "$mode" = live ]; then
  start_agent
  start_job pkgtest-py /usr/bin/python3 "$jobdir/job.py"
  if [ "$have_cpp_job" = 1 ]; then start_job pkgtest-cpp "$jobdir/job"; fi
  if [ -x "${SEQPOINT_TRAIN:-}" ]; then
    # The real trainer, run by root from the build tree (another uid than the agent's too).
    SEQPOINT_RUN_ID=pkgtest-train OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
      "$SEQPOINT_TRAIN" --corpus "$src/examples/data/ende_fillets.tsv.xz" --iterations 100000 \
      --threads 1 --hidden 32 --log-every 1000 > "$work/job-train.log" 2>&1 &
    pids+=($!)
    runs+=(pkgtest-train)
  fi
  for r in "${runs[@]}"; do wait_for_run "$r" 20; done
else
  python3 -c '
print("seq_len,time_ns")
for i in range(3000):
    sl = 16 + (i * 37) % 240
    print("%d,%d" % (sl, sl * 1000 + 50000))' > "$replay_trace"
  start_agent --replay "$replay_trace@pkgtest-replay"
  runs+=(pkgtest-replay)
  wait_for_run pkgtest-replay 1000
fi

if "$SEQPOINT_CLI" --help | grep -q '^  status '; then
  "$SEQPOINT_CLI" status > "$work/status.txt" 2>&1 || { cat "$work/status.txt"; fail "seqpoint status"; }
  log "seqpoint status: OK ($(wc -l < "$work/status.txt") lines)"
else
  control '{"cmd":"status"}' > "$work/status.txt" || fail "status over the control socket"
  log "note: this seqpoint has no 'status' command; asked the socket directly: OK"
fi
metrics=$(curl -fsS "http://127.0.0.1:$port/metrics") || fail "GET /metrics"
grep -q '^seqpoint' <<<"$metrics" || fail "/metrics has no seqpoint series"
log "/metrics: $(grep -c '^seqpoint' <<<"$metrics") seqpoint samples"
# What the agent cost while the jobs ran (reported, not asserted: timing is for bench/).
metric() { awk -v m="$1" '$1 == m { print $2 }' <<<"$metrics"; }
log "cost: agent RSS $(metric seqpoint_agent_resident_memory_bytes) B" \
    "(peak $(awk '/^VmHWM/ {print $2 " " $3}' "/proc/$daemon_pid/status"))," \
    "CPU $(metric seqpoint_agent_cpu_seconds_total) s in $((SECONDS - agent_started)) s since start;" \
    "installed size $(dpkg-query -W -f='${Installed-Size}' "$PKG") KiB"
stop_agent
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
[ -s /var/lib/seqpoint/state.db ] || fail "no state database after a run"

# --- 5. upgrade: conffile edit and state survive ---------------------------------------------
# The edits: a log level, and the README's recipe for operators without root (control.group).
grep -q '^# log_level = ' "$CONF" && grep -q '^# group = ' "$CONF" || fail "keys missing in $CONF"
sed -i 's/^# log_level = .*/log_level = "debug"/; s/^# group = .*/group = "seqpoint"/' "$CONF"
dpkg -i --force-confold "$deb2" > "$work/dpkg-i2.log" 2>&1 || { cat "$work/dpkg-i2.log"; fail "upgrade"; }
[ "$(installed_version)" = "installed $version~pkgtest2" ] || fail "after upgrade: $(installed_version)"
grep -qx 'log_level = "debug"' "$CONF" && grep -qx 'group = "seqpoint"' "$CONF" ||
  fail "the upgrade lost the conffile edits"
[ ! -e "$CONF.dpkg-dist" ] && [ ! -e "$CONF.dpkg-old" ] || fail "the upgrade left $CONF.dpkg-*"
[ -s /var/lib/seqpoint/state.db ] || fail "the upgrade lost the state database"
if [ "$mode" = live ]; then start_agent; else start_agent --replay "$replay_trace@pkgtest-replay"; fi
for r in "${runs[@]}"; do
  [ "$(run_iterations "$r")" -gt 0 ] || fail "after the upgrade the agent has forgotten run $r"
done
log "upgrade to $version~pkgtest2: conffile edits kept, runs ${runs[*]} still known"
# control.group = "seqpoint": a member may query the agent, a non-member may not.
as_user() { setpriv --reuid=nobody --regid=nogroup "$@" /usr/bin/seqpoint status; }
as_user --groups="$(getent group seqpoint | cut -d: -f3)" > "$work/member.txt" 2>&1 ||
  fail "a member of group seqpoint cannot run seqpoint status: $(cat "$work/member.txt")"
if as_user --clear-groups > "$work/other.txt" 2>&1; then
  fail "a user outside group seqpoint could query the agent"
fi
log "control.group = seqpoint: a member may query the agent, others are refused" \
    "($(head -c 100 "$work/other.txt"))"
stop_agent

# --- 6. remove, purge, nothing left ----------------------------------------------------------
python_cache=/usr/lib/python3/dist-packages/seqpoint_probe/__pycache__
(cd / && /usr/bin/python3 -c 'import seqpoint_probe')  # as root: leaves byte code behind
dpkg -r "$PKG" > "$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg -r"; }
[ ! -e /usr/sbin/seqpointd ] || fail "dpkg -r left /usr/sbin/seqpointd"
[ ! -e "$python_cache" ] || fail "dpkg -r left $python_cache"
[ -f "$CONF" ] && [ -d /var/lib/seqpoint ] || fail "dpkg -r must keep the config and the state"
dpkg -P "$PKG" > "$work/dpkg-P.log" 2>&1 || { cat "$work/dpkg-P.log"; fail "dpkg -P"; }
if grep -i 'warning' "$work/dpkg-P.log" "$work/dpkg-r.log"; then fail "dpkg warned (above)"; fi
case "$(installed_version)" in "" | not-installed*) ;; *) fail "still known: $(installed_version)" ;; esac
left=$(dpkg -L "$PKG" 2>/dev/null || true)
[ -z "$left" ] || fail "dpkg -L still lists files: $left"
leftovers=()
while read -r f; do [ -e "$f" ] && leftovers+=("$f"); done < "$work/created"
for f in /etc/seqpoint /var/lib/seqpoint /run/seqpoint /sys/fs/bpf/seqpoint \
         /etc/systemd/system/seqpointd.service \
         /etc/systemd/system/multi-user.target.wants/seqpointd.service \
         /var/lib/systemd/deb-systemd-helper-enabled/seqpointd.service.dsh-also \
         /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/seqpointd.service \
         /var/lib/systemd/deb-systemd-helper-masked/seqpointd.service; do
  [ -e "$f" ] || [ -L "$f" ] && leftovers+=("$f")
done
[ "${#leftovers[@]}" = 0 ] || fail "purge left: ${leftovers[*]}"
log "remove kept config and state; purge left nothing ($(wc -l < "$work/created") paths checked)"
log "PASS"
