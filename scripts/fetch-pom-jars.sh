#!/usr/bin/env bash
# Copies a Maven pom's runtime dependency jars into a directory, whole or not at all:
#   scripts/fetch-pom-jars.sh LABEL POM DEST REQUIRED_PREFIX...
# LABEL names what is fetched in messages; each REQUIRED_PREFIX (e.g. kafka-clients-4)
# must match a jar afterwards, or the copy is refused.
#
# Idempotent: a stamp named after the pom's hash marks a complete copy, and a copy is made
# in a scratch directory and moved into place whole, so an interrupted run never leaves a
# directory that looks complete.  Needs Maven (mvn) and Maven Central.
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 LABEL POM DEST REQUIRED_PREFIX..." >&2
    exit 2
fi
label=$1 pom=$2 dest=$3
shift 3
cd "$(dirname "$0")/.."
stamp=".complete-$(sha256sum "$pom" | cut -c1-16)"

if [ -e "$dest/$stamp" ]; then
    echo "==> ${label} already in ${dest#"$PWD"/}"
    exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch ${label}: mvn (Maven) is not installed" >&2
    exit 1
fi
scratch="$dest.partial"
rm -rf "$scratch"
mkdir -p "$scratch"
echo "==> fetching ${label} (${pom}) into ${dest#"$PWD"/}"
# mvn -q still prints colour escapes; keep its output for when it fails.
if ! log=$(mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
    -DoutputDirectory="$scratch" -DincludeScope=runtime 2>&1); then
    echo "$log" >&2
    echo "fetch ${label}: mvn dependency:copy-dependencies failed" >&2
    rm -rf "$scratch"
    exit 1
fi
for want in "$@"; do
    if ! compgen -G "$scratch/${want}*.jar" >/dev/null; then
        echo "fetch ${label}: ${want}*.jar missing after mvn dependency:copy-dependencies" >&2
        rm -rf "$scratch"
        exit 1
    fi
done
touch "$scratch/$stamp"
rm -rf "$dest"
mv "$scratch" "$dest"
echo "==> ${label} ready in ${dest#"$PWD"/} ($(ls "$dest"/*.jar | wc -l) jars)"
