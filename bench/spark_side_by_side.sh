#!/usr/bin/env bash
# Spark reading real Apache Kafka through Spark's own Kafka source (spark-sql-kafka-0-10) vs
# Spark reading Headwater through headwater_spark, in ONE Spark session (local[2]), same data
# shape, same machine, alternating rounds. Run from the project checkout (needs its .venv).
#   bash bench/spark_side_by_side.sh [records] [size] [partitions]
# Prints one line: the median rows/s of three rounds of each, and their ratio headwater/kafka;
# a line for headwater read with the user-specified schema "value binary" (only that column
# goes to the JVM); then each read's median CPU per row in Spark's JVM and its Python workers
# (/proc of this script's Python descendants; the brokers are not counted).
# The jars come from Maven Central through bench/kafka-pom.xml and bench/spark-kafka-pom.xml.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); proj=$(pwd)
kwork=${KAFKA_ANCHOR_DIR:-${TMPDIR:-/tmp}/kafka-anchor}; swork=${SPARK_ANCHOR_DIR:-${TMPDIR:-/tmp}/spark-kafka-anchor}
N=${1:-1000000}; S=${2:-1024}; P=${3:-4}
# Ports of the Kafka anchor (another run on the machine may hold the defaults).
KPORT=${KAFKA_ANCHOR_PORT:-9192}; ZPORT=${ZK_ANCHOR_PORT:-2191}
HW="$proj/.venv/bin/headwater"; PY="$proj/.venv/bin/python"
[ -x "$HW" ] || { echo "run from the project checkout after its make test"; exit 2; }
[ -d "$kwork/lib" ] || (cd "$here" && mvn -q -f kafka-pom.xml dependency:copy-dependencies -DoutputDirectory="$kwork/lib" -DincludeScope=runtime)
[ -d "$swork/lib" ] || (cd "$here" && mvn -q -f spark-kafka-pom.xml dependency:copy-dependencies -DoutputDirectory="$swork/lib" -DincludeScope=runtime)
CP="$kwork/lib/*"
mkdir -p "$kwork/zk"; rm -rf "$kwork/zk/data" "$kwork/kafka-logs-s"
printf 'tickTime=2000\ndataDir=%s/zk/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' "$kwork" "$ZPORT" > "$kwork/zk/zoo.cfg"
ZOOCFGDIR="$kwork/zk" ZOO_LOG_DIR="$kwork/zk" /usr/share/zookeeper/bin/zkServer.sh start "$kwork/zk/zoo.cfg" >/dev/null
printf 'broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:%s\nlog.dirs=%s/kafka-logs-s\nzookeeper.connect=127.0.0.1:%s/kafka\noffsets.topic.replication.factor=1\nauto.create.topics.enable=false\n' "$KPORT" "$kwork" "$ZPORT" > "$kwork/server-s.properties"
java -Xmx1g -cp "$CP" kafka.Kafka "$kwork/server-s.properties" >"$kwork/kafka-s.log" 2>&1 & kpid=$!
rm -rf "$swork/hw"
cleanup() { kill $kpid 2>/dev/null; wait $kpid 2>/dev/null; ZOOCFGDIR="$kwork/zk" /usr/share/zookeeper/bin/zkServer.sh stop "$kwork/zk/zoo.cfg" >/dev/null 2>&1; "$HW" dev down --data-dir "$swork/hw" >/dev/null 2>&1; }
trap cleanup EXIT
for _ in $(seq 90); do grep -q "started (kafka.server.KafkaServer)" "$kwork/kafka-s.log" && break; sleep 1; done
java -cp "$CP" org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$KPORT" --create --topic sp --partitions "$P" --replication-factor 1 >/dev/null || { echo "kafka: topic not created"; exit 1; }
java -cp "$CP" org.apache.kafka.tools.ProducerPerformance --topic sp --num-records "$N" --record-size "$S" --throughput -1 \
  --producer-props bootstrap.servers="127.0.0.1:$KPORT" acks=1 batch.size=1048576 linger.ms=5 >/dev/null
