#!/usr/bin/env bash
# Runs a command as root in a virtual machine whose kernel has sch_netem: Debian's distribution
# kernel (linux-image-amd64) booted with virtme-ng under QEMU, over the host's filesystem
# (read-only, except the directories named with --rwdir). For machines whose own kernel lacks
# netem; scripts/setup.sh --vm installs what it needs.
#
#   scripts/vm.sh [--rwdir DIR]... -- COMMAND [ARG]...
#
# The command starts in the current directory, with sch_netem loaded. Exit status: the
# command's, or 2 when no VM can be started here.
set -euo pipefail

rwdirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rwdir) rwdirs+=(--rwdir "$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: scripts/vm.sh [--rwdir DIR]... -- COMMAND [ARG]..." >&2; exit 2; }

vng=$(command -v vng || true)
[ -n "$vng" ] || vng="${ROAM_VNG_VENV:-$HOME/.cache/roam/vng}/bin/vng"
if [ ! -x "$vng" ]; then
  echo "vm: virtme-ng is not installed; run scripts/setup.sh --vm" >&2
  exit 2
fi
# vng runs its helpers (virtme-run, ...) by name: they live next to it.
export PATH="$(dirname "$vng"):$PATH"
kernel=""
for image in $(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V -r); do
  version=${image#/boot/vmlinuz-}
  if find "/lib/modules/$version/kernel/net/sched" -name 'sch_netem.ko*' 2>/dev/null | grep -q .; then
    kernel=$image
    break
  fi
done
if [ -z "$kernel" ]; then
  echo "vm: no kernel image with sch_netem in /boot; run scripts/setup.sh --vm (installs linux-image-amd64)" >&2
  exit 2
fi

# Software emulation unless asked for KVM (ROAM_VM_KVM=1): a /dev/kvm that exists does not mean
# it works (nested virtualization without MSR support makes QEMU abort).
accel=(--disable-kvm)
[ "${ROAM_VM_KVM:-0}" = 1 ] && accel=()

status_dir=$(mktemp -d /tmp/roam-vm.XXXXXX)
trap 'rm -rf "$status_dir"' EXIT
command=$(printf '%q ' "$@")
# virtme-ng does not pass the guest command's exit status through: it goes through a file. Its
# output goes through a pipe: given a file, QEMU reopens it and writes from its start, over
# whatever the caller had written there (a CI log, say). The guest's stderr joins its stdout.
"$vng" --run "$kernel" "${accel[@]}" --user root --cpus "${ROAM_VM_CPUS:-2}" --memory "${ROAM_VM_MEMORY:-2G}" \
  --rwdir "$status_dir" "${rwdirs[@]}" --cwd "$PWD" \
  -- bash -c "modprobe sch_netem || { echo 'vm: modprobe sch_netem failed' >&2; echo 2 > $status_dir/status; exit 2; }; $command; echo \$? > $status_dir/status" </dev/null 2>&1 | cat
if [ ! -s "$status_dir/status" ]; then
  echo "vm: the virtual machine ended without the command's exit status (did it boot?)" >&2
  exit 2
fi
exit "$(cat "$status_dir/status")"
