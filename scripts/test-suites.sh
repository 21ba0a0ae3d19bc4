#!/usr/bin/env bash
# Runs Roam's test suites (`make test`): one test command, through scripts/test.sh (which lists
# and, under ROAM_STRICT_SKIPS, fails on skips). Where the netem backend's checks need a VM (run
# as root on a kernel without sch_netem, with scripts/vm.sh's VM installed), its one boot
# (scripts/vm-checks.sh: netem-check.sh and wifi-check.sh, about 8 minutes) goes on in the
# background from the start, and beside it run the suites that wait on scenario clocks with the
# CPU mostly idle (CLOCK_BOUND below, measured at 1-25% of this machine's two cores; the VM takes
# 50-90%); then every other suite, which reads the VM's results from ROAM_VM_CHECKS. Every test
# runs once: the second command skips exactly what the first ran. Elsewhere it is the one command.
#
# ROAM_BUILD_BESIDE_TESTS, when set, is a command (CI's `make prebuild`) run beside the suites
# (and beside ROAM_AFTER_SUITES, make test's rootless checks, which follow them)
# in the idle scheduling class (SCHED_IDLE, chrt --idle: it gets only the CPU they leave; `nice`
# does not hold for a Swift build, whose threads set their own nice values), and waited for at
# the end. Never beside the VM: QEMU's emulated CPUs ran its programs about three times slower
# beside idle-class builds (measured: the netem checks took 755 s instead of 570, and a
# fixture's timed part started 6 s late), so with a VM it starts with every other suite, once
# the VM is done. Its failure is shown, not counted: the step that needs what it builds builds
# it again and fails there. Each phase's time is printed after it.
#
#   scripts/test-suites.sh ROAM TEST-COMMAND...
#   e.g. .build/debug/roam .build/debug/roamPackageTests.xctest --testing-library swift-testing --no-parallel
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/test-suites.sh ROAM TEST-COMMAND..." >&2; exit 2; }
roam=$1; shift
cd "$(dirname "$0")/.."
began=$SECONDS
took() { echo "== $1 took $((SECONDS - began)) s"; began=$SECONDS; }

# Suites (and tests) that spend their time waiting on a scenario's clock (Swift Testing's
# regular expressions over test identifiers). Not the crowd of thirty phones: it keeps both
# cores busy for half a minute.
# The VM's checks outlast them (by 110 to 140 s), so single tests of other suites that play a
# scenario's clock are here too (about 150 s of them, measured in CI's make test).
CLOCK_BOUND='NetworkScenarioTests/(?!thirtyWandering)|UserspaceBackendTests/(bundledScenarioRuns|aRadioLeftIdlePaysThePromotionBeforeEveryRequest|theSameSeedMakesTheSameDecisions)|IPv6ScenarioTests|HandoverTests|BlackholedWiFiTests|CommandMultipathTests|PathEventTests|SoakTests|RecordCommandTests|RecordModemTests|RecordPositionTests'
CLOCK_BOUND+='|ImportIRTTCommandTests/aRecordingImportedReplaysWhatWasRecorded|ImportRecordingCommandTests/aHandoverClientMovesWhereTheRecordedWiFiCollapsed'
CLOCK_BOUND+='|DaemonCgroupPolicyTests/theDaemonIsThePhonesPathManagerInARun|UserspacePathManagerTests/autoUsesTheUserspacePathManagerExactlyWhereTheKernelCan'
CLOCK_BOUND+='|ReportCommandTests/twoRealRunsComparedSideBySide'

