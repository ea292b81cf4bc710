{{/*
The brokers' Kafka-protocol listener (kafka.enabled), apart from _helpers.tpl and _tls.tpl.

Every broker gets one more listener, KAFKA (kafka.port), in the broker's own keys
(docs/kafka-protocol.md): kafka.listeners binds it, kafka.advertised.listeners names the
pod's stable DNS name under the headless Service (what Metadata hands Kafka's clients for
this broker), and listener.security.protocol.map gives it a protocol:
  kafka.securityProtocol ""   as the CLIENT listener: SSL (client certificates required
                              when tls.clientAuthentication=tls), SASL_SSL with
                              SCRAM-SHA-512 (scram-sha-512), PLAINTEXT without TLS;
  SSL, SASL_SSL               the brokers' certificate and truststore (tls.*), whose DNS
                              names cover every broker and the bootstrap Service;
  PLAINTEXT, SASL_PLAINTEXT   no TLS.
Principals, ACLs and SCRAM credentials are those of the gRPC listeners.
*/}}

{{- define "headwater.kafka.protocol" -}}
{{- if .Values.kafka.securityProtocol -}}{{ .Values.kafka.securityProtocol }}
{{- else if .Values.tls.enabled -}}{{ include "headwater.tls.clientProtocol" . }}
{{- else -}}PLAINTEXT
{{- end -}}
{{- end -}}

{{/* "true" when the Kafka listener knows who its clients are (client certificates, SASL). */}}
{{- define "headwater.kafka.authenticates" -}}
{{- $protocol := include "headwater.kafka.protocol" . -}}
{{- if hasPrefix "SASL_" $protocol -}}true
{{- else if and (eq $protocol "SSL") (eq .Values.tls.clientAuthentication "tls") -}}true
{{- end -}}
{{- end -}}

{{- define "headwater.kafka.bootstrapAddress" -}}
{{- printf "%s.%s.svc.%s:%d" (include "headwater.bootstrap" .) .Release.Namespace .Values.clusterDomain (int .Values.kafka.port) -}}
{{- end -}}

{{/*
Broker settings of the KAFKA listener (merged over the chart's others, under brokers.config),
given (dict "root" $ "map" ...): ``map`` is the protocol map of the other listeners, "" when
the chart sets none (the single PLAINTEXT listener).
*/}}
{{- define "headwater.kafka.configDict" -}}
{{- $port := int .root.Values.kafka.port -}}
{{- $protocol := include "headwater.kafka.protocol" .root -}}
{{- $map := .map | default "PLAINTEXT:PLAINTEXT" -}}
{{- $host := printf "${HOSTNAME}.%s.${POD_NAMESPACE}.svc.%s" (include "headwater.broker.headless" .root) .root.Values.clusterDomain -}}
{{- $cfg := dict
  "kafka.listeners" (printf "KAFKA://0.0.0.0:%d" $port)
  "kafka.advertised.listeners" (printf "KAFKA://%s:%d" $host $port)
  "listener.security.protocol.map" (printf "%s,KAFKA:%s" $map $protocol)
-}}
{{- if hasSuffix "SSL" $protocol -}}
{{- $_ := set $cfg "listener.name.kafka.ssl.client.auth" (ternary "required" "none" (and (eq $protocol "SSL") (eq .root.Values.tls.clientAuthentication "tls"))) -}}
{{- end -}}
{{- if hasPrefix "SASL_" $protocol -}}
{{- $_ := set $cfg "listener.name.kafka.sasl.enabled.mechanisms" "SCRAM-SHA-512" -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Refuse Kafka listener settings that cannot work. */}}
{{- define "headwater.kafka.validate" -}}
{{- if .Values.kafka.enabled -}}
{{- $port := int .Values.kafka.port -}}
{{- $taken := dict (toString (int .Values.brokers.port)) "brokers.port" (toString (int .Values.metrics.brokerPort)) "metrics.brokerPort" -}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $taken (toString (int .Values.tls.internalPort)) "tls.internalPort" -}}
{{- end -}}
{{- with get $taken (toString $port) -}}
{{- fail (printf "kafka.port (%d) is already %s: each listener needs its own port" $port .) -}}
{{- end -}}
{{- $protocol := include "headwater.kafka.protocol" . -}}
{{- if and (hasSuffix "SSL" $protocol) (not .Values.tls.enabled) -}}
{{- fail (printf "kafka.securityProtocol %s needs tls.enabled: the listener serves the brokers' certificate (or set PLAINTEXT or SASL_PLAINTEXT)" $protocol) -}}
{{- end -}}
{{- end -}}
{{- end -}}
