#!/usr/bin/env bash
# `make k8s-images`: builds the images the Kubernetes tier runs, with no image registry, and
# loads them into the local cluster's containerd (when it is up; `make k8s-up` loads the
# saved ones otherwise).
#
#   headwater:e2e-1, headwater:e2e-2   the root Dockerfile (two tags for the upgrade roll;
#                                      e2e-2 differs by its version label only)
#   headwater-spark:e2e                spark/Dockerfile
#   headwater-zookeeper:e2e            deploy/zookeeper/Dockerfile (Debian's zookeeper)
#
# How, without a registry: Debian's docker.io engine is started here, by hand, on its own
# socket and data root under .tools/k8s/docker (no bridge, no iptables changes) and stopped
# at the end; the base image is a Debian (bookworm) root made with debootstrap and
# `docker import`, with a Python venv at /usr/local, so /usr/local/bin/python is where the
# Dockerfiles (written for python:3.11-slim) expect it.  Builds reach Debian and PyPI the
# way this machine does (--network host, the machine's CA certificates and apt settings
# copied into the base).  Images are saved to .tools/k8s/images/app/*.tar, and streamed
# into the cluster's containerd when it is up (in CI, with CI=true, only streamed, and
# docker's data root is removed afterwards, to spare the disk).
#
#   scripts/k8s/images.sh            # build what changed (docker's layer cache), load
#   HEADWATER_IMAGES="headwater" scripts/k8s/images.sh    # only some of them
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/k8s/versions.env
source scripts/k8s/net.env
ROOT=$PWD/.tools/k8s
D=$ROOT/docker
OUT=$ROOT/images/app
BASE=headwater-local/python:3.11-$DEBIAN_SUITE
DOCKER=/usr/bin/docker   # Debian's client, which matches its engine (and has BuildKit)
export DOCKER_HOST=unix://$D/docker.sock DOCKER_BUILDKIT=1
mkdir -p "$D" "$OUT"
WANT=${HEADWATER_IMAGES:-headwater spark zookeeper}

if [ ! -x /usr/sbin/dockerd ] || [ ! -x /usr/sbin/debootstrap ] || [ ! -x "$DOCKER" ]; then
    echo "==> apt-get install docker.io debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null
fi

started_dockerd=0
if ! $DOCKER info >/dev/null 2>&1; then
    echo "==> dockerd (data in ${D#"$PWD"/}, socket $D/docker.sock)"
    rm -f "$D/docker.pid"
    dockerd --data-root "$D/data" --exec-root "$D/exec" --pidfile "$D/docker.pid" \
        -H "$DOCKER_HOST" --bridge=none --iptables=false --ip-masq=false \
        > "$D/dockerd.log" 2>&1 &
    started_dockerd=$!
    for _ in $(seq 1 150); do $DOCKER info >/dev/null 2>&1 && break; sleep 0.2; done
    $DOCKER info >/dev/null 2>&1 || { echo "images: dockerd did not start (see $D/dockerd.log)" >&2; exit 1; }
fi
stop_dockerd() {
    if [ "$started_dockerd" != 0 ]; then
        kill "$started_dockerd" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$started_dockerd" 2>/dev/null || break; sleep 0.1; done
    fi
}
trap stop_dockerd EXIT

