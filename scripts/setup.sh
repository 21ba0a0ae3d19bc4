#!/usr/bin/env bash
# Installs what Roam needs to build, test and run on Debian 12, and nothing that is there already.
# Idempotent and quick when everything is present: one dpkg-query, no apt-get.
#
#   scripts/setup.sh          build and run
#   scripts/setup.sh --vm     also what scripts/vm.sh needs to prove the netem backend on a
#                             kernel without sch_netem: QEMU, Debian's kernel, virtme-ng
#   scripts/setup.sh --vm-if-needed
#                             --vm when the running kernel has no sch_netem (make test, make demo)
#   scripts/setup.sh --browser
#                             also headless Chromium, which the tests load report.html in (make test)
#   scripts/setup.sh --go     also Go, which builds toxiproxy's own Go client (make toxiproxy-go)
#   scripts/setup.sh --dbus   also dbus-daemon, sd-bus's headers, dbus-next and python-dbusmock
#                             (Debian's, and PyPI's for its ModemManager template): the D-Bus tests
#   scripts/setup.sh --mptcpd also mptcpd, for the path managers' comparison
set -euo pipefail

# Whether the running kernel has netem: loaded, built in, or a module it can load.
kernel_has_netem() {
  [ -d /sys/module/sch_netem ] && return 0
  grep -qs '^CONFIG_NET_SCH_NETEM=y' "/boot/config-$(uname -r)" && return 0
  modprobe -n -q sch_netem 2>/dev/null
}

vm=0
browser=0
go=0
dbus=0
mptcpd=0
for option in "$@"; do
  case "$option" in
    --vm) vm=1 ;;
    --vm-if-needed) kernel_has_netem || vm=1 ;;
    --browser) browser=1 ;;
    --go) go=1 ;;
    --dbus) dbus=1 ;;
    --mptcpd) mptcpd=1 ;;
    *) echo "usage: scripts/setup.sh [--vm | --vm-if-needed] [--browser] [--go] [--dbus] [--mptcpd]" >&2; exit 2 ;;
  esac
done

packages=(
  libnl-3-dev libnl-route-3-dev libnl-genl-3-dev  # the CNetlink system library
  pkg-config                                      # how SwiftPM finds libnl
  iproute2                                        # ip netns (users), ip monitor (benchmark), demo
  util-linux                                      # setpriv (tests drop privileges with it)
  iputils-ping                                    # the netem accuracy check measures with ping
  mptcpize                                        # MPTCP for TCP-only command workloads (mptcpize: true)
  nftables                                        # networks: NAT44 and carrier-grade NAT in gateways
  unbound                                         # networks: resolvers (DNS64) and the servers' names
  tayga                                           # networks: NAT64 on a TUN interface
  conntrack                                       # networks: rebind (a NAT forgets its mappings)
  curl                                            # the bundled network scenarios' clients
  bind9-dnsutils                                  # dig: the flow and DNS fixtures' lookups
  irtt                                            # roam import irtt: recordings made and replayed in tests
  gpsd                                            # roam record's positions: gpsd fed NMEA in the tests
)
if [ "$vm" = 1 ]; then
  packages+=(
    qemu-system-x86                               # the VM
    linux-image-amd64                             # a kernel with sch_netem as a module
    busybox-static                                # virtme-ng's initramfs
    python3-venv                                  # virtme-ng's own environment
    hostapd wpasupplicant iw                      # real Wi-Fi in the VM: an access point and a
                                                  # client on mac80211_hwsim radios (wifi-check.sh)
  )
fi

if [ "$browser" = 1 ]; then
  packages+=(chromium)                            # renders report.html in the tests
fi

if [ "$dbus" = 1 ]; then
  packages+=(
    dbus-daemon                                   # roam daemon --dbus: a private system bus in tests
    gcc libsystemd-dev                            # Examples/PathBus: the C reader on sd-bus
    python3-dbus-next                             # Examples/PathBus: the Python reader
    python3-dbusmock                              # NetworkManager's Metered, mocked on that bus
    python3-venv                                  # python-dbusmock from PyPI (below)
  )
fi

if [ "$mptcpd" = 1 ]; then
  packages+=(mptcpd mptcpd-plugins)               # the path managers' comparison (bench-path-managers)
fi

if [ "$go" = 1 ]; then
  packages+=(golang-go)                           # toxiproxy's Go client against a run
fi

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
  # Roam runs unbound itself, one per network inside a run's nodes; the system resolver service
  # the package starts on the host is not wanted (where an init system started it at all).
  if printf '%s\n' "${missing[@]}" | grep -qx unbound && [ -d /run/systemd/system ]; then
    systemctl disable --now unbound.service unbound-resolvconf.service >/dev/null 2>&1 || true
  fi
  # Likewise gpsd: the tests start their own, in their namespaces; the package's socket on the
  # host's port 2947 is not wanted.
  if printf '%s\n' "${missing[@]}" | grep -qx gpsd && [ -d /run/systemd/system ]; then
    systemctl disable --now gpsd.socket gpsd.service >/dev/null 2>&1 || true
  fi
fi

if [ "$vm" = 1 ] && ! command -v vng >/dev/null 2>&1; then
  # virtme-ng from PyPI, in a virtual environment of its own (Debian's Python refuses
  # system-wide pip installs); scripts/vm.sh looks for it there.
  venv="${ROAM_VNG_VENV:-$HOME/.cache/roam/vng}"
  if [ ! -x "$venv/bin/vng" ]; then
    echo "roam setup: installing virtme-ng into $venv" >&2
    python=/usr/bin/python3
    [ -x "$python" ] || python=$(command -v python3)
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q "virtme-ng==1.42"
  fi
fi

if [ "$dbus" = 1 ]; then
  # python-dbusmock from PyPI for its ModemManager template (roam record's modem, in the tests;
  # Debian 12's python3-dbusmock 0.28 has none), in a virtual environment of its own over
  # Debian's dbus-python (--system-site-packages: PyPI's would be built from source).
  venv="${ROAM_DBUSMOCK_VENV:-$HOME/.cache/roam/dbusmock}"
  if ! "$venv/bin/python" -c 'import dbusmock.templates.modemmanager' >/dev/null 2>&1; then
    echo "roam setup: installing python-dbusmock into $venv" >&2
    rm -rf "$venv"
    /usr/bin/python3 -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "python-dbusmock==0.38.1"
  fi
fi

# Rootless runs open /dev/net/tun as their user (the TUN device checks the user namespace's
# capability, not the file's owner), as udev's default rule lets every user (Debian's
# 50-udev-default.rules: KERNEL=="tun", MODE="0666"). A machine without udev (a container, a
# microVM) keeps the kernel's 0600; give it udev's mode.
if [ "$(id -u)" -eq 0 ] && [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
  echo "roam setup: /dev/net/tun is mode $(stat -c %a /dev/net/tun); making it 0666 as udev does, for rootless runs" >&2
  chmod 0666 /dev/net/tun
fi

if ! command -v swift >/dev/null 2>&1; then
  echo "roam setup: no Swift toolchain on PATH; Roam needs Swift 6.0 or later (swift.org/install)" >&2
  exit 2
fi
