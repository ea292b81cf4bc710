#!/bin/bash
# Spark-on-Kubernetes entrypoint (after apache/spark's): the driver pod runs `driver ...`,
# executor pods run `executor`; anything else is run as given.
set -eo pipefail
SPARK_CLASSPATH="$SPARK_HOME/jars/*${SPARK_EXTRA_CLASSPATH:+:$SPARK_EXTRA_CLASSPATH}"
mapfile -t JAVA_OPTS < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/[^=]*=\(.*\)/\1/')
case "$1" in
  driver)
    shift 1
    exec /usr/bin/tini -s -- "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift 1
    exec /usr/bin/tini -s -- "$JAVA_HOME/bin/java" "${JAVA_OPTS[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" -cp "$SPARK_CLASSPATH" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  *)
    exec /usr/bin/tini -s -- "$@"
    ;;
esac
