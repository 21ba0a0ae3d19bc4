#!/usr/bin/env bash
# Demonstrates `roam monitor`: a phone with Wi-Fi and cellular in a private network namespace
# walks out of Wi-Fi range, loses cellular in an elevator, gets both back and turns on Low Data
# Mode. Each step waits for the monitor's line about it. Nothing outside the namespace changes.
set -euo pipefail

roam=${1:?usage: demo.sh PATH-TO-ROAM}
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: needs root to create a network namespace (try: sudo make demo)" >&2
  exit 2
fi

ns="roam-demo-$$"
monitor_pid=""
cleanup() {
  [ -n "$monitor_pid" ] && kill "$monitor_pid" 2>/dev/null && wait "$monitor_pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns"
in_ns() { ip -n "$ns" "$@"; }
in_ns link set lo up
# Both ends of each pair live in the phone's namespace: wlan0's peer stands for the access
# point, wwan0's for the cell tower. Taking a peer down is carrier loss on the phone's side.
in_ns link add wlan0 type veth peer name ap0
in_ns link add wwan0 type veth peer name tower0
in_ns link set wlan0 alias "roam:type=wifi"
in_ns link set wwan0 alias "roam:type=cellular"
# No IPv6 link-local addresses: their duplicate address detection would finish a second later
# and add updates that do not belong to any step of the story.
for dev in wlan0 ap0 wwan0 tower0; do in_ns link set "$dev" addrgenmode none; in_ns link set "$dev" up; done
in_ns addr add 198.18.0.2/24 dev wlan0
in_ns addr add 198.18.1.2/24 dev wwan0
in_ns route add default via 198.18.0.1 dev wlan0 metric 100
in_ns route add default via 198.18.1.1 dev wwan0 metric 200

coproc MONITOR { exec "$roam" monitor --netns "$ns"; }
monitor_pid=$MONITOR_PID
exec 3<&"${MONITOR[0]}"

next_update() {
  local line
  if ! IFS= read -r -t 10 line <&3; then
    echo "demo: the monitor printed nothing within 10 s" >&2
    exit 1
  fi
  printf '    %s\n' "$line"
}

echo "== At home: Wi-Fi and cellular are up; Wi-Fi is preferred"
next_update
echo "== Walking out of Wi-Fi range: wlan0 loses carrier, cellular (expensive) takes over"
in_ns link set ap0 down
next_update
echo "== In the elevator: cellular is gone too"
in_ns link set tower0 down
next_update
echo "== Out of the elevator: cellular is back"
in_ns link set tower0 up
next_update
echo "== Home again: Wi-Fi is back and preferred"
in_ns link set ap0 up
next_update
echo "== Low Data Mode on the Wi-Fi: the path becomes constrained"
in_ns link set wlan0 alias "roam:type=wifi,constrained"
next_update
echo "== Done; removing namespace $ns"
