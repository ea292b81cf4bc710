#!/usr/bin/env bash
# Headwater vs real Apache Kafka 3.9.1 (ZooKeeper mode), same machine, same run, same workloads,
# each measured with its own perf tools (Kafka's ProducerPerformance/ConsumerPerformance/
# EndToEndLatency, `headwater perf produce|consume|end-to-end`). Run from the project checkout
# (needs its .venv):
#   bash bench/kafka_side_by_side.sh [quick] [extra] [door] [txn] [p300]
#     quick: smaller record counts
#     extra: also the 300-partition rows (3 brokers, RF=3 acks=all, produce and consume N100
#            records of 100 B), and the Kafka-door rows: Kafka's own ProducerPerformance and ConsumerPerformance
#            pointed at Headwater's Kafka-protocol listener (the `kafka_bootstrap` that
#            `headwater dev up` prints) beside the same tools pointed at Apache Kafka, the
#            rows above's workloads (produce and consume 100 B and 1 KiB, 1 broker acks=1;
#            produce and consume 100 B and 1 KiB, 3 brokers RF=3 acks=all
#            min.insync.replicas=2; counts N100, N1K, NRF, NRF100); each door row also
#            gives door/gRPC, its
#            figure over `headwater perf`'s through the gRPC door in the same cluster; and
#            the transactional row: ProducerPerformance --transactional-id
#            --transaction-duration-ms 100 (1 KiB, acks=all, 1 broker) at Apache Kafka and at
#            the Kafka door, `headwater perf produce --transactional-id` at the gRPC door
#     door:  only the Kafka-door rows (with the Kafka and gRPC figures they compare with)
#     txn:   only the transactional Kafka-door row
#     p300:  only the 300-partition rows of extra
# The consume rows: Kafka's ConsumerPerformance always subscribes as a group member (a random
# perf-consumer-NNNNN group unless --group names one); `headwater perf consume` assigns the
# partition unless given --group. The "group (subscribe)" rows give both tools the same named
# group (new, so reading from the earliest offset); both leave the group join out of the rate.
# Headwater's one-broker cluster reads its warm-up topic as a group before the timed rows, so
# that its group rows, like Kafka's, find __consumer_offsets made: Kafka's first consume row
# (its tool always joins a group) makes it there, and the first group of a fresh Headwater
# cluster read ~20% slower than the next ones (its broker busy with the 50 new partitions).
# Each consume row starts after a `sync`, so that the kernel's writeback of what the rows
# before wrote (dirty pages expire after 30 s) does not run during it.
# Prints one table line per workload: kafka figure, headwater figure, ratio headwater/kafka
# (for latency rows: kafka/headwater of the average, so > 1 means headwater is faster too).
# The Kafka jars come from Maven Central through bench/kafka-pom.xml.
# End-to-end latency: Kafka's EndToEndLatency sends one 100 B record, waits for the ack, polls
# it back and times the round trip, one at a time (it has no fixed-rate mode); `headwater perf
# end-to-end` does the same by default. Kafka's tool prints p50/p99 in whole ms (truncated),
# its average to 0.1 us. A last row, headwater only, times each record send->poll at a fixed
# rate (--throughput $E2E_RATE records/s), which Kafka 3.9.1 ships no tool for.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd); proj=$(pwd); work=${KAFKA_ANCHOR_DIR:-${TMPDIR:-/tmp}/kafka-anchor}
HW="$proj/.venv/bin/headwater"
[ -x "$HW" ] || { echo "run from the project checkout after its make test"; exit 2; }
if [ ! -d "$work/lib" ]; then (cd "$here" && mvn -q -f kafka-pom.xml dependency:copy-dependencies -DoutputDirectory="$work/lib" -DincludeScope=runtime); fi
CP="$work/lib/*"
N100=${N100:-2000000}; N1K=${N1K:-500000}; NRF=${NRF:-300000}; NRF100=${NRF100:-1000000}; NE2E=${NE2E:-10000}; E2E_RATE=${E2E_RATE:-1000}
NTX=${NTX:-300000}; TXN_MS=${TXN_MS:-100}
has_arg() { case " $ARGS " in *" $1 "*) true;; *) false;; esac; }
ARGS="$*"
for a in $ARGS; do case "$a" in quick|extra|door|txn|p300) ;; *) echo "unknown argument $a (quick, extra, door, txn, p300)"; exit 2;; esac; done
has_arg quick && { N100=500000; N1K=150000; NRF=100000; NRF100=300000; NE2E=2000; NTX=100000; }
results="$work/results.txt"; : > "$results"

