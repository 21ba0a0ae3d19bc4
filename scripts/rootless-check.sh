#!/usr/bin/env bash
# The rootless suite: Roam as an unprivileged user (`nobody` unless ROAM_ROOTLESS_USER names
# another), with no capability on the host. Run as root, which only switches to that user
# (setpriv) and checks the host afterwards. What it runs:
#   - `roam run` of bundled scenarios on the userspace backend; the report belongs to the user;
#   - `roam exec` into a node of a rootless run in progress, from another process: `ip addr`
#     and `roam monitor` inside the node; a run that does not exist is refused;
#   - `roam cleanup` without root;
#   - the RoamTesting, path monitor and userspace backend test suites, from the built test
#     binary, which enters a user namespace of its own before main;
#   - the host's network namespace, mounts and /run/netns unchanged.
#
#   scripts/rootless-check.sh ROAM_BINARY TEST_BINARY
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: scripts/rootless-check.sh ROAM_BINARY TEST_BINARY" >&2; exit 2; }
roam=$(realpath "$1"); tests=$(realpath "$2")
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/rootless-user.sh
fail() { echo "rootless-check: FAIL: $*" >&2; exit 1; }
host_state() { ip -br link; ip -br addr; ip route; ip -6 route; ip rule; tc qdisc; ls /run/netns 2>/dev/null || true; }
before=$(host_state); mounts_before=$(wc -l < /proc/self/mountinfo)

echo "== rootless: roam run as $user (uid $uid) on the userspace backend"
for scenario in walk-out-of-home blackholed-wifi; do
  status=0
  as_user "$roam" run "$root/scenarios/$scenario.yaml" --backend userspace --time-scale 0.25 --quiet --report "$work/$scenario" \
    > "$work/$scenario.out" 2>&1 || status=$?
  [ "$status" = 0 ] || { cat "$work/$scenario.out"; fail "roam run $scenario exited $status"; }
  [ "$(stat -c %u "$work/$scenario/summary.json")" = "$uid" ] || fail "$scenario's report is not $user's"
  grep -q '"backend":"userspace"' "$work/$scenario/summary.json" || fail "$scenario did not run on the userspace backend"
  echo "   $scenario: passed, report owned by $user"
done

echo "== rootless: networks as $user (nftables NAT44, tayga NAT64, unbound with DNS64, curl by name)"
status=0
as_user "$roam" run "$root/scenarios/coffee-shop-to-lte.yaml" --backend userspace --quiet --report "$work/coffee-shop" \
  > "$work/coffee-shop.out" 2>&1 || status=$?
[ "$status" = 0 ] || { cat "$work/coffee-shop.out"; cat "$work/coffee-shop/browse.stdout" 2>/dev/null; fail "roam run coffee-shop-to-lte exited $status"; }
grep -q "through NAT64: [1-9]" "$work/coffee-shop/browse.stdout" || fail "curl did not reach the server through NAT64: $(tail -3 "$work/coffee-shop/browse.stdout")"
! pgrep -u "$uid" -x unbound >/dev/null && ! pgrep -u "$uid" -x tayga >/dev/null || fail "a network's program outlived the run"
echo "   coffee-shop-to-lte: passed; $(tail -1 "$work/coffee-shop/browse.stdout")"

echo "== rootless: roam exec into a run in progress"
as_user "$roam" run "$root/scenarios/walk-out-of-home.yaml" --backend userspace --report "$work/exec-run" > "$work/exec-run.out" 2>&1 &
runner=$!
registry="/tmp/roam-$uid/runs"   # as_user clears XDG_RUNTIME_DIR
run=
for _ in $(seq 1 300); do
  # This run's id, from its own output (another run of the user's may be noted too).
  run=$(grep -ao "run [0-9a-f]\{6\}" "$work/exec-run.out" | head -1 | cut -d' ' -f2 || true)
  [ -n "$run" ] && [ -e "$registry/$run" ] && break
  kill -0 "$runner" 2>/dev/null || { cat "$work/exec-run.out"; fail "the run ended before it registered"; }
  sleep 0.1
done
[ -n "${run:-}" ] || fail "no run registered in $registry within 30 s"
addresses=$(as_user "$roam" exec "$run" phone -- ip -br addr) || fail "roam exec $run phone -- ip -br addr failed"
grep -q '^wifi .*198\.18\.0\.1/24' <<< "$addresses" || fail "the phone's addresses seen through roam exec: $addresses"
echo "   roam exec $run phone -- ip -br addr: wifi has 198.18.0.1/24"
path=$(as_user timeout -s INT 3 "$roam" exec "$run" phone -- "$roam" monitor --json | head -1 || true)
grep -q '"status":"satisfied"' <<< "$path" || fail "roam monitor inside the phone printed: $path"
echo "   roam exec $run phone -- roam monitor --json: $(cut -c1-100 <<< "$path")..."
path=$(as_user timeout -s INT 3 "$roam" monitor --json --netns "roam-$run-server" | head -1 || true)
grep -q '"status":"satisfied"' <<< "$path" || fail "roam monitor --netns roam-$run-server printed: $path"
echo "   roam monitor --netns roam-$run-server --json: satisfied"
status=0; as_user "$roam" exec 000000 phone -- true 2> "$work/exec-missing.err" || status=$?
[ "$status" = 2 ] && grep -q "no run 000000" "$work/exec-missing.err" || fail "exec into a missing run: exit $status, $(cat "$work/exec-missing.err")"
status=0; as_user "$roam" exec "$run" nosuchnode -- true 2> "$work/exec-node.err" || status=$?
[ "$status" = 2 ] && grep -q "has no node 'nosuchnode'; its nodes: phone, server" "$work/exec-node.err" \
  || fail "exec into a missing node: exit $status, $(cat "$work/exec-node.err")"
