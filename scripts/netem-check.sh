#!/usr/bin/env bash
# Runs every bundled scenario (at full length, three at a time) and the netem accuracy fixture with
# --backend netem, one report directory per run under OUT with the run's exit status in `exit`;
# then checks that Ctrl-C, SIGTERM and SIGKILL + `roam cleanup` leave nothing behind, that runs at
# once do not collide, that `roam attach` sets the qdiscs `roam run` sets (at the end of every
# bundled scenario it can play, and the fixture's) and leaves the interfaces as they were, and
# that a rootless run (as `nobody`) plays netem too. Runs where sch_netem is available: on this
# machine's kernel, or inside scripts/vm.sh. Tests/RoamCLITests/NetemBackendTests.swift reads
# what it writes.
#
#   scripts/netem-check.sh ROAM OUT [TIME-SCALE]
set -uo pipefail
roam=${1:?usage: netem-check.sh ROAM OUT [TIME-SCALE]}
out=${2:?usage: netem-check.sh ROAM OUT [TIME-SCALE]}
scale=${3:-0.25}
cd "$(dirname "$0")/.."
modprobe sch_netem 2>/dev/null || true
# Networks: tayga's NAT64 is a TUN interface (a VM's kernel may not have made /dev/net/tun yet).
modprobe tun 2>/dev/null || true
# laptop-daemon's roam daemon: nftables for its per-program policy, sock_diag for its MPTCP
# subflows. A host loads them once, on first use; in the VM each first use loads them from the
# host's file system over 9p (measured: 4 s for the first nft, 1.2 s for the first sock_diag),
# which would put the daemon's READY=1, and so the job it lets go, past the Wi-Fi's loss at 8 s.
modprobe -a nf_tables nft_socket nft_chain_nat nft_masq inet_diag tcp_diag mptcp_diag 2>/dev/null || true
nft list tables > /dev/null 2>&1 || true   # and nft itself, read once
rm -rf "$out"
mkdir -p "$out"
# A VM's first Python start reads the standard library cold over 9p, and is slow: read what the
# scenarios' programs import once first (laptop-daemon's wrapper, its first Python, said READY=1
# at 9.1 s without this, past the Wi-Fi's loss at 8 s; 4.3 s with it).
python3 -c 'import http.server, urllib.request, socket, struct, threading, json, select, subprocess, tempfile, shutil, signal' 2>/dev/null || true

# The root namespace as `ip` shows it; it must be the same after every run.
snapshot() {
  { ip -d link show; ip addr show; ip route show table all; ip -6 route show table all; ip rule show; ip -6 rule show
    tc qdisc show; } 2>&1 | grep -v -E 'used [0-9]+|expires [0-9]+sec' 
}
snapshot > "$out/root-before"