zk_start() {
  mkdir -p "$work/zk"; rm -rf "$work/zk/data"
  printf 'tickTime=2000\ndataDir=%s/zk/data\nclientPort=2191\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n' "$work" > "$work/zk/zoo.cfg"
  ZOOCFGDIR="$work/zk" ZOO_LOG_DIR="$work/zk" /usr/share/zookeeper/bin/zkServer.sh start "$work/zk/zoo.cfg" >/dev/null
}
zk_stop() { ZOOCFGDIR="$work/zk" /usr/share/zookeeper/bin/zkServer.sh stop "$work/zk/zoo.cfg" >/dev/null 2>&1; }
kpids=()
kafka_up() {  # $1 = broker count
  zk_start
  # Kafka's jars ship no log4j config: without one the broker logs nothing and the wait
  # below for its "started" line ran out its 90 s every time.
  printf 'log4j.rootLogger=WARN, out\nlog4j.appender.out=org.apache.log4j.ConsoleAppender\nlog4j.appender.out.layout=org.apache.log4j.PatternLayout\nlog4j.appender.out.layout.ConversionPattern=[%%d] %%p %%m (%%c)%%n\nlog4j.logger.kafka.server.KafkaServer=INFO\n' > "$work/log4j.properties"
  for i in $(seq 0 $(($1 - 1))); do
    rm -rf "$work/kafka-logs-$i"
    printf 'broker.id=%s\nlisteners=PLAINTEXT://127.0.0.1:%s\nlog.dirs=%s/kafka-logs-%s\nzookeeper.connect=127.0.0.1:2191/kafka\nnum.partitions=1\noffsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\nauto.create.topics.enable=false\n' \
      "$i" $((9192 + i)) "$work" "$i" > "$work/server-$i.properties"
    java -Xmx1g -Dlog4j.configuration="file:$work/log4j.properties" -cp "$CP" kafka.Kafka "$work/server-$i.properties" >"$work/kafka-$i.log" 2>&1 & kpids+=($!)
  done
  for i in $(seq 0 $(($1 - 1))); do
    for _ in $(seq 90); do grep -q "started (kafka.server.KafkaServer)" "$work/kafka-$i.log" && break; sleep 1; done
    grep -q "started (kafka.server.KafkaServer)" "$work/kafka-$i.log" || echo "kafka broker $i: no 'started' line in 90 s ($work/kafka-$i.log)" >&2
  done
}
kafka_down() { for p in "${kpids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; kpids=(); zk_stop; }
KB=127.0.0.1:9192   # where kprod/kcons point: Apache Kafka, or Headwater's Kafka door
ktopic() { java -cp "$CP" org.apache.kafka.tools.TopicCommand --bootstrap-server 127.0.0.1:9192 --create --topic "$1" --partitions "${P:-1}" --replication-factor "$2" ${3:+--config $3} >/dev/null || { echo "kafka: topic $1 not created"; exit 1; }; }
kprod() {  # topic n size acks -> records/s
  java -cp "$CP" org.apache.kafka.tools.ProducerPerformance --topic "$1" --num-records "$2" --record-size "$3" --throughput -1 \
    --producer-props bootstrap.servers="$KB" acks="$4" batch.size=1048576 linger.ms=5 max.request.size=2097152 | tail -1 |
    sed -E 's/.* ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency.*/\1 \2/'
}
kprodtx() {  # topic n size -> records/s MB/s: transactions of TXN_MS ms (acks=all)
  java -cp "$CP" org.apache.kafka.tools.ProducerPerformance --topic "$1" --num-records "$2" --record-size "$3" --throughput -1 \
    --producer-props bootstrap.servers="$KB" acks=all batch.size=1048576 linger.ms=5 max.request.size=2097152 \
    --transactional-id "perf-$1-$$" --transaction-duration-ms "$TXN_MS" | tail -1 |
    sed -E 's/.* ([0-9.]+) records\/sec \(([0-9.]+) MB\/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency.*/\1 \2/'
}
kcons() {  # topic n [group] -> records/s MB/s (the tool always subscribes, by default as perf-consumer-NNNNN)
  java -cp "$CP" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$KB" --topic "$1" --messages "$2" ${3:+--group $3} 2>/dev/null | tail -1 |
    awk -F', *' '{print $10, $9}'   # fetch.nMsg.sec fetch.MB.sec: group join time left out
}
ke2e() {  # topic n -> avg p50 p99 (ms; p50/p99 whole ms, as the tool prints them)
  java -cp "$CP" org.apache.kafka.tools.EndToEndLatency 127.0.0.1:9192 "$1" "$2" 1 100 2>/dev/null |
    awk '/^Avg latency:/ {avg=$3} /^Percentiles:/ {gsub(",", ""); p50=$4; p99=$7} END {print avg, p50, p99}'
}
hw_up() { rm -rf "$work/hw"; "$HW" dev up --brokers "$1" --data-dir "$work/hw" --output json > "$work/hw-up.json"; export HEADWATER_BOOTSTRAP=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["bootstrap"])' "$work/hw-up.json"); }
hw_down() { "$HW" dev down --data-dir "$work/hw" >/dev/null 2>&1; }
htopic() { "$HW" topics create "$1" --partitions "${P:-1}" --replication-factor "$2" ${3:+--config $3} >/dev/null || { echo "headwater: topic $1 not created"; exit 1; }; }
hprod() { "$HW" perf produce --topic "$1" --num-records "$2" --record-size "$3" --acks "$4" --batch-size 1048576 --linger-ms 5 --output json | tail -1 |
  python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["records_per_s"], d["mb_per_s"])'; }
hprodtx() { "$HW" perf produce --topic "$1" --num-records "$2" --record-size "$3" --acks all --batch-size 1048576 --linger-ms 5 \
  --transactional-id "perf-$1-$$" --transaction-duration-ms "$TXN_MS" --output json | tail -1 |
  python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["records_per_s"], d["mb_per_s"])'; }
hcons() {  # topic n [group] -> records/s MB/s (without a group: assign(), no group)
  "$HW" perf consume --topic "$1" --messages "$2" ${3:+--group $3} --output json | tail -1 |
  python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["records_per_s"], d["mb_per_s"])'; }
he2e() {  # topic n [records/s] -> avg p50 p99 (ms)
  "$HW" perf end-to-end --topic "$1" --num-records "$2" --record-size 100 --acks 1 ${3:+--throughput $3} --output json | tail -1 |
  python3 -c 'import json,sys; d=json.loads(sys.stdin.read())["latency_ms"]; print(d["avg"], d["p50"], d["p99"])'; }
lrow() { # name kafka(avg p50 p99) headwater(avg p50 p99), ms
  python3 - "$@" <<'PY' | tee -a "$results"
import sys
name, ka, k50, k99, ha, h50, h99 = (sys.argv[1:] + [""] * 7)[:7]
f = lambda x: float(x) if x not in ("", "None", "-") else float("nan")
kafka = f"kafka avg {f(ka):6.2f} p50 {f(k50):5.1f} p99 {f(k99):5.1f} ms" if ka != "-" else f"kafka {'(no such tool)':>32s}"
ratio = f"ratio {f(ka)/f(ha):.2f} (kafka/headwater avg)" if ka != "-" else ""
print(f"{name:34s} {kafka} | headwater avg {f(ha):6.2f} p50 {f(h50):5.2f} p99 {f(h99):5.2f} ms | {ratio}")
PY
}
row() { # name kafka(rec/s MB/s) headwater(rec/s MB/s)
  python3 - "$@" <<'PY' | tee -a "$results"
import sys
name, kr, km, hr, hm = sys.argv[1:6]
f = lambda x: float(x) if x not in ("", "None") else float("nan")
print(f"{name:34s} kafka {f(kr):>10,.0f} rec/s {f(km):7.1f} MB/s | headwater {f(hr):>10,.0f} rec/s {f(hm):7.1f} MB/s | ratio {f(hr)/f(kr):.2f}")
PY
}

door_row() { # name kafka(rec/s MB/s) door(rec/s MB/s) grpc(rec/s MB/s)
  python3 - "$@" <<'PY' | tee -a "$results"
import sys
name, kr, km, dr, dm, gr, gm = (sys.argv[1:] + [""] * 7)[:7]
f = lambda x: float(x) if x not in ("", "None") else float("nan")
print(f"{name:34s} kafka {f(kr):>10,.0f} rec/s {f(km):7.1f} MB/s | door {f(dr):>10,.0f} rec/s {f(dm):7.1f} MB/s | ratio {f(dr)/f(kr):.2f} | door/gRPC {f(dr)/f(gr):.2f} (gRPC {f(gr):,.0f} rec/s)")
PY
}
kafka_door() { KB=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1])).get("kafka_bootstrap") or "")' "$work/hw-up.json")
  [ -n "$KB" ] || { echo "headwater dev up reported no kafka_bootstrap"; exit 1; }; }