needs_vm() {
  [ "$(id -u)" = 0 ] || return 1
  # This kernel's netem, tried in a network namespace of a throwaway process.
  unshare --net tc qdisc add dev lo root netem delay 1ms 2>/dev/null && return 1
  find /boot -maxdepth 1 -name 'vmlinuz-*' 2>/dev/null | grep -q . || return 1
  command -v vng >/dev/null || [ -x "${ROAM_VNG_VENV:-$HOME/.cache/roam/vng}/bin/vng" ]
}
has_wifi_tools() {
  local tool
  for tool in /usr/sbin/hostapd /usr/sbin/wpa_supplicant /usr/sbin/iw; do [ -x "$tool" ] || return 1; done
  find /lib/modules/*/kernel/drivers/net/wireless -name 'mac80211_hwsim.ko*' 2>/dev/null | grep -q .
}

checks=$(mktemp -d /tmp/roam-vm-checks-XXXXXX)
vm=
beside=
cleanup() {
  [ -z "$vm" ] || kill -- "-$vm" 2>/dev/null || true
  [ -z "$beside" ] || kill -- "-$beside" 2>/dev/null || true
  rm -rf "$checks"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# Starts ROAM_BUILD_BESIDE_TESTS, if set.
start_beside() {
  [ -n "${ROAM_BUILD_BESIDE_TESTS:-}" ] || return 0
  echo "== beside the suites, in the idle class: $ROAM_BUILD_BESIDE_TESTS"
  # Its own process group (set -m), so that an interrupted `make test` stops it too.
  set -m
  beside_started=$SECONDS
  ( chrt --idle 0 bash -c "$ROAM_BUILD_BESIDE_TESTS" > "$checks/beside.log" 2>&1
    echo $? > "$checks/beside-status"
    echo "$SECONDS" > "$checks/beside-ended" ) &
  beside=$!
  set +m
}
# What went on beside the suites: waited for, its failure shown.
wait_beside() {
  [ -n "$beside" ] || return 0
  local waited=$SECONDS
  wait "$beside"
  beside=
  local status
  status=$(cat "$checks/beside-status" 2>/dev/null || echo '(no status)')
  local ended
  ended=$(cat "$checks/beside-ended" 2>/dev/null || echo "$SECONDS")
  echo "== the build beside the suites exited $status after $((ended - beside_started)) s ($((SECONDS - waited)) s waited for it after the suites)"
  [ "$status" = 0 ] || tail -n 40 "$checks/beside.log"
}

# ROAM_AFTER_SUITES (make test's rootless checks): run after the suites, while the build beside
# them (if any) goes on, before it is waited for. Its failure fails the run.
after_suites() {
  [ -n "${ROAM_AFTER_SUITES:-}" ] || return 0
  bash -c "$ROAM_AFTER_SUITES"
  local status=$?
  took "what follows the suites ($ROAM_AFTER_SUITES)"
  return "$status"
}

if ! needs_vm; then
  start_beside
  scripts/test.sh "$@"
  status=$?
  took "the suites"
  after_suites || status=1
  wait_beside
  exit "$status"
fi
wifi=(); has_wifi_tools && wifi=(--wifi)
echo "== the VM's checks (scripts/vm-checks.sh) in the background; beside them, the suites that wait on scenario clocks"
# Its own process group (set -m), so that an interrupted `make test` stops QEMU too.
set -m
( timeout --kill-after=30 1800 scripts/vm-checks.sh "$roam" "$checks" "${wifi[@]}" > "$checks/vm.log" 2>&1
  echo $? > "$checks/vm-status" ) &
vm=$!
set +m
scripts/test.sh "$@" --filter "$CLOCK_BOUND"
first=$?
took "the suites that wait on clocks"
wait "$vm"
vm=
took "the VM's checks, after those suites,"
echo "== the VM's checks exited $(cat "$checks/vm-status" 2>/dev/null || echo '(no status)'); what the guest printed:"
cat "$checks/vm.log"
echo "== every other suite"
start_beside
ROAM_VM_CHECKS=$checks scripts/test.sh "$@" --skip "$CLOCK_BOUND"
second=$?
took "every other suite"
after_suites
third=$?
wait_beside
[ "$first" = 0 ] && [ "$second" = 0 ] && [ "$third" = 0 ]