echo "   a missing run and a missing node are refused (exit 2)"
# roam itself ($runner is the shell that switched user), from its note, checked as roam checks one:
# a regular file of the user's, holding PID STARTTIME of a live process of the user's. A planted
# `-1` or `0` would otherwise make this `kill -INT -1` as root.
note_pid() {
  local note=$1 pid start
  [ -f "$note" ] && [ ! -L "$note" ] && [ "$(stat -c %u "$note")" = "$uid" ] || return 1
  read -r pid start < "$note" || return 1
  [[ "$pid" =~ ^[1-9][0-9]*$ && "$start" =~ ^[0-9]+$ ]] || return 1
  [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f20)" = "$start" ] || return 1
  [ "$(awk '/^Uid:/ {print $2}' "/proc/$pid/status" 2>/dev/null)" = "$uid" ] || return 1
  echo "$pid"
}
pid=$(note_pid "$registry/$run") || fail "the note $registry/$run does not name a live process of $user's: $(head -c 64 "$registry/$run" | od -c | head -2)"
kill -INT "$pid"
status=0; wait "$runner" || status=$?
[ "$status" = 130 ] || { cat "$work/exec-run.out"; fail "the interrupted run exited $status"; }
[ ! -e "$registry/$run" ] || fail "the run's note $registry/$run outlived it"
as_user "$roam" cleanup | grep -q "nothing to clean up" || fail "roam cleanup without root"

if [ "$(id -u)" = 0 ]; then
  echo "== roam exec into a run started as root"
  "$roam" run "$root/scenarios/walk-out-of-home.yaml" --backend userspace --report "$work/root-run" > "$work/root-run.out" 2>&1 &
  runner=$!
  run=
  for _ in $(seq 1 300); do
    run=$(grep -ao "run [0-9a-f]\{6\}" "$work/root-run.out" | head -1 | cut -d' ' -f2 || true)
    [ -n "$run" ] && [ -e "/run/netns/roam-$run-phone" ] && break
    kill -0 "$runner" 2>/dev/null || { cat "$work/root-run.out"; fail "the root run ended before it started"; }
    sleep 0.1
  done
  [ -n "$run" ] || fail "the root run printed no run id within 30 s"
  # The node's namespace exists before its links and addresses are made: wait for wifi's address
  # (what the run builds next), at most 30 s.
  entered=
  for _ in $(seq 1 300); do
    if "$roam" exec "$run" phone -- ip -br addr 2>/dev/null | grep -q '^wifi .*198\.18\.0\.1/24'; then entered=1; break; fi
    kill -0 "$runner" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$entered" ] || fail "roam exec into root run $run: wifi never had 198.18.0.1/24 ($("$roam" exec "$run" phone -- ip -br addr 2>&1 | tr '\n' ' '))"
  status=0; as_user "$roam" exec "$run" phone -- true 2> "$work/exec-root.err" || status=$?
  [ "$status" = 2 ] && grep -q "only root enters it" "$work/exec-root.err" || fail "$user entering a root run: exit $status, $(cat "$work/exec-root.err")"
  kill -INT "$runner"; wait "$runner" || true
  echo "   root enters it; $user is refused (exit 2)"
fi

echo "== rootless: test suites as $user (the test binary enters a user namespace of its own)"
# Swift Testing's filter takes a regular expression over test identifiers. One monitor test is
# left out: it writes /etc/netns/NAME/resolv.conf, as `ip netns` would, which only root can. So
# are the emulator's two longest tests (every bundled scenario, and the same seed twice: 100 s),
# which test nothing a user namespace changes: the scenarios played above and RoamTesting's
# suite already run the emulator as this user.
status=0
as_user "$tests" --testing-library swift-testing --no-parallel --filter 'RoamTestingTests|MonitorKernelTests|UserspaceBackendTests' \
  --skip 'followsTheNamespacesResolverFile|bundledScenarioRuns|theSameSeedMakesTheSameDecisions' \
  > "$work/suites.out" 2>&1 || status=$?
grep -aE "✘|skipped|Test run with" "$work/suites.out" | sed 's/^/   /' | tail -20
[ "$status" = 0 ] || fail "the test suites failed as $user"
! grep -aq "skipped" "$work/suites.out" || fail "tests were skipped as $user"
grep -aqE "Test run with [1-9][0-9]* tests? .* passed" "$work/suites.out" || fail "no test ran as $user"

after=$(host_state); mounts_after=$(wc -l < /proc/self/mountinfo)
[ "$before" = "$after" ] || { diff <(echo "$before") <(echo "$after") >&2 || true; fail "the host's network changed"; }
[ "$mounts_before" = "$mounts_after" ] || fail "the host's mounts changed ($mounts_before -> $mounts_after lines)"
echo "== rootless: all passed; the host's network and mounts are as they were"
