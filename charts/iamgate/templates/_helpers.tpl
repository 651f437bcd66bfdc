{{- define "iamgate.name" -}}{{ .Chart.Name }}{{- end -}}

{{- define "iamgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "iamgate.labels" -}}
app.kubernetes.io/name: {{ include "iamgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (list $ "controlplane") */}}
{{- define "iamgate.selector" -}}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* repository@digest when image.digest pins it (the tag is then ignored), else repository:tag. */}}
{{- define "iamgate.image" -}}
{{- if .Values.image.digest -}}{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{- end -}}
{{- end -}}

{{- define "iamgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ .Values.serviceAccount.name | default (include "iamgate.fullname" .) }}
{{- else -}}{{ .Values.serviceAccount.name | default "default" }}{{- end -}}
{{- end -}}

{{- define "iamgate.secretName" -}}
{{ .Values.secrets.existingSecret | default (printf "%s-secrets" (include "iamgate.fullname" .)) }}
{{- end -}}

{{/* The MongoDB URI lives in a Secret of its own, so it never depends on secrets.existingSecret. */}}
{{- define "iamgate.mongodbSecretName" -}}
{{ .Values.mongodb.existingSecret | default (printf "%s-mongodb" (include "iamgate.fullname" .)) }}
{{- end -}}

{{/* Pod-level settings shared by every Deployment: (list $ "component") */}}
{{- define "iamgate.podSpec" -}}
{{- $ := index . 0 -}}
{{- $args := . -}}
serviceAccountName: {{ include "iamgate.serviceAccountName" $ }}
automountServiceAccountToken: false
securityContext: {{- toYaml $.Values.podSecurityContext | nindent 2 }}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $.Values.topologySpread.enabled }}
{{- /* The zone constraint has its own rule: DoNotSchedule on it would leave every pod
  Pending on a cluster whose nodes carry no zone label. */}}
topologySpreadConstraints:
  {{- range $key, $rule := dict "kubernetes.io/hostname" $.Values.topologySpread.whenUnsatisfiable "topology.kubernetes.io/zone" $.Values.topologySpread.zoneWhenUnsatisfiable }}
  - maxSkew: 1
    topologyKey: {{ $key }}
    whenUnsatisfiable: {{ $rule }}
    labelSelector:
      matchLabels: {{- include "iamgate.selector" $args | nindent 8 }}
  {{- end }}
{{- end }}
{{- with $.Values.nodeSelector }}
nodeSelector: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.tolerations }}
tolerations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $.Values.affinity }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "iamgate.scrapeAnnotations" -}}
{{- if .root.Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/*
  prometheus_client's multiprocess files: with several gunicorn workers in a container,
  each worker writes its figures there and /metrics sums them (IAMGATE_METRICS_DIR,
  docs/deployment.md "Metrics of several workers"). An emptyDir in memory, one per pod:
  writable under the read-only root filesystem, gone with the pod, and emptied by
  gunicorn's master at each container start. The argument is unused (the sidecar
  template passes its values block, the Deployments the root context).
*/}}
{{- define "iamgate.metricsDir" -}}/run/iamgate/metrics{{- end -}}

{{- define "iamgate.metricsEnv" -}}
- {name: IAMGATE_METRICS_DIR, value: {{ include "iamgate.metricsDir" . | quote }}}
{{- end -}}

{{- define "iamgate.metricsVolume" -}}
- name: {{ . }}
  emptyDir: {medium: Memory, sizeLimit: 64Mi}
{{- end -}}

{{/*
  A value for env. Helm reads every number of a values file as a float64, which `quote`
  prints in exponent form from a million up (1e+06), and the integer settings refuse
  that: a whole number prints as an integer, any other number (a share such as
  IAMGATE_DECISION_LOG_SAMPLE: 0.05) as it is.
*/}}
{{- define "iamgate.envValue" -}}
{{- if and (kindIs "float64" .) (eq . (float64 (int64 .))) -}}{{ int64 . | quote }}
{{- else -}}{{ . | quote }}{{- end -}}
{{- end -}}

{{/* Environment the chart gives every process. */}}
{{- define "iamgate.commonEnv" -}}
- name: IAMGATE_PUBLIC_URL
  value: {{ .Values.publicUrl | quote }}
- name: IAMGATE_INTERNAL_TOKEN
  valueFrom: {secretKeyRef: {name: {{ include "iamgate.secretName" . }}, key: internal-token}}
{{- with .Values.trustedProxies }}
- name: IAMGATE_TRUSTED_PROXIES
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.metrics.tokenSecret.name }}
- name: IAMGATE_METRICS_TOKEN
  valueFrom: {secretKeyRef: {name: {{ . }}, key: {{ $.Values.metrics.tokenSecret.key }}}}
{{- end }}
{{- /* The control plane and the worker check their stream heartbeat against the decision
  services' staleness bound at start, as the decision service does: one value for all. */}}
- name: IAMGATE_DECISION_MAX_STALENESS
  value: {{ .Values.decision.maxStaleness | int64 | quote }}
{{- end -}}

