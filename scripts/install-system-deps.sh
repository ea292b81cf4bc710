#!/usr/bin/env bash
# Installs the system packages the tests need, from nothing, idempotently:
# Debian's zookeeper, a Java runtime (ZooKeeper and Spark need one), Chromium and its
# driver (the console's browser test), and helm.
# helm is built with `go install` into .tools/bin (the only way to get it here).
set -euo pipefail
cd "$(dirname "$0")/.."
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

need_apt=()
[ -x /usr/share/zookeeper/bin/zkServer.sh ] || need_apt+=(zookeeper)
command -v javac >/dev/null 2>&1 || need_apt+=(default-jdk-headless)  # interop test runs `java File.java`
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)  # fetches kafka-clients for the interop tests
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)  # the Kafka listener's interop tests (librdkafka's CLI)
# The console's browser test: Debian's Chromium, headless, driven by selenium.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "==> apt-get install ${need_apt[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
# The Debian package starts a system ZooKeeper on 2181; tests start their own.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now zookeeper >/dev/null 2>&1 || true; fi

mkdir -p .tools/bin
if ! command -v helm >/dev/null 2>&1 && [ ! -x .tools/bin/helm ]; then
    if ! command -v go >/dev/null 2>&1; then
        echo "==> go is missing; installing Debian's golang-go"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go >/dev/null
    fi
    echo "==> go install helm.sh/helm/v3/cmd/helm@${HELM_VERSION} (a few minutes)"
    GOBIN="$PWD/.tools/bin" GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
fi
echo "==> system dependencies ready"
