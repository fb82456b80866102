{{/* the headless service that gives every storage pod its stable DNS name */}}
{{- define "openlake.hl" -}}{{ .Release.Name }}-hl{{- end -}}
{{- define "openlake.etcd" -}}{{ .Release.Name }}-etcd{{- end -}}
{{- define "openlake.svcDomain" -}}{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}{{- end -}}
{{/* drives per erasure set */}}
{{- define "openlake.setDrives" -}}
{{- if gt (int .Values.setDriveCount) 0 -}}{{ int .Values.setDriveCount }}
{{- else if .Values.cluster.enabled -}}{{ int .Values.replicaCount }}
{{- else -}}{{ int .Values.diskCount }}{{- end -}}
{{- end -}}
{{/* the etcd client endpoints, as a TOML array */}}
{{- define "openlake.etcdEndpoints" -}}
{{- $etcd := include "openlake.etcd" . -}}{{- $dom := include "openlake.svcDomain" . -}}
[{{- range $i, $e := until (int .Values.etcd.replicas) }}{{ if $i }}, {{ end }}"http://{{ $etcd }}-{{ $i }}.{{ $etcd }}-hl.{{ $dom }}:2379"{{- end }}]
{{- end -}}
{{/* what this chart refuses to render */}}
{{- define "openlake.check" -}}
{{- if not (has .Values.mode (list "storage" "kv")) -}}
{{- fail (printf "mode = %q: use storage or kv" .Values.mode) -}}
{{- end -}}
{{- if and (eq .Values.mode "storage") (gt (int .Values.replicaCount) 1) (not .Values.cluster.enabled) -}}
{{- fail "replicaCount > 1 is a cluster: set cluster.enabled=true and cluster.secret (several nodes without etcd would be separate stores)" -}}
{{- end -}}
{{- if and .Values.cluster.enabled (not .Values.cluster.secret) -}}
{{- fail "cluster.enabled needs cluster.secret, the node plane's key: --set cluster.secret=$(openssl rand -hex 32)" -}}
{{- end -}}
{{- if and .Values.cluster.enabled (lt (int .Values.replicaCount) 2) -}}
{{- fail "cluster.enabled needs replicaCount >= 2 storage nodes" -}}
{{- end -}}
{{- end -}}
