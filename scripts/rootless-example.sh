#!/usr/bin/env bash
# The example package's tests (Swift Testing and XCTest) as an unprivileged user: the test
# binary enters a user namespace of its own before main (RoamTesting), so its scenarios run
# without root. Fails if a test fails or is skipped, or if nothing ran.
#
#   scripts/rootless-example.sh TEST_BINARY
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/rootless-example.sh TEST_BINARY" >&2; exit 2; }
tests=$(realpath "$1")
cd "$(dirname "$0")/.."
. scripts/rootless-user.sh
fail() { echo "rootless-example: FAIL: $*" >&2; exit 1; }
# The tests read scenarios/ relative to the package; reports go to $TMPDIR, as the package's
# .build is not the user's.
export AS_USER_DIRECTORY="$(pwd)/Examples/SpottyWiFi"
for library in swift-testing xctest; do
  echo "== rootless example ($library) as $user"
  status=0
  if [ "$library" = xctest ]; then
    as_user "$tests" > "$work/$library.out" 2>&1 || status=$?
  else
    as_user "$tests" --testing-library swift-testing --no-parallel > "$work/$library.out" 2>&1 || status=$?
  fi
  grep -aE "✘|✔ Test run|skipped|Executed [0-9]+ tests?" "$work/$library.out" | awk '!seen[$0]++' | sed 's/^/   /' | tail -8
  [ "$status" = 0 ] || fail "the example's $library tests failed as $user"
  ! grep -aqE "skipped" "$work/$library.out" || fail "$library tests were skipped as $user"
  if [ "$library" = xctest ]; then
    grep -aqE "Executed [1-9][0-9]* tests?, with 0 failures" "$work/$library.out" || fail "no XCTest ran as $user"
  else
    grep -aqE "Test run with [1-9][0-9]* tests? .* passed" "$work/$library.out" || fail "no Swift Testing test ran as $user"
  fi
done
