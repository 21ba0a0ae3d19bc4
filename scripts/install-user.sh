#!/bin/bash
# The roam user of `make install` (systemd/roam.sysusers): systemd-sysusers where there is one,
# useradd otherwise; nothing when staging into DESTDIR (the package's own scripts make it) or
# when the user exists. Idempotent.
set -euo pipefail
destdir=$1 sysusers=$2
if [[ -n $destdir ]]; then
  echo "install-user: staged into $destdir: create the roam user on the target (systemd-sysusers)"
  exit 0
fi
if getent passwd roam > /dev/null; then exit 0; fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-user: run as root to create the roam user (or: sudo systemd-sysusers $sysusers)" >&2
  exit 2
fi
if command -v systemd-sysusers > /dev/null && [[ -d /run/systemd/system ]]; then
  systemd-sysusers "$sysusers"
else
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --comment "Roam path service" roam
fi
