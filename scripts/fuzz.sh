#!/usr/bin/env bash
# Runs each of Roam's fuzz targets (Fuzz/) for a set time with libFuzzer, from the committed
# seed corpus, and fails on any crash, hang or memory blow-up. The corpus it grows stays
# in Fuzz/.build (not committed); a crash is left as Fuzz/.build/crashes/TARGET-crash-*, to be
# minimised (-minimize_crash=1) and committed to Fuzz/Regressions/TARGET with its fix.
#
#   [FUZZ_JOBS=N] scripts/fuzz.sh SECONDS [TARGET...]     TARGET: scenario trace interfaces json report export import irtt gnettrack lumos5g mptraces recording compare diagnostics probe live segment mobility control proxy daemon
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(scenario trace interfaces json report export import irtt gnettrack lumos5g mptraces recording compare diagnostics probe live segment mobility control proxy daemon)
case "$seconds" in ''|*[!0-9]*) echo "usage: scripts/fuzz.sh SECONDS [TARGET...]" >&2; exit 2 ;; esac

# SwiftPM does not plan the build again when a source file is added to Roam, a dependency of the
# fuzz package by path: the stale plan then fails to find the new file's types. Without its plan
# it makes a new one (a few seconds) and still rebuilds only what changed.
rm -f Fuzz/.build/debug.yaml
swift build --package-path Fuzz -c debug -Xswiftc -sanitize=fuzzer,address >&2
bin="$(swift build --package-path Fuzz -c debug -Xswiftc -sanitize=fuzzer,address --show-bin-path)"
mkdir -p Fuzz/.build/crashes
# Targets run FUZZ_JOBS at a time (one a core by default): each is one libFuzzer process, bound
# by the CPU, with a corpus, a log and a summary of its own; the summaries are printed in the
# targets' order once all have run.
jobs="${FUZZ_JOBS:-$(nproc)}"
case "$jobs" in ''|*[!0-9]*|0) echo "scripts/fuzz.sh: FUZZ_JOBS must be a whole number of jobs, 1 or more" >&2; exit 2 ;; esac
fuzz_one() {
  local name=$1 grown="Fuzz/.build/corpus/$1" seeds=() directory runs cov
  mkdir -p "$grown"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a blow-up; both are failures.
  for directory in "Fuzz/Corpus/$name" "Fuzz/Regressions/$name"; do [ -d "$directory" ] && seeds+=("$directory"); done
  if ! ROAM_FUZZ_TARGET="$name" "$bin/RoamFuzz" "$grown" "${seeds[@]}" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 \
      -artifact_prefix="Fuzz/.build/crashes/$name-" 2> "Fuzz/.build/$name.log"; then
    { echo "fuzz: $name FAILED; the input is in Fuzz/.build/crashes/, the log in Fuzz/.build/$name.log"
      tail -n 40 "Fuzz/.build/$name.log"; } > "Fuzz/.build/$name.summary"
    return 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "Fuzz/.build/$name.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "Fuzz/.build/$name.log" | tail -n 1 || true)
  echo "fuzz: $name ok: $runs inputs in ${seconds}s, $cov, corpus $(ls "$grown" | wc -l) files" > "Fuzz/.build/$name.summary"
}
echo "fuzz: ${targets[*]} for ${seconds}s each, $jobs at a time" >&2
running=0
status=0
for target in "${targets[@]}"; do
  rm -f "Fuzz/.build/$target.summary"
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
for target in "${targets[@]}"; do cat "Fuzz/.build/$target.summary" >&2 2>/dev/null || { echo "fuzz: $target left no summary" >&2; status=1; }; done
exit $status
