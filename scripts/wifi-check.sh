#!/usr/bin/env bash
# Real Wi-Fi for the path monitor: two mac80211_hwsim radios, one an access point (hostapd) in
# namespace roam-wifi-ap, the other a client (wpa_supplicant) in roam-wifi-phone, with
# `roam monitor --json` watching the phone from before it associates. The client's bitrate is
# then forced (54 Mbit/s by rate control, then 11, then 1, then free again) and, at each step,
# `iw`'s station dump is written beside what the monitor published, so that the test compares
# Roam's nl80211 reading with iw's. Runs where mac80211_hwsim exists: inside scripts/vm.sh here
# (Debian's kernel has it as a module). `roam record` records the client's radio meanwhile, and
# writes the scenario that replays it. Tests/RoamCLITests/WiFiTests.swift reads what it writes.
#
#   scripts/wifi-check.sh ROAM OUT
set -uo pipefail
roam=${1:?usage: wifi-check.sh ROAM OUT}
out=${2:?usage: wifi-check.sh ROAM OUT}
rm -rf "$out"
mkdir -p "$out"
ap=roam-wifi-ap
phone=roam-wifi-phone
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$ap" 2>/dev/null
  ip netns del "$phone" 2>/dev/null
  rmmod mac80211_hwsim 2>/dev/null
}
trap cleanup EXIT
fail() { echo "wifi-check: $*" | tee "$out/failure" >&2; exit 1; }

# Waits up to 20 s for a command to succeed.
until_true() {
  for _ in $(seq 1 200); do "$@" && return 0; sleep 0.1; done
  return 1
}

modprobe mac80211_hwsim radios=2 || fail "modprobe mac80211_hwsim failed"
until_true test -e /sys/class/ieee80211/phy1 || fail "the hwsim radios did not appear"
phys=($(ls /sys/class/ieee80211 | sort -V))
ip netns add "$ap" && ip netns add "$phone" || fail "could not create the namespaces"
iw phy "${phys[0]}" set netns name "$ap" || fail "could not move ${phys[0]} into $ap"
iw phy "${phys[1]}" set netns name "$phone" || fail "could not move ${phys[1]} into $phone"
apdev=$(ip netns exec "$ap" ls /sys/class/net | grep -v '^lo$' | head -n1)
phonedev=$(ip netns exec "$phone" ls /sys/class/net | grep -v '^lo$' | head -n1)
echo "$phonedev" > "$out/interface"

# The monitor first: it must classify the radio as Wi-Fi from the kernel alone (no tags) and
# see the association happen.
"$roam" monitor --netns "$phone" --json > "$out/monitor.jsonl" 2> "$out/monitor.stderr" &
pids+=($!)
until_true test -s "$out/monitor.jsonl" || fail "roam monitor published nothing"

cat > "$out/hostapd.conf" <<CONF
interface=$apdev
driver=nl80211
ssid=roam-test
hw_mode=g
channel=6
CONF
cat > "$out/wpa.conf" <<CONF
network={
  ssid="roam-test"
  key_mgmt=NONE
}
CONF
ip netns exec "$ap" hostapd "$out/hostapd.conf" > "$out/hostapd.log" 2>&1 &
pids+=($!)
ip netns exec "$phone" wpa_supplicant -i "$phonedev" -c "$out/wpa.conf" > "$out/wpa.log" 2>&1 &
wpa=$!
pids+=($wpa)
until_true sh -c "ip netns exec $phone iw dev $phonedev link | grep -q Connected" || fail "the client did not associate"
ip -n "$ap" addr add 198.18.0.1/24 dev "$apdev"
ip -n "$phone" addr add 198.18.0.2/24 dev "$phonedev"
ip -n "$phone" route add default via 198.18.0.1 dev "$phonedev"
ip netns exec "$phone" ping -c 20 -i 0.1 -W 2 198.18.0.1 > "$out/ping.txt" 2>&1
# roam record on the phone's radio from here until the client has left: the access point, its
# signal and the bitrates nl80211 gives, and echoes to the access point's address.
ip netns exec "$phone" "$roam" record --interface "$phonedev" --target 198.18.0.1 --interval 500ms --echoes 4 \
  --output "$out/recording.jsonl" --scenario "$out/recorded-wifi.yaml" > "$out/record.stdout" 2> "$out/record.stderr" &
recorder=$!
pids+=($recorder)
until_true test -s "$out/recording.jsonl" || fail "roam record wrote nothing"

# The quality the monitor last published for the phone's radio.
published() {
  tail -n 1 "$out/monitor.jsonl" | python3 -c '
import json, sys
path = json.loads(sys.stdin.read())
print(next((i["linkQuality"] for i in path["interfaces"] if i["name"] == sys.argv[1]), "absent"))' "$phonedev"
}
# Forces the client's transmit rate (nothing: rate control again), sends traffic so that the
# rate is used, and waits for the monitor to publish `expected`; records both sides.
step() {
  local name=$1 expected=$2; shift 2
  ip netns exec "$phone" iw dev "$phonedev" set bitrates "$@" || fail "iw set bitrates $* failed"
  ip netns exec "$phone" ping -c 10 -i 0.1 -W 2 198.18.0.1 > /dev/null 2>&1
  until_true sh -c "[ \"\$(tail -n 1 '$out/monitor.jsonl' | grep -o '\"name\":\"$phonedev\"[^}]*' | grep -o 'linkQuality\":\"[a-z]*' | cut -d'\"' -f3)\" = $expected ]"
  ip netns exec "$phone" iw dev "$phonedev" station dump > "$out/station-$name.txt"
  published > "$out/published-$name"
  echo "wifi-check: $name: monitor says $(cat "$out/published-$name"), iw says $(grep -E 'signal avg|tx bitrate' "$out/station-$name.txt" | tr -s '\t ' ' ' | tr '\n' ';')"
}
step free good
step rate11 moderate legacy-2.4 11
step rate1 minimal legacy-2.4 1
step again good

# The client leaves: its radio has no access point, and the path no Wi-Fi.
kill "$wpa"
until_true sh -c "! ip netns exec $phone iw dev $phonedev link | grep -q Connected"
until_true sh -c "tail -n 1 '$out/monitor.jsonl' | grep -q '\"status\":\"unsatisfied\"'"
ip netns exec "$phone" cat "/sys/class/net/$phonedev/ifalias" > "$out/alias" 2>/dev/null || true
# A second of the radio without its access point, then roam record interrupted as a user would.
sleep 1
kill -INT "$recorder"
wait "$recorder"
echo $? > "$out/record.exit"
ip netns exec "$ap" cat "/sys/class/net/$apdev/address" > "$out/ap-address"
echo "wifi-check: done"
exit 0
