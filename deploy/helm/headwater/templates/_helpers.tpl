{{/*
Names, labels and the computed broker configuration.  The broker's server.properties is
built here (not in the ConfigMap template) so the pod template can hash exactly the
configuration, and nothing else, into its checksum annotation.
*/}}

{{- define "headwater.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "headwater.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "headwater.selectorLabels" -}}
app.kubernetes.io/name: {{ include "headwater.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "headwater.labels" -}}
{{ include "headwater.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: headwater
{{- end -}}

{{/* Object names. */}}
{{- define "headwater.zookeeper.fullname" -}}{{ include "headwater.fullname" . }}-zookeeper{{- end -}}
{{- define "headwater.zookeeper.headless" -}}{{ include "headwater.fullname" . }}-zookeeper-headless{{- end -}}
{{- define "headwater.broker.fullname" -}}{{ include "headwater.fullname" . }}-broker{{- end -}}
{{- define "headwater.broker.headless" -}}{{ include "headwater.fullname" . }}-broker-headless{{- end -}}
{{- define "headwater.bootstrap" -}}{{ include "headwater.fullname" . }}-bootstrap{{- end -}}
{{- define "headwater.operator.fullname" -}}{{ include "headwater.fullname" . }}-operator{{- end -}}
{{- define "headwater.console.fullname" -}}{{ include "headwater.fullname" . }}-console{{- end -}}

{{- define "headwater.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "headwater.broker.image" -}}
{{- $repo := default .Values.image.repository .Values.brokers.image.repository -}}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.brokers.image.tag -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{/*
The software version the broker image runs, for the pod template's headwater.io/version
annotation: the broker tag with any leading "v", when it is a release version (1.2, 1.2.3,
1.2.3rc1) the broker would report.  Other tags (latest, a digest, a custom suffix) give ""
and the annotation is left out, so the operator's roll does not wait for a version no
broker will ever report.
*/}}
{{- define "headwater.broker.version" -}}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.brokers.image.tag | toString | trimPrefix "v" -}}
{{- if regexMatch "^[0-9]+(\\.[0-9]+){1,2}((a|b|rc)[0-9]+)?$" $tag -}}{{ $tag }}{{- end -}}
{{- end -}}

{{/* brokers.config."inter.broker.protocol.version" as text ("" when unset). */}}
{{- define "headwater.broker.protocolVersion" -}}
{{- $v := get .Values.brokers.config "inter.broker.protocol.version" -}}
{{- if not (kindIs "invalid" $v) -}}{{ include "headwater.propertyValue" $v }}{{- end -}}
{{- end -}}

{{- define "headwater.bootstrapAddress" -}}
{{- printf "%s.%s.svc.%s:%d" (include "headwater.bootstrap" .) .Release.Namespace .Values.clusterDomain (int .Values.brokers.port) -}}
{{- end -}}

{{/* zookeeper.connect: the external ensemble, or every server of ours, plus the chroot. */}}
{{- define "headwater.zookeeper.connect" -}}
{{- if .Values.zookeeper.external -}}
{{- if contains "/" .Values.zookeeper.external -}}
{{- .Values.zookeeper.external -}}
{{- else -}}
{{- printf "%s%s" .Values.zookeeper.external .Values.zookeeper.chroot -}}
{{- end -}}
{{- else -}}
{{- $servers := list -}}
{{- $zk := include "headwater.zookeeper.fullname" . -}}
{{- $headless := include "headwater.zookeeper.headless" . -}}
{{- range $i := until (int .Values.zookeeper.replicas) -}}
{{- $servers = append $servers (printf "%s-%d.%s.%s.svc.%s:2181" $zk $i $headless $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- printf "%s%s" (join "," $servers) .Values.zookeeper.chroot -}}
{{- end -}}
{{- end -}}

{{/* One properties value: YAML numbers arrive as float64, so whole numbers print as integers. */}}
{{- define "headwater.propertyValue" -}}
{{- if kindIs "float64" . -}}
{{- if eq . (float64 (int64 .)) -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/* The broker configuration as a dict: chart-computed keys, overridden by brokers.config. */}}
{{- define "headwater.broker.configDict" -}}
{{- $port := int .Values.brokers.port -}}
{{- $computed := dict
  "listeners" (printf "PLAINTEXT://0.0.0.0:%d" $port)
  "advertised.listeners" (printf "PLAINTEXT://${HOSTNAME}.%s.${POD_NAMESPACE}.svc.%s:%d" (include "headwater.broker.headless" .) .Values.clusterDomain $port)
  "log.dirs" "/var/lib/headwater/data"
  "zookeeper.connect" (include "headwater.zookeeper.connect" .)
  "metrics.port" (int .Values.metrics.brokerPort)
-}}
{{- if .Values.tls.enabled -}}
{{- $computed = merge (include "headwater.tls.configDict" . | fromYaml) $computed -}}
{{- end -}}
{{- if .Values.kafka.enabled -}}
{{- $map := get $computed "listener.security.protocol.map" | default "" -}}
{{- $computed = merge (include "headwater.kafka.configDict" (dict "root" . "map" $map) | fromYaml) $computed -}}
{{- end -}}
{{- $computed = merge (include "headwater.zkAcl.configDict" . | fromYaml) $computed -}}
{{- merge (deepCopy .Values.brokers.config) $computed | toYaml -}}
{{- end -}}

{{/* server.properties, keys sorted so the text (and its checksum) is deterministic. */}}
{{- define "headwater.broker.properties" -}}
{{- $cfg := include "headwater.broker.configDict" . | fromYaml -}}
# Rendered by the Headwater chart from brokers.config; broker.id comes from the pod ordinal.
{{- range $key := keys $cfg | sortAlpha }}
{{ $key }}={{ include "headwater.propertyValue" (get $cfg $key) }}
{{- end }}
{{ end -}}

{{/* Refuse configurations that could never form a healthy cluster. */}}
{{- define "headwater.validate" -}}
{{- $cfg := include "headwater.broker.configDict" . | fromYaml -}}
{{- $brokers := int .Values.brokers.replicas -}}
{{- range $key := list "default.replication.factor" "min.insync.replicas" -}}
{{- if hasKey $cfg $key -}}
{{- $v := int (get $cfg $key) -}}
{{- if gt $v $brokers -}}
{{- fail (printf "brokers.config.%s (%d) is larger than brokers.replicas (%d): no topic could be created or written with acks=all" $key $v $brokers) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey $cfg "min.insync.replicas") (hasKey $cfg "default.replication.factor") -}}
{{- if gt (int (get $cfg "min.insync.replicas")) (int (get $cfg "default.replication.factor")) -}}
{{- fail (printf "brokers.config.min.insync.replicas (%v) is larger than brokers.config.default.replication.factor (%v)" (get $cfg "min.insync.replicas") (get $cfg "default.replication.factor")) -}}
{{- end -}}
{{- end -}}
{{- include "headwater.kafka.validate" . -}}
{{- if hasKey $cfg "broker.id" -}}
{{- fail "brokers.config.broker.id must not be set: each broker's id is its StatefulSet ordinal" -}}
{{- end -}}
{{- end -}}


{{/* ZOO_SERVERS of the official image: "server.1=host:2888:3888;2181 server.2=...". */}}
{{- define "headwater.zookeeper.servers" -}}
{{- $servers := list -}}
{{- $zk := include "headwater.zookeeper.fullname" . -}}
{{- $headless := include "headwater.zookeeper.headless" . -}}
{{- range $i := until (int .Values.zookeeper.replicas) -}}
{{- $servers = append $servers (printf "server.%d=%s-%d.%s.%s.svc.%s:2888:3888;2181" (add1 $i) $zk $i $headless $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- join " " $servers -}}
{{- end -}}
