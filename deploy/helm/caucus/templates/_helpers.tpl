{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "caucus.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name; component names are appended to it. */}}
{{- define "caucus.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "caucus.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "caucus.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "caucus.selectorLabels" -}}
app.kubernetes.io/name: {{ include "caucus.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "caucus.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "caucus.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "caucus.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Name of the chart-managed Secret with the connection URLs. */}}
{{- define "caucus.connectionSecret" -}}
{{- printf "%s-connection" (include "caucus.fullname" .) -}}
{{- end -}}

{{/* JetStream stream that holds the tasks (`<PREFIX>_TASKS`). */}}
{{- define "caucus.tasksStream" -}}
{{- printf "%s_TASKS" (upper .Values.subjectPrefix) -}}
{{- end -}}

{{/*
Environment shared by every caucus container: connection URLs from Secrets,
the config file, telemetry.
*/}}
{{- define "caucus.env" -}}
- name: CAUCUS_CONFIG
  value: /etc/caucus/caucus.toml
- name: CAUCUS_NATS_URL
  valueFrom:
    secretKeyRef:
      name: {{ default (include "caucus.connectionSecret" .) .Values.nats.existingSecret }}
      key: {{ if .Values.nats.existingSecret }}{{ .Values.nats.existingSecretKey }}{{ else }}nats-url{{ end }}
- name: CAUCUS_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ default (include "caucus.connectionSecret" .) .Values.redis.existingSecret }}
      key: {{ if .Values.redis.existingSecret }}{{ .Values.redis.existingSecretKey }}{{ else }}redis-url{{ end }}
- name: CAUCUS_REDIS_MODE
  value: {{ .Values.redis.mode | default "standalone" | quote }}
{{- if eq (.Values.redis.mode | default "standalone") "sentinel" }}
- name: CAUCUS_REDIS_SENTINEL_MASTER
  value: {{ required "redis.sentinelMaster is required with redis.mode sentinel" .Values.redis.sentinelMaster | quote }}
{{- end }}
- name: CAUCUS_NATS_REPLICAS
  value: {{ .Values.nats.replicas | int | quote }}
- name: CAUCUS_SUBJECT_PREFIX
  value: {{ .Values.subjectPrefix | quote }}
- name: CAUCUS_TELEMETRY_LOG_FORMAT
  value: {{ .Values.telemetry.logFormat | quote }}
- name: CAUCUS_TELEMETRY_LOG_LEVEL
  value: {{ .Values.telemetry.logLevel | quote }}
- name: CAUCUS_TELEMETRY_METRICS_ADDR
  value: {{ printf "0.0.0.0:%d" (.Values.metrics.port | int) | quote }}
{{- if .Values.nats.credentials.existingSecret }}
- name: CAUCUS_NATS_CREDENTIALS_FILE
  value: /etc/caucus/nats/{{ .Values.nats.credentials.key }}
{{- end }}
{{- if .Values.telemetry.otlpEndpoint }}
- name: CAUCUS_TELEMETRY_OTLP_ENDPOINT
  value: {{ .Values.telemetry.otlpEndpoint | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
Base URL of the coordinator Service's HTTP port (/metrics, /scaling/...),
as KEDA (in its own namespace) reaches it.
*/}}
{{- define "caucus.coordinatorUrl" -}}
{{- printf "http://%s-coordinator.%s.svc.%s:%d" (include "caucus.fullname" .) .Release.Namespace .Values.clusterDomain (.Values.metrics.port | int) -}}
{{- end -}}

{{/*
The HTTP port every caucus process listens on (telemetry.metrics_addr):
/metrics, /healthz and, on the coordinator, /scaling/<agent_type>.
*/}}
{{- define "caucus.httpPort" -}}
ports:
  - name: http
    containerPort: {{ .Values.metrics.port | int }}
    protocol: TCP
{{- end -}}

{{/* Pod annotations: Prometheus scrape hints, then podAnnotations. */}}
{{- define "caucus.podAnnotations" -}}
{{- if .Values.metrics.scrapeAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | int | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The role's credentials (docs/SECURITY.md) as environment, from its Secret;
argument: (dict "root" $ "role" "worker"). Nothing when auth is off.
*/}}
{{- define "caucus.authEnvFrom" -}}
{{- if .root.Values.auth.enabled }}
envFrom:
  - secretRef:
      name: {{ include "caucus.authSecret" . }}
{{- end }}
{{- end -}}

{{/* Name of a role's credentials Secret; argument as caucus.authEnvFrom. */}}
{{- define "caucus.authSecret" -}}
{{- $names := .root.Values.auth.secretNames | default dict -}}
{{- get $names .role | default (printf "%s-%s" (include "caucus.fullname" .root) .role) -}}
{{- end -}}

{{/* Volumes every caucus pod mounts. */}}
{{- define "caucus.volumes" -}}
- name: config
  configMap:
    name: {{ include "caucus.fullname" . }}-config
- name: tmp
  emptyDir: {}
{{- if .Values.nats.credentials.existingSecret }}
- name: nats-credentials
  secret:
    secretName: {{ .Values.nats.credentials.existingSecret }}
{{- end }}
{{- end -}}

{{- define "caucus.volumeMounts" -}}
- name: config
  mountPath: /etc/caucus/caucus.toml
  subPath: caucus.toml
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.nats.credentials.existingSecret }}
- name: nats-credentials
  mountPath: /etc/caucus/nats
  readOnly: true
{{- end }}
{{- end -}}

{{/*
Probes for one container; argument: (dict "root" $ "service" "coordinator").
*/}}
{{- define "caucus.probes" -}}
{{- $p := .root.Values.probes -}}
startupProbe:
  exec:
    command: ["caucus", "health", {{ .service | quote }}]
  periodSeconds: {{ $p.startup.periodSeconds }}
  timeoutSeconds: {{ $p.startup.timeoutSeconds }}
  failureThreshold: {{ $p.startup.failureThreshold }}
readinessProbe:
  exec:
    command: ["caucus", "health", {{ .service | quote }}]
  periodSeconds: {{ $p.readiness.periodSeconds }}
  timeoutSeconds: {{ $p.readiness.timeoutSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
livenessProbe:
  exec:
    command: ["caucus", "health", {{ .service | quote }}]
  periodSeconds: {{ $p.liveness.periodSeconds }}
  timeoutSeconds: {{ $p.liveness.timeoutSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
{{- end -}}

{{/* Pod-level settings shared by every Deployment. */}}
{{- define "caucus.podSpecCommon" -}}
serviceAccountName: {{ include "caucus.serviceAccountName" . }}
automountServiceAccountToken: false
terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  {{- include "caucus.volumes" . | nindent 2 }}
{{- end -}}
