#!/usr/bin/env bash
# Downloads Apache Kafka's Java client library and the compression libraries it
# loads at run time into .tools/kafka-jars/, for tests/interop (issue 2: a batch
# Kafka wrote decodes in headwater.records, and the reverse).  Kafka itself is
# the reference for the RecordBatch v2 format, so the interop test runs its
# real MemoryRecords code rather than our reading of the spec.
#
# Idempotent: a jar already present is not fetched again.  Needs Maven (mvn)
# and network access to Maven Central.  Versions are those kafka-clients
# declares in its own pom for its runtime dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${KAFKA_JARS_DIR:-$PWD/.tools/kafka-jars}"
KAFKA_VERSION="${KAFKA_VERSION:-3.9.1}"
ARTIFACTS=(
    "org.apache.kafka:kafka-clients:${KAFKA_VERSION}"
    "com.github.luben:zstd-jni:1.5.6-4"
    "org.lz4:lz4-java:1.8.0"
    "org.xerial.snappy:snappy-java:1.1.10.5"
    "org.slf4j:slf4j-api:1.7.36"
)

if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch-kafka-clients: mvn (Maven) is not installed" >&2
    exit 1
fi
mkdir -p "$DEST"
# One kafka-clients on the class path: drop other versions left by an earlier run.
for old in "$DEST"/kafka-clients-*.jar; do
    if [ -e "$old" ] && [ "$(basename "$old")" != "kafka-clients-${KAFKA_VERSION}.jar" ]; then
        echo "==> removing $(basename "$old")"
        rm -f "$old"
    fi
done
for gav in "${ARTIFACTS[@]}"; do
    IFS=: read -r _group artifact version <<<"$gav"
    jar="$DEST/${artifact}-${version}.jar"
    if [ -s "$jar" ]; then
        echo "==> ${artifact}-${version}.jar already in ${DEST#"$PWD"/}"
        continue
    fi
    echo "==> fetching ${gav}"
    # mvn -q still prints colour escapes; keep its output for when it fails.
    if ! log=$(mvn -q -B -Dstyle.color=never dependency:copy -Dartifact="${gav}" \
        -DoutputDirectory="$DEST" -Dmdep.overWriteReleases=false 2>&1); then
        echo "$log" >&2
        echo "fetch-kafka-clients: mvn dependency:copy ${gav} failed" >&2
        exit 1
    fi
    if [ ! -s "$jar" ]; then
        echo "fetch-kafka-clients: ${jar} missing after mvn dependency:copy" >&2
        exit 1
    fi
done
echo "==> kafka-clients ${KAFKA_VERSION} jars ready in ${DEST#"$PWD"/}"