run() {
  local name=$1; shift
  "$roam" run --backend netem --quiet --report "$out/$name" "$@" > "$out/$name.console" 2>&1
  local status=$?
  mkdir -p "$out/$name"
  echo "$status" > "$out/$name/exit"
  echo "netem-check [${SECONDS} s]: $name exited $status"
}
# Held at the end of its timeline (--hold), the run's qdiscs are read back from the kernel into
# NAME/qdiscs (what roam attach must set too, below); then it is stopped through its control API,
# which ends it as its timeline's end would.
# Each look is two programs started (grep, sleep), which in the VM take CPU from the runs: three
# runs looked for every 0.1 s put laptop-daemon's READY=1 at 5.7 and 8.6 s where it was 3.5 and
# 3.8 s unwatched. So a run's end is looked for every second.
in_timeline() { # REPORT-DIR PATTERN SECONDS [EVERY]: waits until a line of the run's timeline there matches
  local every=${4:-1}
  for _ in $(seq 1 "$(awk -v s="$3" -v e="$every" 'BEGIN {print int(s / e)}')"); do
    grep -q "$2" "$1/timeline.jsonl" 2>/dev/null && return 0
    sleep "$every"
  done
  return 1
}
held() { in_timeline "$1" '"type":"mark".*timeline is over' 120; } # REPORT-DIR: the run or attach there holds its last conditions
qdiscs() { for ns in "$@"; do echo "# ${ns##*-}"; ip netns exec "$ns" tc -d qdisc show | sed -E 's/ refcnt [0-9]+//' | grep -v 'dev lo '; done; }
connected() { in_timeline "$1" '"type":"connect"' 15 0.25 || true; } # REPORT-DIR: the run there made its first connection (or 15 s passed)
run_held() {
  local name=$1 scenario=$2; shift 2
  mkdir -p "$out/$name"
  "$roam" run --backend netem --quiet --hold --control --report "$out/$name" "$scenario" "$@" > "$out/$name.console" 2>&1 &
  local pid=$! id
  if held "$out/$name"; then
    id=$(grep -o '"runId":"[0-9a-f]*"' "$out/$name/timeline.jsonl" | head -1 | cut -d'"' -f4)
    qdiscs $(awk '{print $2; print $3}' "$out/links/$name" | sort -u | sed "s/^/roam-$id-/") > "$out/$name/qdiscs"
    "$roam" ctl "$id" stop > "$out/$name/ctl-stop" 2>&1
  else
    kill -INT "$pid"
  fi
  wait "$pid"
  local status=$?
  echo "$status" > "$out/$name/exit"
  echo "netem-check [${SECONDS} s]: $name exited $status"
}
# Each scenario's links, "NAME FIRST SECOND" a line, in links/NAME (one Python start: a VM's is slow).
mkdir -p "$out/links"
python3 - "$out/links" scenarios/*.yaml <<'PY'
import os, sys, yaml
for path in sys.argv[2:]:
    with open(os.path.join(sys.argv[1], os.path.basename(path)[:-5]), "w") as out:
        for link in yaml.safe_load(open(path)).get("links") or []:
            print(link["name"], *link["between"], file=out)
PY
run netem-accuracy Tests/Fixtures/netem-accuracy.yaml
# Three at a time: each run's namespaces, qdiscs and report are its own, which is what two runs
# at once must show (the names that ran together are listed, a batch a line, in `batches`), and
# the VM plays them in half the time it takes one after another. At full length: every one's
# expectations must hold on netem (a quarter of the length left a VM's slow first second inside
# the timeline, a blackhole starting before the connection was fully established).
batch=()
traced=()
alone=()
play_batch() {
  [ ${#batch[@]} -gt 0 ] || return 0
  echo "${batch[*]}" >> "$out/batches"
  # Each started once the one before has made its first connection (or after 15 s): a run's
  # setup (namespaces, monitors, qdiscs) takes most of a slow VM's two CPUs for a moment, which
  # is not what the connection being made beside it should be judged on (its first request's
  # time to first byte went over a second).
  # A scenario that says `# netem-check: started alone until: FILE` is started first in its
  # batch, and the next one only once FILE is in its report directory (or the run ended, or
  # 120 s passed).
  local name marker pid
  for name in "${batch[@]}"; do
    run_held "$name" "scenarios/$name.yaml" &
    pid=$!
    if marker=$(alone_until "$name"); then
      # A builtin test and one sleep a look (no grep): while the run is alone, nothing else.
      for _ in $(seq 1 480); do
        [ -e "$out/$name/$marker" ] || ! kill -0 "$pid" 2>/dev/null && break
        sleep 0.25
      done
    else
      connected "$out/$name"
    fi
  done
  wait
  batch=()
}
# NAME: the file a scenario that must start alone waits for (its `# netem-check: started alone
# until: FILE` line), or fails.
alone_until() {
  local line
  line=$(grep -m1 '^# netem-check: started alone until: ' "scenarios/$1.yaml") || return 1
  line=${line#\# netem-check: started alone until: }
  echo "${line%% *}"
}
for scenario in scenarios/*.yaml; do
  name=$(basename "$scenario" .yaml)
  # A scenario can say why it is not played here (a line `# netem-check: skip: REASON`).
  if reason=$(grep -m1 '^# netem-check: skip: ' "$scenario"); then echo "netem-check [${SECONDS} s]: $name skipped (${reason#\# netem-check: skip: })"; continue; fi
  # Trace-driven links: netem steps the trace's rate every 100 ms. They go in the last batch,
  # beside the shortest, which keeps the batches' longest runs together; a scenario started
  # alone goes first in it (its companions wait for it, so it is kept out of the full batches).
  if grep -q '^ *\(up\|down\)\?.*trace:' "$scenario"; then traced+=("$name"); continue; fi
  if alone_until "$name" > /dev/null; then alone+=("$name"); continue; fi
  # So are a cellular radio's RRC states (netem refuses them).
  if grep -q '^ *-\? *{\?.*radio:' "$scenario"; then echo "netem-check [${SECONDS} s]: $name has radio states; skipped"; continue; fi
  # Scenarios with networks play at full length below: their programs keep the scenario's time.
  if grep -q '^networks:' "$scenario"; then continue; fi
  batch+=("$name")
  [ ${#batch[@]} -lt 3 ] || play_batch
done
for name in "${alone[@]}" "${traced[@]}"; do
  batch+=("$name")
  [ ${#batch[@]} -lt 3 ] || play_batch
done
play_batch
# Networks at full length (nftables, tayga, unbound and the scenarios' programs, as on the host).
# Two of them: NAT44 and NAT64 with DNS64 (coffee-shop-to-lte) and a carrier NAT's rebind
# (carrier-nat-rebind). hotel-dns and hotel-wifi fault a resolver and hold a captive portal: what
# they prove is the same on either backend, and NetworkScenarioTests plays them in full on the
# userspace one; here they would cost CI about six minutes of a VM for no netem-specific fact.
for name in coffee-shop-to-lte carrier-nat-rebind; do
  run "network-$name" "scenarios/$name.yaml"
done
# Flows (match:): a prio root, a netem band per flow and u32 filters, as the phone reads them back.
run network-flow-faults Tests/Fixtures/flow-faults.yaml
# A mahimahi trace stepped as tbf rates under a bulk download: what the download gets against
# what the trace delivers.
run trace-replay Tests/Fixtures/trace-replay.yaml
# Movement: the timeline office-walk derives (rate steps, roams, the lift) played by netem. Its
# workloads are Roam's own, so it may run at half speed, as NetworkScenarioTests plays it.
run network-office-walk scenarios/office-walk.yaml --time-scale 0.5

# Handover over MPTCP: `auto` goes through the userspace path manager where this kernel's can
# move a connection between its subflows, and `mptcp-userspace` is refused where it cannot.
run handover-auto Tests/Fixtures/mptcp-userspace-handover.yaml
run handover-userspace Tests/Fixtures/mptcp-userspace-handover.yaml --multipath mptcp-userspace
uname -r > "$out/kernel"

# Waits until a run's namespaces exist (the run is under way).
started() {
  for _ in $(seq 1 600); do
    ip netns list | grep -q "^roam-" && return 0
    sleep 0.05
  done
  return 1
}
# Ctrl-C and SIGTERM: the run stops, writes its report and removes everything.
for signal in INT TERM; do
  "$roam" run --backend netem --quiet --report "$out/signal-$signal" scenarios/walk-out-of-home.yaml > "$out/signal-$signal.console" 2>&1 &
  pid=$!
  started && sleep 1
  kill -"$signal" "$pid"
  wait "$pid"
  echo $? > "$out/signal-$signal/exit"
  ip netns list | grep '^roam-' > "$out/signal-$signal/leftovers" || true
  echo "netem-check [${SECONDS} s]: SIG$signal run exited $(cat "$out/signal-$signal/exit")"
done
# SIGKILL leaves the run's objects; `roam cleanup` removes them.
mkdir -p "$out/sigkill"
"$roam" run --backend netem --quiet --report "$out/sigkill" scenarios/elevator.yaml > "$out/sigkill.console" 2>&1 &
pid=$!
started && sleep 1
kill -KILL "$pid"
wait "$pid" 2>/dev/null
ip netns list | grep '^roam-' > "$out/sigkill/before-cleanup" || true
"$roam" cleanup > "$out/sigkill/cleanup" 2>&1
echo $? > "$out/sigkill/cleanup-exit"
ip netns list | grep '^roam-' > "$out/sigkill/after-cleanup" || true
echo "netem-check [${SECONDS} s]: after SIGKILL, cleanup exited $(cat "$out/sigkill/cleanup-exit")"

# roam attach: on namespaces and veth pairs made with `ip` (as a container runtime makes them),
# the qdiscs it sets are those roam run sets for the same scenario, read back from the kernel once
# the fixture's last change (2 s) is in force; then it plays walk-out-of-home there, and every
# interface is left as it was.
settled() { # NAMESPACE: waits until the fixture's last change (fq_codel on cell) is in force there
  for _ in $(seq 1 1200); do ip netns exec "$1" tc qdisc show dev cell 2>/dev/null | grep -q fq_codel && return 0; sleep 0.05; done
  return 1
}
# A veth pair's carrier comes up a moment after both ends are set up (the kernel's link watch):
# the snapshot before is taken once every interface says so, or it races that moment.
carrier() { # NAMESPACE...: waits until every interface there but lo is up with carrier
  local ns waiting
  for _ in $(seq 1 200); do
    waiting=0
    for ns in "$@"; do
      ip -n "$ns" -br link | awk '$1 != "lo" && ($2 != "UP" || /NO-CARRIER/) {found = 1} END {exit !found}' && waiting=1
    done
    [ "$waiting" = 0 ] && return 0
    sleep 0.05
  done
  echo "netem-check [${SECONDS} s]: an interface in $* has no carrier after 10 s" >&2; return 1
}
interfaces() { for ns in "$@"; do echo "# $ns"; ip -n "$ns" -br link; ip -n "$ns" addr show | grep -E 'inet6? ' | grep -v 'scope link' | awk '{print $1, $2}'; ip -n "$ns" route show table all | grep -v -E '^(local|multicast|broadcast) |fe80::|ff00::'; ip netns exec "$ns" tc qdisc show; done; }
mkdir -p "$out/attach-run" "$out/attach" "$out/attach-walk"
"$roam" run --backend netem --quiet --report "$out/attach-run" Tests/Fixtures/attach-check.yaml > "$out/attach-run.console" 2>&1 &
pid=$!
for _ in $(seq 1 600); do run_phone=$(ip netns list | awk '/^roam-.*-phone/ {print $1; exit}'); [ -n "$run_phone" ] && break; sleep 0.05; done
run_server=${run_phone%-phone}-server
settled "$run_server" && settled "$run_phone" && qdiscs "$run_phone" "$run_server" > "$out/attach-run/qdiscs"
kill -TERM "$pid"; wait "$pid"; echo $? > "$out/attach-run/exit"
ip netns add attach-phone; ip netns add attach-server
for link in wifi cell; do ip link add "$link" netns attach-phone type veth peer name "$link" netns attach-server; done
subnet=10
for link in wifi cell; do
  ip -n attach-phone addr add "198.18.$subnet.1/24" dev "$link"; ip -n attach-server addr add "198.18.$subnet.2/24" dev "$link"
  ip -n attach-phone addr add "fd00:$subnet::1/64" dev "$link" nodad; ip -n attach-server addr add "fd00:$subnet::2/64" dev "$link" nodad
  ip -n attach-phone link set "$link" up; ip -n attach-server link set "$link" up
  subnet=$((subnet + 1))
done
ip -n attach-phone route add default via 198.18.10.2 metric 100; ip -n attach-phone route add default via 198.18.11.2 metric 110
ip -n attach-server route add 198.19.200.0/24 via 198.18.11.1
carrier attach-phone attach-server
interfaces attach-phone attach-server > "$out/attach/interfaces-before"
"$roam" attach Tests/Fixtures/attach-check.yaml --netns phone=attach-phone --netns server=/run/netns/attach-server --quiet \
  --report "$out/attach" > "$out/attach.console" 2>&1 &
pid=$!
settled attach-server && settled attach-phone && qdiscs attach-phone attach-server > "$out/attach/qdiscs"
kill -TERM "$pid"; wait "$pid"; echo $? > "$out/attach/exit"
interfaces attach-phone attach-server > "$out/attach/interfaces-after"
# The Kubernetes export's sidecar as its pod runs it: the command of the phone's sidecar, from the
# manifest (its two paths moved to this check's), in the phone's namespace and a PID namespace of
# its own, uid 0 with only NET_ADMIN, stopped by SIGTERM to its first process as the kubelet does.
mkdir -p "$out/k8s-sidecar/etc" "$out/k8s-sidecar/report"
cp Tests/Fixtures/attach-check.yaml "$out/k8s-sidecar/etc/scenario.yaml"
"$roam" export --format kubernetes Tests/Fixtures/attach-check.yaml --image roam:check --output "$out/k8s-sidecar/manifests.yaml" > /dev/null 2>&1
script=$(python3 - "$out/k8s-sidecar" <<'PY'
import json, sys
lines = open(sys.argv[1] + "/manifests.yaml").read().split("\n")
start = lines.index('  name: "phone"')
line = next(line.strip() for line in lines[start:] if line.strip().startswith('- "trap '))
print(json.loads(line[2:]).replace("/etc/roam", sys.argv[1] + "/etc").replace("/var/roam/report", sys.argv[1] + "/report"))
PY
)
ip netns exec attach-phone unshare --pid --fork --mount-proc setpriv --bounding-set=-all,+net_admin --inh-caps=-all -- \
  env ROAM_START_AT=$(( $(date +%s) + 3 )) PATH="$(dirname "$(realpath "$roam")"):$PATH" sh -c "$script" > "$out/k8s-sidecar.console" 2>&1 &
pid=$!
settled attach-phone && qdiscs attach-phone > "$out/k8s-sidecar/qdiscs"
pkill -TERM -f -- "^sh -c trap"; wait "$pid"; echo $? > "$out/k8s-sidecar/exit-sh"
interfaces attach-phone attach-server > "$out/k8s-sidecar/interfaces-after"
# As a pod's sidecar: inside the node's namespace and a PID namespace of its own (a container's),
# uid 0 with CAP_NET_ADMIN and nothing else.
mkdir -p "$out/attach-sidecar"
ip netns exec attach-phone unshare --pid --fork --mount-proc setpriv --bounding-set=-all,+net_admin --inh-caps=-all -- \
  "$roam" attach Tests/Fixtures/attach-check.yaml \
  --node phone --quiet --report "$out/attach-sidecar" > "$out/attach-sidecar.console" 2>&1 &
pid=$!
settled attach-phone && qdiscs attach-phone > "$out/attach-sidecar/qdiscs"
# To roam itself, its PID namespace's first process, as a container runtime signals it
# (unshare, waiting for it, keeps SIGTERM to itself).
pkill -TERM -f -- "--node phone --quiet --report $out/attach-sidecar"; wait "$pid"; echo $? > "$out/attach-sidecar/exit"
# A sidecar of a pod on the node's network (`hostNetwork: true`): the host's namespace, a PID
# namespace of its own. This kernel (6.1) does not number the initial network namespace and PID 1
# is the container's: only its settings tell. Refused, exit 2, nothing changed.
mkdir -p "$out/hostnet-sidecar"
tc qdisc show > "$out/hostnet-sidecar/qdiscs-before"
unshare --pid --fork --mount-proc setpriv --bounding-set=-all,+net_admin --inh-caps=-all -- \
  "$roam" attach Tests/Fixtures/attach-check.yaml --node phone --quiet --report "$out/hostnet-sidecar" > "$out/hostnet-sidecar.console" 2>&1
echo $? > "$out/hostnet-sidecar/exit"
tc qdisc show > "$out/hostnet-sidecar/qdiscs-after"
"$roam" attach scenarios/walk-out-of-home.yaml --netns phone=attach-phone --pid "server=$(ip netns exec attach-server sh -c 'sleep 120 > /dev/null 2>&1 & echo $!')" \
  --quiet --time-scale 0.1 --report "$out/attach-walk" > "$out/attach-walk.console" 2>&1
echo $? > "$out/attach-walk/exit"
interfaces attach-phone attach-server > "$out/attach-walk/interfaces-after"
ip netns pids attach-server | xargs -r kill 2>/dev/null
ip netns del attach-phone; ip netns del attach-server
echo "netem-check [${SECONDS} s]: attach exited $(cat "$out/attach/exit") (run $(cat "$out/attach-run/exit")), walk-out-of-home attached exited $(cat "$out/attach-walk/exit")"

# Attach equals run for every bundled scenario roam attach can play (those played above: no
# networks or radio states): played to the end of its timeline and held there by `roam
# attach --hold` on namespaces and veth pairs made here with `ip`, the qdiscs of every interface,
# read back from the kernel, are those of `roam run --hold` above (NAME/qdiscs); the attached
# interfaces are left as they were.
attach_one() { # NAME INDEX: attaches NAME's scenario to namespaces a INDEX-NODE made here
  local name=$1 index=$2 dir="$out/attach-all/$1" subnet=20 link first second node pid
  local nodes; nodes=$(awk '{print $2; print $3}' "$out/links/$name" | sort -u)
  mkdir -p "$dir"
  for node in $nodes; do ip netns add "a$index-$node"; done
  while read -r link first second; do
    ip link add "$link" netns "a$index-$first" type veth peer name "$link" netns "a$index-$second"
    ip -n "a$index-$first" addr add "198.18.$subnet.1/24" dev "$link"; ip -n "a$index-$second" addr add "198.18.$subnet.2/24" dev "$link"
    ip -n "a$index-$first" link set "$link" up; ip -n "a$index-$second" link set "$link" up
    subnet=$((subnet + 1))
  done < "$out/links/$name"
  carrier $(for node in $nodes; do echo "a$index-$node"; done)
  interfaces $(for node in $nodes; do echo "a$index-$node"; done) | sed "s/^# a$index-/# /" > "$dir/interfaces-before"
  # A trace plays from time zero at its own speed, whatever the scale: the rate stepped in at the
  # timeline's end is the run's only at the run's length.
  local scaled=$scale
  grep -q '^ *\(up\|down\)\?.*trace:' "scenarios/$name.yaml" && scaled=1
  "$roam" attach "scenarios/$name.yaml" $(for node in $nodes; do echo "--netns $node=a$index-$node"; done) --quiet --hold --time-scale "$scaled" \
    --report "$dir" > "$dir.console" 2>&1 &
  pid=$!
  held "$dir" && qdiscs $(for node in $nodes; do echo "a$index-$node"; done) > "$dir/qdiscs"
  kill -TERM "$pid"; wait "$pid"; echo $? > "$dir/exit"
  interfaces $(for node in $nodes; do echo "a$index-$node"; done) | sed "s/^# a$index-/# /" > "$dir/interfaces-after"
  for node in $nodes; do ip netns del "a$index-$node"; done
  echo "netem-check [${SECONDS} s]: $name attached exited $(cat "$dir/exit"), qdiscs $(cmp -s "$out/$name/qdiscs" "$dir/qdiscs" && echo "equal to" || echo "differ from") run's"
}
mkdir -p "$out/attach-all"
index=0
for scenario in scenarios/*.yaml; do
  name=$(basename "$scenario" .yaml)
  [ -f "$out/$name/qdiscs" ] || continue
  # All at once (each in namespaces of its own): what is compared is where each timeline ends.
  attach_one "$name" "$index" &
  index=$((index + 1))
done
wait

# Rootless: netem from a user namespace of the run's own, as `nobody`. Its report goes to a
# directory of its own first (the user may not write OUT), then is copied.
mkdir -p "$out/rootless-netem"
if id nobody > /dev/null 2>&1 && command -v setpriv > /dev/null; then
  # /dev/shm: a tmpfs of this kernel's own (the VM's /tmp is the host's, shared, where the VM's
  # `nobody` may not write).
  private=$(mktemp -d /dev/shm/roam-rootless-netem-XXXXXX); chmod 755 "$private"; chown nobody "$private"
  # Its run registry there too (XDG_RUNTIME_DIR, 0700): otherwise it is /tmp/roam-UID, made on
  # the host's /tmp through the share, where it would show as root's and refuse the host's own
  # rootless runs as `nobody` afterwards.
  mkdir -m 700 "$private/runtime"; chown nobody "$private/runtime"
  binary=$(realpath "$roam"); scenario=$(realpath scenarios/walk-out-of-home.yaml)
  (cd "$private" && setpriv --reuid="$(id -u nobody)" --regid="$(id -g nobody)" --clear-groups env -i PATH="$PATH" HOME="$private" \
    TMPDIR="$private" XDG_RUNTIME_DIR="$private/runtime" "$binary" run --backend netem --quiet --report "$private/run" "$scenario" \
    --time-scale "$scale") > "$out/rootless-netem.console" 2>&1
  echo $? > "$out/rootless-netem/exit"
  cp "$private/run/summary.json" "$out/rootless-netem/" 2>/dev/null || true
  stat -c %U "$private/run/summary.json" > "$out/rootless-netem/owner" 2>/dev/null || true
  rm -rf "$private"
  echo "netem-check [${SECONDS} s]: rootless netem run exited $(cat "$out/rootless-netem/exit")"
fi

ip netns list | grep '^roam-' > "$out/leftover-namespaces" || true
snapshot > "$out/root-after"
exit 0
