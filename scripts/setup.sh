#!/usr/bin/env bash
# Installs what Roam needs to build, test and run on Debian 12, and nothing that is there already.
# Idempotent and quick when everything is present: one dpkg-query, no apt-get.
set -euo pipefail

packages=(
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev  # the CNetlink system library
  pkg-config                                      # how SwiftPM finds libnl
  iproute2                                        # ip netns (users), ip monitor (benchmark), demo
  util-linux                                      # setpriv (tests drop privileges with it)
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "roam setup: missing Debian packages: ${missing[*]}" >&2
    echo "roam setup: run as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 2
  fi
  echo "roam setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
  echo "roam setup: no Swift toolchain on PATH; Roam needs Swift 6.0 or later (swift.org/install)" >&2
  exit 2
fi
