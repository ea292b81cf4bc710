#!/usr/bin/env bash
# Downloads Apache Kafka's command-line tools (kafka-tools and kafka_2.13 3.9.1, with their
# runtime dependencies) into .tools/kafka-tools/, for tests/interop/test_kafka_tools.py:
# kafka-topics, the console producer and consumer, kafka-consumer-groups, kafka-configs,
# kafka-acls and the verifiable producer and consumer, run unchanged against Headwater's
# Kafka listener.  What is fetched is tests/interop/kafka-tools-pom.xml's dependency list.
#
# Idempotent and whole or not at all: see scripts/fetch-pom-jars.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/fetch-pom-jars.sh "Kafka's tools" tests/interop/kafka-tools-pom.xml "${KAFKA_TOOLS_DIR:-$PWD/.tools/kafka-tools}" kafka-tools-3 kafka_2.13-3 kafka-clients-3 slf4j-reload4j-
