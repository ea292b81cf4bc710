#!/usr/bin/env bash
# Downloads, from Maven Central, the Java software the slow interop suites run against
# Headwater's Kafka listener (`make interop-slow`):
#
#   .tools/kafka-connect/<kafka version>/        Kafka Connect's standalone worker and the
#                                                FileStream connectors (scripts/poms/kafka-connect.xml)
#   .tools/spark-kafka/for-pyspark-<version>/    Spark's Kafka source and sink, spark-sql-kafka-0-10,
#                                                for the PySpark in .venv (scripts/poms/spark-kafka.xml)
#
#   fetch-interop-slow.sh [connect] [spark]      (no argument: both)
#
# Idempotent: a directory that holds a `.complete` file is not fetched again.  The Spark
# jars are those of the PySpark version when Maven Central has them; when it does not
# (a PySpark released to PyPI before its jars reach Central), the newest version of the
# same major release named in SPARK_KAFKA_FALLBACK is used, and the file `spark-version`
# in the directory says which.  Needs mvn (Maven) and .venv's python for PySpark's version.
set -euo pipefail
cd "$(dirname "$0")/.."
KAFKA_VERSION="${KAFKA_VERSION:-3.9.1}"
SPARK_KAFKA_FALLBACK="${SPARK_KAFKA_FALLBACK:-4.2.0}"
what=("$@")
[ "${#what[@]}" -gt 0 ] || what=(connect spark)

if ! command -v mvn >/dev/null 2>&1; then
    echo "fetch-interop-slow: mvn (Maven) is not installed (run scripts/install-system-deps.sh)" >&2
    exit 1
fi

# copy POM DEST [mvn -D...]: the POM's run-time dependencies into DEST, then DEST/.complete.
copy() {
    local pom=$1 dest=$2
    shift 2
    local tmp="$dest.partial"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    if ! log=$(mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
        -DoutputDirectory="$PWD/$tmp" -DincludeScope=runtime "$@" 2>&1); then
        rm -rf "$tmp"
        echo "$log" >&2
        return 1
    fi
    rm -rf "$dest"
    mv "$tmp" "$dest"
    touch "$dest/.complete"
}

for w in "${what[@]}"; do
    case "$w" in
    connect)
        dest=".tools/kafka-connect/$KAFKA_VERSION"
        if [ -e "$dest/.complete" ]; then
            echo "==> Kafka Connect $KAFKA_VERSION already in $dest"
            continue
        fi
        echo "==> fetching Kafka Connect $KAFKA_VERSION (connect-runtime, connect-file) into $dest"
        copy scripts/poms/kafka-connect.xml "$dest" -Dkafka.version="$KAFKA_VERSION" || {
            echo "fetch-interop-slow: Kafka Connect $KAFKA_VERSION could not be fetched" >&2
            exit 1
        }
        ;;
    spark)
        pyspark=$(.venv/bin/python -c 'import pyspark; print(pyspark.__version__)') || {
            echo "fetch-interop-slow: PySpark is not installed in .venv (make venv)" >&2
            exit 1
        }
        dest=".tools/spark-kafka/for-pyspark-$pyspark"
        if [ -e "$dest/.complete" ]; then
            echo "==> spark-sql-kafka for PySpark $pyspark already in $dest ($(cat "$dest/spark-version"))"
            continue
        fi
        echo "==> fetching spark-sql-kafka-0-10_2.13:$pyspark into $dest"
        if copy scripts/poms/spark-kafka.xml "$dest" -Dspark.version="$pyspark" 2>/dev/null; then
            echo "$pyspark" >"$dest/spark-version"
        elif [ "${pyspark%%.*}" = "${SPARK_KAFKA_FALLBACK%%.*}" ]; then
            echo "==> Maven Central has no spark-sql-kafka $pyspark; using $SPARK_KAFKA_FALLBACK"
            copy scripts/poms/spark-kafka.xml "$dest" -Dspark.version="$SPARK_KAFKA_FALLBACK" || {
                echo "fetch-interop-slow: spark-sql-kafka $SPARK_KAFKA_FALLBACK could not be fetched" >&2
                exit 1
            }
            echo "$SPARK_KAFKA_FALLBACK" >"$dest/spark-version"
        else
            echo "fetch-interop-slow: no spark-sql-kafka for PySpark $pyspark on Maven Central" >&2
            exit 1
        fi
        ;;
    *)
        echo "fetch-interop-slow: unknown argument $w (connect or spark)" >&2
        exit 2
        ;;
    esac
done
