#!/usr/bin/env bash
# Run an example job of deploy/spark on Kubernetes with spark-submit (cluster mode), against
# the Helm-installed Headwater cluster (release "hw" in namespace "headwater"):
#   read_topic.py   (the default) reads TOPIC in bulk and prints per-partition counts
#   copy_topic.py   copies TOPIC into another topic, committing to a group (JOB_ARGS)
#
#   NAMESPACE=headwater IMAGE=headwater-spark:0.1.0 TOPIC=orders deploy/spark/spark-submit.sh
#   JOB=copy_topic.py JOB_ARGS="--output orders-upper --group spark-copy" deploy/spark/spark-submit.sh
#
# Needs a service account allowed to create pods (kubectl create serviceaccount spark;
# kubectl create rolebinding spark --clusterrole=edit --serviceaccount=$NAMESPACE:spark).
set -euo pipefail
NAMESPACE=${NAMESPACE:-headwater}
IMAGE=${IMAGE:-headwater-spark:0.1.0}
TOPIC=${TOPIC:-orders}
JOB=${JOB:-read_topic.py}
read -r -a JOB_ARGS <<< "${JOB_ARGS:-}"
BOOTSTRAP=${BOOTSTRAP:-hw-headwater-bootstrap.${NAMESPACE}.svc:9092}
APISERVER=${APISERVER:-$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')}
# With the chart's TLS (the default): CLIENT_SECRET names a tls User's Secret (ca.crt,
# user-keystore.pem), mounted in the driver and executors and given to the connector as
# Kafka's kafka.security.protocol / kafka.ssl.* options.
SECURITY=()
if [[ -n "${CLIENT_SECRET:-}" ]]; then
  CERTS=/etc/headwater/client-cert
  SECURITY=(
    --conf "spark.kubernetes.driver.secrets.${CLIENT_SECRET}=${CERTS}"
    --conf "spark.kubernetes.executor.secrets.${CLIENT_SECRET}=${CERTS}"
  )
  JOB_ARGS+=(--option kafka.security.protocol=SSL
             --option "kafka.ssl.truststore.location=${CERTS}/ca.crt"
             --option "kafka.ssl.keystore.location=${CERTS}/user-keystore.pem")
fi

exec spark-submit \
  --master "k8s://${APISERVER}" \
  --deploy-mode cluster \
  --name "headwater-${JOB%.py}" \
  --conf spark.kubernetes.namespace="${NAMESPACE}" \
  --conf spark.kubernetes.container.image="${IMAGE}" \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=spark \
  --conf spark.executor.instances=2 \
  --conf spark.executor.cores=1 \
  --conf spark.executor.memory=1g \
  --conf spark.kubernetes.pyspark.pythonVersion=3 \
  --conf spark.kubernetes.driver.request.cores=100m \
  --conf spark.kubernetes.executor.request.cores=100m \
  "${SECURITY[@]}" \
  "local:///opt/spark/examples/headwater/${JOB}" \
  --bootstrap "${BOOTSTRAP}" --topic "${TOPIC}" --min-partitions 4 "${JOB_ARGS[@]}"