# Transactions through the Kafka door: Kafka's ProducerPerformance committing every TXN_MS ms
# against Apache Kafka and against Headwater's Kafka listener, `headwater perf produce
# --transactional-id` through the gRPC door of the same cluster for door/gRPC (1 broker).
txn_rows() {
  kafka_up 1; ktopic atx 1; ktopic warmtx 1
  kprodtx warmtx 100000 1024 >/dev/null
  local kt dt gt; kt=$(kprodtx atx "$NTX" 1024)
  kafka_down
  hw_up 1; kafka_door; htopic ktx 1; htopic gtx 1; htopic warmtx 1
  kprodtx warmtx 50000 1024 >/dev/null
  dt=$(kprodtx ktx "$NTX" 1024); gt=$(hprodtx gtx "$NTX" 1024)
  hw_down; KB=127.0.0.1:9192
  door_row "Kafka tools: 1 KiB txn ${TXN_MS} ms (door)" $kt $dt $gt
}

trap 'kafka_down; hw_down' EXIT
if has_arg txn; then
  txn_rows; exit 0
fi
if ! has_arg door && ! has_arg p300; then
# 1 broker, acks=1
kafka_up 1; ktopic a100 1; ktopic a1k 1; ktopic warm 1; ktopic e2e 1
kprod warm 1000000 100 1 >/dev/null   # JIT warm-up of the broker before anything is timed
k1=$(kprod a100 "$N100" 100 1); sync; k2=$(kcons a100 "$N100"); k3=$(kprod a1k "$N1K" 1024 1); sync; k4=$(kcons a1k "$N1K")
sync; k2g=$(kcons a100 "$N100" sbs-group-a100); k4g=$(kcons a1k "$N1K" sbs-group-a1k)
sync; ke=$(ke2e e2e "$NE2E")   # sync: the GBs just written back first, not during the latency rows
kafka_down
hw_up 1; htopic a100 1; htopic a1k 1; htopic warm 1; htopic e2e 1; htopic e2erate 1
hprod warm 200000 100 1 >/dev/null
hcons warm 1000 sbs-warm-group >/dev/null   # makes __consumer_offsets (see the top)
h1=$(hprod a100 "$N100" 100 1); sync; h2=$(hcons a100 "$N100"); h3=$(hprod a1k "$N1K" 1024 1); sync; h4=$(hcons a1k "$N1K")
sync; h2g=$(hcons a100 "$N100" sbs-group-a100); h4g=$(hcons a1k "$N1K" sbs-group-a1k)
sync; he=$(he2e e2e "$NE2E"); sync; hr=$(he2e e2erate "$NE2E" "$E2E_RATE")
hw_down
row "produce 100 B, 1 broker, acks=1" $k1 $h1
row "consume 100 B, 1 broker" $k2 $h2
row "produce 1 KiB, 1 broker, acks=1" $k3 $h3
row "consume 1 KiB, 1 broker" $k4 $h4
row "consume 100 B, group (subscribe)" $k2g $h2g
row "consume 1 KiB, group (subscribe)" $k4g $h4g
lrow "end-to-end 100 B, one at a time" $ke $he
lrow "end-to-end 100 B, ${E2E_RATE}/s (hw only)" - - - $hr
# 3 brokers, RF=3, acks=all, min.insync.replicas=2
kafka_up 3; ktopic rf3 3 min.insync.replicas=2; ktopic warm3 3 min.insync.replicas=2
kprod warm3 200000 1024 all >/dev/null
k5=$(kprod rf3 "$NRF" 1024 all)
kafka_down
hw_up 3; htopic rf3 3 min.insync.replicas=2; htopic warm3 3 min.insync.replicas=2
hprod warm3 100000 1024 all >/dev/null
h5=$(hprod rf3 "$NRF" 1024 all)
hw_down
row "produce 1 KiB, 3 brokers RF=3 acks=all" $k5 $h5
fi

