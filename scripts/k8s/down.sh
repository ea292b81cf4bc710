#!/usr/bin/env bash
# `make k8s-down`: stops the local cluster that scripts/k8s/up.sh started, and only that:
# the processes recorded in .tools/k8s/state/*.pid, the containers of its own containerd,
# its mounts and pod network namespaces, its bridge, host interface, iptables rules and
# route, and ip_forward as it was.  The built binaries and images stay cached in .tools/k8s.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/k8s/versions.env
source scripts/k8s/net.env
ROOT=$PWD/.tools/k8s
S=$ROOT/state
[ -d "$S" ] || { echo "no local cluster state in ${S#"$PWD"/}"; exit 0; }
BIN=$ROOT/v$K8S_VERSION/bin

stop() {  # stop NAME...: SIGTERM, wait up to 10 s, then SIGKILL
    local pids=() name pid
    for name in "$@"; do
        [ -f "$S/$name.pid" ] || continue
        pid=$(cat "$S/$name.pid")
        kill "$pid" 2>/dev/null && pids+=("$pid")
        rm -f "$S/$name.pid"
    done
    for _ in $(seq 100); do
        local alive=()
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
        [ "${#alive[@]}" -eq 0 ] && return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
}

echo "==> stopping the local cluster"
stop provisioner coredns kube-proxy kubelet
SOCK=$S/node/ctd/containerd.sock
if [ -S "$SOCK" ]; then
    for t in $(ctr -a "$SOCK" -n k8s.io task ls -q 2>/dev/null); do
        ctr -a "$SOCK" -n k8s.io task kill -s KILL "$t" >/dev/null 2>&1
    done
    sleep 1
    for t in $(ctr -a "$SOCK" -n k8s.io task ls -q 2>/dev/null); do
        ctr -a "$SOCK" -n k8s.io task delete -f "$t" >/dev/null 2>&1
    done
fi
stop containerd kube-scheduler kube-controller-manager kube-apiserver etcd

# Pod network namespaces and mounts under the state directory.
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do
    ip netns pids "$ns" 2>/dev/null | grep -q . || ip netns del "$ns" 2>/dev/null
done
grep -o " $S[^ ]*" /proc/mounts | sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
"$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
iptables -D FORWARD -s "$POD_CIDR" ! -o "$BRIDGE" -j DROP 2>/dev/null
ip route del blackhole "$SERVICE_CIDR" 2>/dev/null
ip link del "$BRIDGE" 2>/dev/null
ip link del "$HOST_IF" 2>/dev/null
[ -f "$S/ip_forward.before" ] && sysctl -qw "net.ipv4.ip_forward=$(cat "$S/ip_forward.before")"
rm -rf "$S"
echo "==> stopped"
