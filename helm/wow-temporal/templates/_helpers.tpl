{{/*
The chart name, truncated to 63 characters (DNS label).
*/}}
{{- define "wow-temporal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name: the release name, and the chart name unless the release name holds it.
*/}}
{{- define "wow-temporal.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Name and version as used by the helm.sh/chart label.
*/}}
{{- define "wow-temporal.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels.
*/}}
{{- define "wow-temporal.labels" -}}
helm.sh/chart: {{ include "wow-temporal.chart" . }}
{{ include "wow-temporal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: wow-temporal
{{- end }}

{{/*
Selector labels (without the component).
*/}}
{{- define "wow-temporal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wow-temporal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Worker, API and host names and their component labels.
*/}}
{{- define "wow-temporal.workerName" -}}
{{- printf "%s-worker" (include "wow-temporal.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wow-temporal.apiName" -}}
{{- printf "%s-api" (include "wow-temporal.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wow-temporal.hostName" -}}
{{- printf "%s-host" (include "wow-temporal.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "wow-temporal.workerSelectorLabels" -}}
{{ include "wow-temporal.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "wow-temporal.apiSelectorLabels" -}}
{{ include "wow-temporal.selectorLabels" . }}
app.kubernetes.io/component: api
{{- end }}

{{- define "wow-temporal.hostSelectorLabels" -}}
{{ include "wow-temporal.selectorLabels" . }}
app.kubernetes.io/component: host
{{- end }}

{{/*
The URL the worker delivers to (WOW_HOST_URL): hostUrl, else the chart's host Service when
host.enabled, else http://domain-host:8089.
*/}}
{{- define "wow-temporal.hostUrl" -}}
{{- if .Values.hostUrl }}
{{- .Values.hostUrl }}
{{- else if .Values.host.enabled }}
{{- printf "http://%s:%d" (include "wow-temporal.hostName" .) (int .Values.host.port) }}
{{- else -}}
http://domain-host:8089
{{- end }}
{{- end }}

{{/*
Where a component's pods may run: its nodeSelector, affinity, tolerations and
topologySpreadConstraints (called with the component's values).
*/}}
{{- define "wow-temporal.placement" -}}
{{- $placement := dict }}
{{- range $key := list "nodeSelector" "affinity" "tolerations" "topologySpreadConstraints" }}
{{- with index $ $key }}
{{- $_ := set $placement $key . }}
{{- end }}
{{- end }}
{{- with $placement }}{{ toYaml . }}{{ end }}
{{- end }}

{{/*
The ServiceAccount the pods run as.
*/}}
{{- define "wow-temporal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "wow-temporal.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image reference.
*/}}
{{- define "wow-temporal.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Where the pods find their files: the settings file (WOW_CONFIG), the Temporal client
certificate, and the API's tenant tokens.
*/}}
{{/* The timers' task queue: settings.timers.task-queue, else wow-timers. */}}
{{- define "wow-temporal.timerQueue" -}}
{{- index (.Values.settings.timers | default dict) "task-queue" | default "wow-timers" -}}
{{- end }}

{{- define "wow-temporal.configDir" -}}/etc/wow-temporal{{- end }}
{{- define "wow-temporal.settingsPath" -}}/etc/wow-temporal/settings.yaml{{- end }}
{{- define "wow-temporal.temporalTlsDir" -}}/etc/wow-temporal/temporal-tls{{- end }}
{{- define "wow-temporal.apiTokensDir" -}}/etc/wow-temporal/api-tokens{{- end }}
{{- define "wow-temporal.tenantTokensPath" -}}/etc/wow-temporal/api-tokens/tenant-tokens.yaml{{- end }}

{{/*
"true" when the worker serves Prometheus metrics (worker.metrics on, telemetry.metrics
prometheus), and when the control API or the host does (api or host and its metrics on too);
empty otherwise.
*/}}
{{- define "wow-temporal.workerMetrics" -}}
{{- if and .Values.worker.metrics.enabled (eq .Values.telemetry.metrics "prometheus") }}true{{ end }}
{{- end }}

{{- define "wow-temporal.apiMetrics" -}}
{{- if and .Values.api.enabled .Values.api.metrics.enabled (eq .Values.telemetry.metrics "prometheus") }}true{{ end }}
{{- end }}

{{- define "wow-temporal.hostMetrics" -}}
{{- if and .Values.host.enabled .Values.host.metrics.enabled (eq .Values.telemetry.metrics "prometheus") }}true{{ end }}
{{- end }}

{{/*
The settings document the ConfigMap holds (validated by wow_temporal.settings.load_settings):
`settings` under `wow:`, empty sections left out, `wow.worker` completed from the worker
values the pod spec depends on too (health port, metrics port, shutdown timeout), and
`wow.telemetry` from telemetry.*.
*/}}
{{- define "wow-temporal.settingsDocument" -}}
{{- $wow := dict }}
{{- range $section, $value := .Values.settings }}
{{- if and $value (ne $section "worker") }}
{{- $_ := set $wow $section $value }}
{{- end }}
{{- end }}
{{- $worker := dict }}
{{- range $key, $value := .Values.settings.worker }}
{{- $_ := set $worker $key $value }}
{{- end }}
{{- $_ := set $worker "health-port" (int .Values.worker.healthPort) }}
{{- $_ := set $worker "metrics-port" (ternary (int .Values.worker.metrics.port) 0 (eq (include "wow-temporal.workerMetrics" .) "true")) }}
{{- $_ := set $worker "shutdown-timeout" (printf "%ds" (int .Values.worker.shutdownTimeoutSeconds)) }}
{{- $_ := set $wow "worker" $worker }}
{{- $telemetry := dict "tracing" .Values.telemetry.tracing "metrics" .Values.telemetry.metrics }}
{{- with .Values.telemetry.otlpEndpoint }}
{{- $_ := set $telemetry "otlp-endpoint" . }}
{{- end }}
{{- $_ := set $wow "telemetry" $telemetry }}
{{- dict "wow" $wow | toYaml }}
{{- end }}

{{/*
Refuse combinations the schema cannot say clearly.
*/}}
{{- define "wow-temporal.validate" -}}
{{- if and .Values.worker.autoscaling.enabled .Values.worker.keda.enabled }}
{{- fail "worker.autoscaling.enabled and worker.keda.enabled: choose one (KEDA makes its own HPA)" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (eq .Values.telemetry.metrics "otlp") }}
{{- fail "serviceMonitor.enabled: telemetry.metrics is otlp, so no process serves /metrics to scrape (they are pushed to telemetry.otlpEndpoint)" }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not (include "wow-temporal.workerMetrics" .)) (not (include "wow-temporal.apiMetrics" .)) (not (include "wow-temporal.hostMetrics" .)) }}
{{- fail "serviceMonitor.enabled needs worker.metrics.enabled (or api.metrics.enabled with api.enabled, or host.metrics.enabled with host.enabled): there is no /metrics to scrape" }}
{{- end }}
{{- if and .Values.api.enabled .Values.api.metrics.enabled (eq (int .Values.api.metrics.port) (int .Values.api.port)) }}
{{- fail (printf "api.metrics.port and api.port must differ, both are %d" (int .Values.api.port)) }}
{{- end }}
{{- if and .Values.api.enabled (not .Values.api.auth.existingSecret) }}
{{- fail "api.auth.existingSecret: the control API needs an existing Secret with its tokens (api.auth.tokenKey, api.auth.tenantTokensKey)" }}
{{- end }}
{{- if and .Values.api.enabled (not .Values.api.auth.tokenKey) (not .Values.api.auth.tenantTokensKey) }}
{{- fail "api.auth: give api.auth.tokenKey or api.auth.tenantTokensKey, or the control API would accept every caller" }}
{{- end }}
{{- with .Values.host }}
{{- if and .enabled (not .app) }}
{{- fail "host.app: the domain host needs the module:attr of the App it serves (--app)" }}
{{- end }}
{{- if and .enabled (not .db.existingSecret) }}
{{- fail "host.db.existingSecret: the host's replicas share one PostgreSQL database (a SQLite file cannot be shared); give an existing Secret holding its postgresql:// URI (host.db.key)" }}
{{- end }}
{{- if and .enabled .metrics.enabled (eq (int .metrics.port) (int .port)) }}
{{- fail (printf "host.metrics.port and host.port must differ, both are %d" (int .port)) }}
{{- end }}
{{- end }}
{{- if and .Values.temporal.tls.existingSecret (not .Values.temporal.tls.enabled) }}
{{- fail "temporal.tls.existingSecret needs temporal.tls.enabled: a client certificate is only sent over TLS" }}
{{- end }}
{{- end }}

{{/*
The Temporal connection for every container, read by temporalio.envconfig.
*/}}
{{- define "wow-temporal.temporalEnv" -}}
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
{{- with .Values.temporal.tls }}
{{- if .enabled }}
- name: TEMPORAL_TLS
  value: "true"
{{- if .serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ .serverName | quote }}
{{- end }}
{{- if .existingSecret }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: {{ printf "%s/%s" (include "wow-temporal.temporalTlsDir" $) .certKey | quote }}
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: {{ printf "%s/%s" (include "wow-temporal.temporalTlsDir" $) .keyKey | quote }}
{{- if .caKey }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: {{ printf "%s/%s" (include "wow-temporal.temporalTlsDir" $) .caKey | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.temporal.apiKey }}
{{- if .existingSecret }}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret | quote }}
      key: {{ .key | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Volumes and mounts every container has: /tmp, the settings file, the Temporal certificate.
*/}}
{{- define "wow-temporal.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
- name: settings
  configMap:
    name: {{ include "wow-temporal.fullname" . }}-settings
    items:
      - key: settings.yaml
        path: settings.yaml
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ .Values.temporal.tls.existingSecret | quote }}
    defaultMode: 0440
    items:
      - key: {{ .Values.temporal.tls.certKey | quote }}
        path: {{ .Values.temporal.tls.certKey | quote }}
      - key: {{ .Values.temporal.tls.keyKey | quote }}
        path: {{ .Values.temporal.tls.keyKey | quote }}
      {{- if .Values.temporal.tls.caKey }}
      - key: {{ .Values.temporal.tls.caKey | quote }}
        path: {{ .Values.temporal.tls.caKey | quote }}
      {{- end }}
{{- end }}
{{- end }}

{{- define "wow-temporal.commonMounts" -}}
- name: tmp
  mountPath: /tmp
- name: settings
  mountPath: {{ include "wow-temporal.settingsPath" . }}
  subPath: settings.yaml
  readOnly: true
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret }}
- name: temporal-tls
  mountPath: {{ include "wow-temporal.temporalTlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}
