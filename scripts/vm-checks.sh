#!/usr/bin/env bash
# One boot of scripts/vm.sh (Debian's kernel, with sch_netem and mac80211_hwsim) for every check
# that needs that kernel: scripts/netem-check.sh into OUT/netem and, with --wifi,
# scripts/wifi-check.sh into OUT/wifi (its status in OUT/wifi/exit). Exits with netem-check's
# status. What the guest printed goes to this script's output.
#
# OUT must be a directory the caller made for this (mkdtemp, `mktemp -d`: the checks empty and
# remake the paths under it, so it must not be a name another user could make first) under /tmp,
# the guest's writable share. Tests/RoamCLITests/NetemBackendTests.swift (NetemHost) runs this
# when a suite first needs it; scripts/test-suites.sh runs it before the tests, beside the suites
# that wait on scenario clocks, and hands OUT to the tests in ROAM_VM_CHECKS.
#
#   scripts/vm-checks.sh ROAM OUT [--wifi]
set -uo pipefail
usage() { echo "usage: scripts/vm-checks.sh ROAM OUT [--wifi]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
roam=$1 out=$2 wifi=
[ $# -lt 3 ] || { [ "$3" = --wifi ] || usage; wifi=1; }
root=$(cd "$(dirname "$0")/.." && pwd)
case "$out" in /tmp/*) ;; *) echo "scripts/vm-checks.sh: $out is not under /tmp, the VM's writable share" >&2; exit 2 ;; esac
[ -d "$out" ] && [ ! -L "$out" ] && [ "$(stat -c %u "$out")" = "$(id -u)" ] \
  || { echo "scripts/vm-checks.sh: $out is not a directory of this user's (make it with mktemp -d)" >&2; exit 2; }

quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
# In the guest: netem's check, then Wi-Fi's, each one's status kept; the netem check's is the VM's.
script="$(quote "$root/scripts/netem-check.sh") $(quote "$roam") $(quote "$out/netem"); status=\$?"
if [ -n "$wifi" ]; then
  script+="; $(quote "$root/scripts/wifi-check.sh") $(quote "$roam") $(quote "$out/wifi"); echo \$? > $(quote "$out/wifi/exit")"
fi
script+="; exit \$status"
exec "$root/scripts/vm.sh" --rwdir /tmp -- bash -c "$script"