has_arg extra || has_arg door || has_arg p300 || exit 0
if has_arg extra || has_arg p300; then
# many partitions: 3 brokers, 300 partitions RF=3, acks=all min.insync.replicas=2, N100 x 100 B
# (the consume row: `headwater perf consume` assigns all 300 partitions; Kafka's tool subscribes)
kafka_up 3; P=300 ktopic p300 3 min.insync.replicas=2; ktopic warm3 3 min.insync.replicas=2
kprod warm3 200000 1024 all >/dev/null
k9=$(kprod p300 "$N100" 100 all); sync; k10=$(kcons p300 "$N100")
kafka_down
hw_up 3; P=300 htopic p300 3 min.insync.replicas=2; htopic warm3 3 min.insync.replicas=2
hprod warm3 100000 1024 all >/dev/null
h9=$(hprod p300 "$N100" 100 all); sync; h10=$(hcons p300 "$N100")
hw_down
row "produce 100 B, 300 partitions RF=3 all" $k9 $h9
row "consume 100 B, 300 partitions RF=3" $k10 $h10
has_arg extra || has_arg door || exit 0
fi
txn_rows
# The Kafka door: Kafka's own perf tools against Headwater's Kafka listener (1 broker, acks=1),
# and `headwater perf` through the gRPC door of the same cluster for door/gRPC.
if [ -z "${k1:-}" ]; then   # `door` alone: Apache Kafka's figures for the same workloads
  kafka_up 1; ktopic a100 1; ktopic a1k 1; ktopic warm 1
  kprod warm 1000000 100 1 >/dev/null
  k1=$(kprod a100 "$N100" 100 1); k2=$(kcons a100 "$N100"); k3=$(kprod a1k "$N1K" 1024 1); k4=$(kcons a1k "$N1K")
  kafka_down
