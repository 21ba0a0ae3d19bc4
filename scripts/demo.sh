#!/usr/bin/env bash
# The main job: plays the bundled walk-out-of-home scenario end to end with `roam run` (a phone
# streams video over Wi-Fi, walks out of range, cellular takes over) and prints its report.
# `--backend auto` uses the kernel's netem where it has it and Roam's userspace link emulator
# otherwise. With --vm, the run happens in a VM booted with Debian's kernel, whose netem it uses
# (scripts/vm.sh; about 30 s more).
#
#   scripts/demo.sh ROAM [--vm] [SCENARIO] [ROAM RUN OPTIONS...]
#
# Exit 0 when the run completed, whether or not its expectations held (the table says which);
# the run's own status otherwise (2: bad input or environment, 130/143: interrupted).
set -uo pipefail

roam=${1:?usage: demo.sh PATH-TO-ROAM [--vm] [SCENARIO] [OPTIONS...]}
shift
vm=0
if [ "${1:-}" = "--vm" ]; then vm=1; shift; fi
scenario=${1:-scenarios/walk-out-of-home.yaml}
[ $# -gt 0 ] && shift
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: roam run needs root to create network namespaces (try: sudo make demo)" >&2
  exit 2
fi
mkdir -p roam-reports
report="roam-reports/$(basename "$scenario" .yaml)-$(date -u +%Y%m%dT%H%M%SZ)"
command=("$roam" run "$scenario" --report "$report" "$@")

if [ "$vm" = 1 ]; then
  echo "== roam run $scenario --backend netem, in a VM with Debian's kernel (boot takes about 30 s)"
  scripts/vm.sh --rwdir "$PWD/roam-reports" -- "${command[@]}" --backend netem
  status=$?
else
  echo "== roam run $scenario"
  "${command[@]}"
  status=$?
fi
case $status in
  0) echo "== every expectation held; report in $report" ;;
  1) echo "== the run completed and an expectation failed (see the table); report in $report" ;;
  *) echo "== roam run exited $status" >&2; exit "$status" ;;
esac
exit 0