if ! $DOCKER image inspect "$BASE" >/dev/null 2>&1; then
    echo "==> base image $BASE: debootstrap $DEBIAN_SUITE (minbase) + python3 (~3 min)"
    R=$D/rootfs
    rm -rf "$R"
    mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    debootstrap --variant=minbase --include=python3,python3-venv,python3-dev,ca-certificates \
        "$DEBIAN_SUITE" "$R" "${mirror:-http://deb.debian.org/debian}" > "$D/debootstrap.log" 2>&1 ||
        { echo "images: debootstrap failed (see $D/debootstrap.log)" >&2; exit 1; }
    # The machine's own CA certificates and apt settings, so builds reach what it reaches.
    cp /usr/local/share/ca-certificates/*.crt "$R/usr/local/share/ca-certificates/" 2>/dev/null || true
    cp /etc/apt/apt.conf.d/99* "$R/etc/apt/apt.conf.d/" 2>/dev/null || true
    [ -f /etc/apt/sources.list.d/debian.sources ] && cp /etc/apt/sources.list.d/debian.sources "$R/etc/apt/sources.list.d/"
    chroot "$R" update-ca-certificates >/dev/null 2>&1
    rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/*
    tar -C "$R" -c . | $DOCKER import - "headwater-local/debian:$DEBIAN_SUITE" >/dev/null
    rm -rf "$R"
    printf '%s\n' \
        "FROM headwater-local/debian:$DEBIAN_SUITE" \
        "ENV LANG=C.UTF-8 PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1" \
        "RUN python3 -m venv /usr/local && /usr/local/bin/python -m pip install -q --upgrade pip" \
        'CMD ["python3"]' |
        $DOCKER build --network host -t "$BASE" - > "$D/build-base.log" 2>&1 ||
        { tail -n 30 "$D/build-base.log" >&2; echo "images: building $BASE failed" >&2; exit 1; }
fi

build() {  # build NAME DOCKERFILE CONTEXT TAG [extra args...]
    local name=$1 file=$2 context=$3 tag=$4; shift 4
    echo "==> $tag ($file)"
    local t0=$SECONDS
    $DOCKER build --network host -f "$file" -t "$tag" "$@" "$context" > "$D/build-$name.log" 2>&1 ||
        { tail -n 30 "$D/build-$name.log" >&2; echo "images: building $tag failed (see $D/build-$name.log)" >&2; exit 1; }
    echo "    built in $((SECONDS - t0)) s"
}
SOCK=$ROOT/state/node/ctd/containerd.sock
cluster_up=0
if [ -S "$SOCK" ] && ctr -a "$SOCK" version >/dev/null 2>&1; then cluster_up=1; fi
# Disk: the Spark image alone is about 2 GB, and containerd keeps each layer twice (content
# and unpacked snapshot).  With the cluster up, an image goes straight from docker into
# containerd; its tar (for the next `make k8s-up`) is kept only outside CI.
keep_tars=1
[ "${CI:-}" = true ] && [ "$cluster_up" = 1 ] && keep_tars=0
echo "    disk: $(df -h --output=avail "$ROOT" | tail -1 | tr -d ' ') free under ${ROOT#"$PWD"/}"

ship() {  # ship NAME TAG... : into the cluster's containerd and/or a tar for k8s-up
    local name=$1; shift
    if [ "$keep_tars" = 1 ]; then
        $DOCKER save "$@" > "$OUT/$name.tar.part" && mv "$OUT/$name.tar.part" "$OUT/$name.tar"
    else
        rm -f "$OUT/$name.tar"
    fi
    [ "$cluster_up" = 1 ] || return 0
    echo "==> loading $name into the cluster's containerd"
    local log=$D/load-$name.log
    if [ "$keep_tars" = 1 ]; then
        ctr -a "$SOCK" -n k8s.io image import "$OUT/$name.tar" > "$log" 2>&1 && return 0
    else
        $DOCKER save "$@" | ctr -a "$SOCK" -n k8s.io image import - > "$log" 2>&1 && return 0
    fi
    tail -n 20 "$log" >&2
    tail -n 20 "$ROOT/state/logs/containerd.log" >&2 2>/dev/null || true
    df -h "$ROOT" >&2
    echo "images: loading $name into containerd failed (see ${log#"$PWD"/})" >&2
    exit 1
}

for want in $WANT; do
    case $want in
        headwater)
            build headwater Dockerfile . headwater:e2e-1 --build-arg "PYTHON_IMAGE=$BASE" --build-arg VERSION=0.1.0+e2e.1
            build headwater-2 Dockerfile . headwater:e2e-2 --build-arg "PYTHON_IMAGE=$BASE" --build-arg VERSION=0.1.0+e2e.2
            ship headwater headwater:e2e-1 headwater:e2e-2 ;;
        spark)
            build spark spark/Dockerfile . headwater-spark:e2e --build-arg "PYTHON_IMAGE=$BASE"
            ship spark headwater-spark:e2e ;;
        zookeeper)
            build zookeeper deploy/zookeeper/Dockerfile deploy/zookeeper headwater-zookeeper:e2e \
                --build-arg "BASE_IMAGE=headwater-local/debian:$DEBIAN_SUITE"
            ship zookeeper headwater-zookeeper:e2e ;;
        *) echo "images: unknown image '$want' (headwater, spark, zookeeper)" >&2; exit 2 ;;
    esac
done

if [ "$cluster_up" = 0 ]; then
    echo "==> saved in ${OUT#"$PWD"/} (make k8s-up loads them)"
elif [ "$keep_tars" = 0 ] && [ "$started_dockerd" != 0 ]; then
    # CI builds once: docker's copy of the images is not needed again.
    stop_dockerd; started_dockerd=0
    rm -rf "$D/data" "$D/exec"
    echo "==> CI: removed docker's data root; $(df -h --output=avail "$ROOT" | tail -1 | tr -d ' ') free"
fi
