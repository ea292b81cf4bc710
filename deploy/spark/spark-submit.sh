#!/usr/bin/env bash
# Run deploy/spark/read_topic.py on Kubernetes with spark-submit (cluster mode), reading a
# topic from the Helm-installed Headwater cluster (release "hw" in namespace "headwater").
#
#   NAMESPACE=headwater IMAGE=headwater-spark:0.1.0 TOPIC=orders deploy/spark/spark-submit.sh
#
# Needs a service account allowed to create pods (kubectl create serviceaccount spark;
# kubectl create rolebinding spark --clusterrole=edit --serviceaccount=$NAMESPACE:spark).
set -euo pipefail
NAMESPACE=${NAMESPACE:-headwater}
IMAGE=${IMAGE:-headwater-spark:0.1.0}
TOPIC=${TOPIC:-orders}
BOOTSTRAP=${BOOTSTRAP:-hw-headwater-bootstrap.${NAMESPACE}.svc:9092}
APISERVER=${APISERVER:-$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')}

exec spark-submit \
  --master "k8s://${APISERVER}" \
  --deploy-mode cluster \
  --name headwater-read-topic \
  --conf spark.kubernetes.namespace="${NAMESPACE}" \
  --conf spark.kubernetes.container.image="${IMAGE}" \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=spark \
  --conf spark.executor.instances=2 \
  --conf spark.executor.cores=1 \
  --conf spark.executor.memory=1g \
  --conf spark.kubernetes.pyspark.pythonVersion=3 \
  local:///opt/spark/examples/headwater/read_topic.py \
  --bootstrap "${BOOTSTRAP}" --topic "${TOPIC}" --min-partitions 4
