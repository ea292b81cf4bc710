{{/*
ZooKeeper ACLs of the brokers' znodes (Kafka's zookeeper.set.acl; issue 18).

With zookeeper.acl.enabled every broker authenticates to ZooKeeper with the digest scheme
as zookeeper.acl.username and creates its znodes "creator ALL + world READ" (credentials
and ACLs: creator ALL only), so nothing else reaching ZooKeeper can change the cluster's
state.  The password never appears in a ConfigMap, in server.properties or in the pod's
args: the broker reads HEADWATER_ZOOKEEPER_DIGEST_PASSWORD (the environment form of
zookeeper.digest.password) from a Secret, the chart's own (generated once, kept across
upgrades with `lookup` and kept on uninstall: ZooKeeper's volumes outlive the release, and
a new password would lock the brokers out of the znodes they made) or
zookeeper.acl.existingSecret (key "password").  ZooKeeper itself needs nothing: its digest
provider is always on.
*/}}

{{- define "headwater.zkAcl.secret" -}}
{{- .Values.zookeeper.acl.existingSecret | default (printf "%s-zookeeper-digest" (include "headwater.fullname" .)) -}}
{{- end -}}

{{/* Broker settings the chart computes when zookeeper.acl.enabled (merged under brokers.config). */}}
{{- define "headwater.zkAcl.configDict" -}}
{{- if .Values.zookeeper.acl.enabled -}}
{{- dict "zookeeper.set.acl" true "zookeeper.digest.username" .Values.zookeeper.acl.username | toYaml -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* The broker container's password variable, from the Secret. */}}
{{- define "headwater.zkAcl.brokerEnv" -}}
{{- if .Values.zookeeper.acl.enabled }}
- name: HEADWATER_ZOOKEEPER_DIGEST_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "headwater.zkAcl.secret" . }}, key: password}
{{- end }}
{{- end -}}

{{/* The password must never land in the ConfigMap: refuse it in brokers.config. */}}
{{- define "headwater.zkAcl.validate" -}}
{{- if hasKey .Values.brokers.config "zookeeper.digest.password" -}}
{{- fail "brokers.config.zookeeper.digest.password would put the password in the brokers' ConfigMap: put it in a Secret (key password) named by zookeeper.acl.existingSecret, or let the chart generate one" -}}
{{- end -}}
{{- end -}}