"$HW" dev up --brokers 1 --data-dir "$swork/hw" --output json > "$swork/hw-up.json"
HB=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["bootstrap"])' "$swork/hw-up.json")
"$HW" topics create sp --partitions "$P" --replication-factor 1 --bootstrap "$HB" >/dev/null
"$HW" perf produce --topic sp --num-records "$N" --record-size "$S" --acks 1 --bootstrap "$HB" >/dev/null 2>&1
jars=$(ls "$swork"/lib/{spark-sql-kafka,spark-token-provider,kafka-clients,commons-pool2}*.jar | paste -sd,)
PYSPARK_PYTHON="$PY" "$PY" - "$jars" "$HB" "$N" "127.0.0.1:$KPORT" <<'PY'
import os, sys, time
from pyspark.sql import SparkSession, functions as F
TICK = os.sysconf("SC_CLK_TCK")
def cpu():
    """CPU seconds of this process's descendants (Spark's JVM, its Python workers) by kind:
    each live one's own time plus what it reaped."""
    procs = {}
    for e in filter(str.isdigit, os.listdir("/proc")):
        try:
            raw = open(f"/proc/{e}/stat").read()
        except OSError:
            continue
        f = raw[raw.rindex(")") + 2:].split()
        procs[int(e)] = (raw[raw.index("(") + 1:raw.rindex(")")], int(f[1]), sum(map(int, f[11:15])) / TICK)
    out = {"java": 0.0, "python": 0.0}
    for pid, (comm, _, t) in procs.items():
        p = procs[pid][1]
        while p > 1 and p != os.getpid():
            p = procs.get(p, ("", 0, 0))[1]
        if p == os.getpid():
            out["java" if comm == "java" else "python"] += t
    return out
jars, hb, n, kb = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
spark = (SparkSession.builder.master("local[2]").config("spark.jars", jars)
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
import headwater_spark; headwater_spark.register(spark)
cpus = {"kafka": [], "headwater": [], "headwater value-only": []}
def read(fmt, opts, label=None, schema=None):
    c0 = cpu(); t = time.perf_counter()
    reader = spark.read.format(fmt).options(**opts)
    if schema is not None:  # a user-specified schema naming only value (headwater only)
        reader = reader.schema(schema)
    row = reader.load().select(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect()[0]
    dt = time.perf_counter() - t; c1 = cpu()
    assert row["n"] == n, f"{fmt}: read {row['n']} rows, expected {n}"
    cpus[label or fmt].append({k: (c1[k] - c0[k]) / n * 1e6 for k in c0})
    return n / dt
kafka = {"kafka.bootstrap.servers": kb, "subscribe": "sp"}
hw = {"bootstrap.servers": hb, "subscribe": "sp"}
def narrow():
    return read("headwater", hw, "headwater value-only", "value binary")
read("kafka", kafka); read("headwater", hw); narrow()  # warm-up: JIT, Python workers
ks, hs, vs = [], [], []
for _ in range(3):
    ks.append(read("kafka", kafka)); hs.append(read("headwater", hw)); vs.append(narrow())
ks.sort(); hs.sort(); vs.sort()
print(f"spark read {n} rows: kafka source median {ks[1]:,.0f} rows/s | headwater source median {hs[1]:,.0f} rows/s | ratio {hs[1]/ks[1]:.2f}")
print(f"  headwater with schema 'value binary': median {vs[1]:,.0f} rows/s | ratio {vs[1]/ks[1]:.2f}")
for fmt, runs in cpus.items():
    runs = runs[1:]  # not the warm-up
    med = {k: sorted(r[k] for r in runs)[len(runs) // 2] for k in ("java", "python")}
    print(f"  {fmt} source CPU per row (median): JVM {med['java']:.2f} us, Python workers {med['python']:.2f} us")
spark.stop()
PY
