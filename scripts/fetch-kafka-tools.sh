#!/usr/bin/env bash
# Downloads Apache Kafka's command-line tools (kafka-tools and kafka_2.13 3.9.1, with their
# runtime dependencies) into .tools/kafka-tools/, for tests/interop/test_kafka_tools.py:
# kafka-topics, the console producer and consumer, kafka-consumer-groups, kafka-configs,
# kafka-acls and the verifiable producer and consumer, run unchanged against Headwater's
# Kafka listener.  What is fetched is tests/interop/kafka-tools-pom.xml's dependency list.
#
# Idempotent: a stamp named after the pom's hash marks a complete copy, and a copy is
# made in a scratch directory and moved into place whole, so an interrupted run never
# leaves a directory that looks complete.  Needs Maven (mvn) and Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=tests/interop/kafka-tools-pom.xml
DEST="${KAFKA_TOOLS_DIR:-$PWD/.tools/kafka-tools}"
STAMP=".complete-$(sha256sum "$POM" | cut -c1-16)"

if [ -e "$DEST/$STAMP" ]; then
    echo "==> Kafka tools already in ${DEST#"$PWD"/}"
    exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch-kafka-tools: mvn (Maven) is not installed" >&2
    exit 1
fi
scratch="$DEST.partial"
rm -rf "$scratch"
mkdir -p "$scratch"
echo "==> fetching Kafka's tools (${POM}) into ${DEST#"$PWD"/}"
if ! log=$(mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
    -DoutputDirectory="$scratch" -DincludeScope=runtime 2>&1); then
    echo "$log" >&2
    echo "fetch-kafka-tools: mvn dependency:copy-dependencies failed" >&2
    rm -rf "$scratch"
    exit 1
fi
for want in kafka-tools-3 kafka_2.13-3 kafka-clients-3 slf4j-reload4j-; do
    if ! compgen -G "$scratch/${want}*.jar" >/dev/null; then
        echo "fetch-kafka-tools: ${want}*.jar missing after mvn dependency:copy-dependencies" >&2
        exit 1
    fi
done
touch "$scratch/$STAMP"
rm -rf "$DEST"
mv "$scratch" "$DEST"
echo "==> Kafka tools ready in ${DEST#"$PWD"/} ($(ls "$DEST"/*.jar | wc -l) jars)"
