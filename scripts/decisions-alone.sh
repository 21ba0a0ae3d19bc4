#!/usr/bin/env bash
# RoamDecisions builds alone: RoamCore and RoamDecisions compiled by swiftc in Swift 6 mode,
# warnings as errors, with no search path but the directory they are built in — no libnl, no C
# module of Roam's, no package of anyone else's. (make docs; scripts/module-graph.py
# --check-pure checks the same from Package.swift and the imports.)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d "${TMPDIR:-/tmp}/roam-decisions-alone-XXXXXX")
trap 'rm -rf "$out"' EXIT
build() {
  local module=$1
  shift
  swiftc -swift-version 6 -warnings-as-errors -parse-as-library -package-name roam -module-name "$module" \
    -emit-module -emit-module-path "$out/$module.swiftmodule" -emit-library -static -o "$out/lib$module.a" \
    -I "$out" "$@" $(find "Sources/$module" -name '*.swift' | sort)
}
build RoamCore
build RoamDecisions
echo "decisions-alone: RoamDecisions built with RoamCore alone ($(find Sources/RoamDecisions -name '*.swift' | xargs cat | wc -l) lines)"
