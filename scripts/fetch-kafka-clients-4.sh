#!/usr/bin/env bash
# Downloads Apache Kafka's 4.x Java client (kafka-clients 4.3.0, with its runtime
# dependencies) into .tools/kafka-clients-4/, for tests/interop/test_kafka_transactions_v2.py:
# a 4.x transactional producer speaks transaction version 2 (KIP-890 part 2) to Headwater's
# Kafka listener.  What is fetched is tests/interop/kafka-clients-4-pom.xml's dependency
# list; the 3.9.1 client in .tools/kafka-jars (scripts/fetch-kafka-clients.sh) is untouched.
#
# Idempotent and whole or not at all: see scripts/fetch-pom-jars.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/fetch-pom-jars.sh "Kafka's 4.x clients" tests/interop/kafka-clients-4-pom.xml "${KAFKA_CLIENTS_4_DIR:-$PWD/.tools/kafka-clients-4}" kafka-clients-4
