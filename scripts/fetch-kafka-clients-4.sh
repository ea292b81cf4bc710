#!/usr/bin/env bash
# Downloads Apache Kafka's 4.x Java client (kafka-clients 4.3.0, with its runtime
# dependencies) into .tools/kafka-clients-4/, for tests/interop/test_kafka_transactions_v2.py:
# a 4.x transactional producer speaks transaction version 2 (KIP-890 part 2) to Headwater's
# Kafka listener.  What is fetched is tests/interop/kafka-clients-4-pom.xml's dependency
# list; the 3.9.1 client in .tools/kafka-jars (scripts/fetch-kafka-clients.sh) is untouched.
#
# Idempotent: a stamp named after the pom's hash marks a complete copy, made in a scratch
# directory and moved into place whole.  Needs Maven (mvn) and Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=tests/interop/kafka-clients-4-pom.xml
DEST="${KAFKA_CLIENTS_4_DIR:-$PWD/.tools/kafka-clients-4}"
STAMP=".complete-$(sha256sum "$POM" | cut -c1-16)"

if [ -e "$DEST/$STAMP" ]; then
    echo "==> Kafka 4 clients already in ${DEST#"$PWD"/}"
    exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch-kafka-clients-4: mvn (Maven) is not installed" >&2
    exit 1
fi
scratch="$DEST.partial"
rm -rf "$scratch"
mkdir -p "$scratch"
echo "==> fetching Kafka's 4.x clients (${POM}) into ${DEST#"$PWD"/}"
if ! log=$(mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
    -DoutputDirectory="$scratch" -DincludeScope=runtime 2>&1); then
    echo "$log" >&2
    echo "fetch-kafka-clients-4: mvn dependency:copy-dependencies failed" >&2
    rm -rf "$scratch"
    exit 1
fi
if ! compgen -G "$scratch/kafka-clients-4*.jar" >/dev/null; then
    echo "fetch-kafka-clients-4: kafka-clients-4*.jar missing after mvn" >&2
    exit 1
fi
touch "$scratch/$STAMP"
rm -rf "$DEST"
mv "$scratch" "$DEST"
echo "==> Kafka 4 clients ready in ${DEST#"$PWD"/} ($(ls "$DEST"/*.jar | wc -l) jars)"