{{/*
  The operator's settings for one Deployment: (list $ "controlplane"). The control plane
  and the worker get `env` and `extraEnv`. The decision service gets only the `env`
  settings it reads (its own IAMGATE_DECISION_* and those below: decision/,
  shared/serving.py, shared/logs.py) and `decision.extraEnv`, so the control plane's
  settings and secrets (IAMGATE_SMTP_URL) stay off its pods. The settings the chart
  sets itself (IAMGATE_PUBLIC_URL, IAMGATE_TRUSTED_PROXIES, IAMGATE_CONTROL_PLANE_URL,
  IAMGATE_METRICS_DIR, the ports...) never come through `env`: the schema refuses them
  there, as a second entry of one name would override the chart's.
*/}}
{{- define "iamgate.settingsEnv" -}}
{{- $ := index . 0 -}}
{{- $decision := eq (index . 1) "decision" -}}
{{- $reads := list "IAMGATE_STREAM_HEARTBEAT" "IAMGATE_MAX_CONNECTIONS" "IAMGATE_HEADER_TIMEOUT" "IAMGATE_LOG_LEVEL" "IAMGATE_LOG_FLUSH_INTERVAL" -}}
{{- range $name, $value := $.Values.env }}
{{- if or (not $decision) (hasPrefix "IAMGATE_DECISION_" $name) (has $name $reads) }}
- name: {{ $name }}
  value: {{ include "iamgate.envValue" $value }}
{{- end }}
{{- end }}
{{- with (ternary $.Values.decision.extraEnv $.Values.extraEnv $decision) }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
  The pod annotation that rolls the pods after a secret changed. Env from a Secret is
  read when the container starts, so a new value reaches the pods only when they
  restart. Nothing derived from a secret's value goes in the pod template: a checksum
  there (unsalted, of a MongoDB URI and its password) lets anyone who may read
  Deployments or ReplicaSets, the `view` role which may not read Secrets, test guesses of
  the secret offline. The operator bumps secrets.revision instead, in the upgrade that
  changes a secret, chart-made or not (docs/deployment.md, "Rolling the pods after a
  secret changed").
*/}}
{{- define "iamgate.secretsRevision" -}}
iamgate/secrets-revision: {{ include "iamgate.envValue" .Values.secrets.revision }}
{{- end -}}

{{/* What the control plane and the webhook worker need to reach the store. */}}
{{- define "iamgate.storeEnv" -}}
- name: IAMGATE_MONGODB_URI
  valueFrom: {secretKeyRef: {name: {{ include "iamgate.mongodbSecretName" . }}, key: {{ .Values.mongodb.existingSecretKey }}}}
- name: IAMGATE_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ include "iamgate.secretName" . }}, key: secret-key}}
{{- end -}}

{{/*
  Shutdown. The kubelet runs preStop, then sends SIGTERM; meanwhile the pod leaves its
  Services' endpoints, which every kube-proxy and ingress controller learns a moment
  later. Sleeping first keeps the server accepting while they catch up; on SIGTERM
  gunicorn's master stops accepting and gives its workers gunicorn's graceful_timeout
  (shared/serving.py, below as iamgate.gracefulTimeout; tests/chart checks they agree)
  to finish what is in flight. The grace period must cover both, or SIGKILL cuts the
  requests short.
*/}}
{{- define "iamgate.gracefulTimeout" -}}20{{- end -}}

{{/* preStop of a container: its values block (preStopSleepSeconds). */}}
{{- define "iamgate.preStop" -}}
lifecycle:
  preStop:
    exec: {command: ["sleep", {{ .preStopSleepSeconds | quote }}]}
{{- end -}}

{{/* terminationGracePeriodSeconds of a Deployment's pod: (list "controlPlane" .Values.controlPlane) */}}
{{- define "iamgate.terminationGracePeriod" -}}
{{- $name := index . 0 -}}
{{- $values := index . 1 -}}
{{- $needed := add $values.preStopSleepSeconds (include "iamgate.gracefulTimeout" .) -}}
{{- if le (int $values.terminationGracePeriodSeconds) (int $needed) -}}
{{- fail (printf "%s.terminationGracePeriodSeconds (%v) must exceed %s.preStopSleepSeconds plus the server's %s s graceful timeout (%v): otherwise SIGKILL cuts in-flight requests short" $name $values.terminationGracePeriodSeconds $name (include "iamgate.gracefulTimeout" .) $needed) -}}
{{- end -}}
terminationGracePeriodSeconds: {{ $values.terminationGracePeriodSeconds }}
{{- end -}}

{{/*
  OpenTelemetry's standard variables for one Deployment: (list $ "controlplane").
  Nothing while otel.endpoint is empty: tracing stays off.
*/}}
{{- define "iamgate.otelEnv" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
{{- with $.Values.otel -}}
{{- if .endpoint }}
- {name: OTEL_SERVICE_NAME, value: {{ printf "iamgate-%s" $component | quote }}}
- {name: OTEL_EXPORTER_OTLP_ENDPOINT, value: {{ .endpoint | quote }}}
- {name: OTEL_EXPORTER_OTLP_PROTOCOL, value: {{ .protocol | quote }}}
- {name: OTEL_TRACES_SAMPLER, value: {{ .sampler | quote }}}
{{- with .samplerArg }}
- {name: OTEL_TRACES_SAMPLER_ARG, value: {{ . | quote }}}
{{- end }}
{{- $attributes := list (printf "service.version=%s" ($.Values.image.tag | default $.Chart.AppVersion)) (printf "service.namespace=%s" $.Release.Namespace) }}
{{- range $key, $value := .resourceAttributes }}
{{- $attributes = append $attributes (printf "%s=%s" $key $value) }}
{{- end }}
- {name: OTEL_RESOURCE_ATTRIBUTES, value: {{ join "," $attributes | quote }}}
{{- end }}
{{- end }}
{{- end -}}

{{/*
  Rollouts replace one pod at a time: a new pod must be Ready before an old one stops.
  (A PodDisruptionBudget bounds evictions, such as a node drain, not a rollout.)
*/}}
{{- define "iamgate.strategy" -}}
strategy:
  type: RollingUpdate
  rollingUpdate: {maxUnavailable: 0, maxSurge: 1}
{{- end -}}
