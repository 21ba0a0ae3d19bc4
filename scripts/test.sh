#!/usr/bin/env bash
# Runs a test command (`swift test ...`) and makes its skips visible: every test or suite that
# did not run is listed with the reason its gate gave (no root, no TUN, no MPTCP, no VM, ...).
# With ROAM_STRICT_SKIPS=1 (.ci/run sets it: CI runs on a machine that has everything), a skip
# fails the run, so that a host without, say, MPTCP cannot pass with the multipath suites
# quietly skipped.
#
#   scripts/test.sh swift test --skip-build --no-parallel
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/test.sh COMMAND [ARGUMENTS...]" >&2; exit 2; }

log=$(mktemp "${TMPDIR:-/tmp}/roam-test-XXXXXX")
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# Swift Testing: `➜ Test name() skipped: "reason"`; XCTest: `Test Case '...' skipped`.
skipped=$(grep -aE "^➜ (Test|Suite) .* skipped|^Test Case '.*' skipped" "$log" | sed 's/^➜ //')
if [ -z "$skipped" ]; then
  echo "== nothing skipped"
else
  echo "== $(printf '%s\n' "$skipped" | wc -l) skipped (this machine lacks what they need):"
  printf '%s\n' "$skipped" | sed 's/^/   /'
  if [ "${ROAM_STRICT_SKIPS:-0}" = 1 ]; then
    echo "== ROAM_STRICT_SKIPS=1: a skipped test counts as a failure here (give the machine what the" >&2
    echo "   reasons above name, or run without ROAM_STRICT_SKIPS where it cannot have it)" >&2
    [ "$status" -eq 0 ] && status=1
  fi
fi
exit "$status"