fi
hw_up 1; kafka_door
htopic ka100 1; htopic ka1k 1; htopic ga100 1; htopic ga1k 1; htopic warm 1
kprod warm 200000 100 1 >/dev/null   # the broker's first Kafka-protocol traffic, not timed
d1=$(kprod ka100 "$N100" 100 1); d2=$(kcons ka100 "$N100"); d3=$(kprod ka1k "$N1K" 1024 1); d4=$(kcons ka1k "$N1K")
g1=$(hprod ga100 "$N100" 100 1); g2=$(hcons ga100 "$N100"); g3=$(hprod ga1k "$N1K" 1024 1); g4=$(hcons ga1k "$N1K")
hw_down; KB=127.0.0.1:9192
# 3 brokers, RF=3, acks=all, min.insync.replicas=2
# (the issue's rows: produce and consume 100 B and 1 KiB at RF=3; NRF records of 1 KiB,
# NRF100 of 100 B)
kafka_up 3; ktopic rf3 3 min.insync.replicas=2; ktopic rf3s 3 min.insync.replicas=2
ktopic warm3 3 min.insync.replicas=2
kprod warm3 200000 1024 all >/dev/null
k5d=$(kprod rf3 "$NRF" 1024 all); k5=${k5:-$k5d}   # rf3 filled for the consume row either way
k6=$(kcons rf3 "$NRF"); k7=$(kprod rf3s "$NRF100" 100 all); k8=$(kcons rf3s "$NRF100")
kafka_down
hw_up 3; kafka_door
for t in krf3 grf3 krf3s grf3s warm3; do htopic $t 3 min.insync.replicas=2; done
kprod warm3 100000 1024 all >/dev/null
d5=$(kprod krf3 "$NRF" 1024 all); g5=$(hprod grf3 "$NRF" 1024 all)
d6=$(kcons krf3 "$NRF"); g6=$(hcons grf3 "$NRF")
d7=$(kprod krf3s "$NRF100" 100 all); g7=$(hprod grf3s "$NRF100" 100 all)
d8=$(kcons krf3s "$NRF100"); g8=$(hcons grf3s "$NRF100")
hw_down; KB=127.0.0.1:9192
door_row "Kafka tools: produce 100 B (door)" $k1 $d1 $g1
door_row "Kafka tools: consume 100 B (door)" $k2 $d2 $g2
door_row "Kafka tools: produce 1 KiB (door)" $k3 $d3 $g3
door_row "Kafka tools: consume 1 KiB (door)" $k4 $d4 $g4
door_row "Kafka tools: 1 KiB RF=3 all (door)" $k5 $d5 $g5
door_row "Kafka tools: consume 1 KiB RF=3 (door)" $k6 $d6 $g6
door_row "Kafka tools: 100 B RF=3 all (door)" $k7 $d7 $g7
door_row "Kafka tools: consume 100 B RF=3 (door)" $k8 $d8 $g8
