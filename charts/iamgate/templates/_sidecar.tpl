{{/*
  iamgate.decisionSidecar: the decision service as a container of a tenant's pod.

  A tenant chart depends on this chart with its server side switched off
  (controlPlane.enabled=false, decision.enabled=false, serviceAccount.create=false) and
  puts, in its pod's containers list:

      {{- include "iamgate.decisionSidecar" .Subcharts.iamgate | nindent 8 }}

  and in its pod's volumes list (the directory of the metrics files of several workers):

      {{- include "iamgate.decisionSidecarVolumes" .Subcharts.iamgate | nindent 8 }}

  The argument is this chart's own context as the tenant chart sees it (Helm's
  `.Subcharts.<name>`, the dependency's name or alias): its `decisionSidecar` values
  (values.yaml documents them; Helm merges the tenant's overrides under `iamgate:` into
  the defaults) and its Chart.yaml, whose appVersion is the image tag unless
  decisionSidecar.image.tag says otherwise. The app then calls
  http://127.0.0.1:<port>/api/v1/applications/<id>/authz/check.

  It binds 0.0.0.0 because the kubelet probes the pod IP (a 127.0.0.1 bind never
  becomes Ready), so its port is reachable from the pod network: checks need the
  caller's API key or access token, and with metrics.tokenSecret (a Secret of the
  tenant's namespace) /metrics needs that token. Probes, per probeMode:
  - liveness-only (default): startup and liveness on /healthz; the pod's readiness does
    not depend on the control plane. While the change stream is down for longer than
    maxStaleness, checks answer 503 DECISION_UNAVAILABLE (fail closed).
  - readiness: also readiness on /readyz (200 while the cache is within maxStaleness),
    so a stale sidecar takes its pod out of the Service -- every tenant pod at once
    during a control-plane outage.
*/}}
{{/* The argument must be the chart's context: its appVersion is the default image tag. */}}
{{- define "iamgate.sidecarContext" -}}
{{- if not (and (hasKey . "Chart") (hasKey . "Values")) -}}
{{- fail "iamgate.decisionSidecar and iamgate.decisionSidecarVolumes take the iamgate chart's context, not its values block: include \"iamgate.decisionSidecar\" .Subcharts.iamgate (the image tag follows that chart's appVersion)" -}}
{{- end -}}
{{- end -}}

{{- define "iamgate.decisionSidecar" -}}
{{- include "iamgate.sidecarContext" . -}}
{{- $tag := .Values.decisionSidecar.image.tag | default .Chart.AppVersion -}}
{{- $metricsToken := .Values.metrics.tokenSecret -}}
{{- with .Values.decisionSidecar -}}
- name: iamgate-decision
  {{- /* A digest pins the image: the tag is then ignored. */}}
  image: {{ if .image.digest }}"{{ .image.repository }}@{{ .image.digest }}"{{ else }}"{{ .image.repository }}:{{ $tag }}"{{ end }}
  imagePullPolicy: {{ .image.pullPolicy | default "IfNotPresent" }}
  # One process when workers is 1 (the default: no gunicorn master beside the worker);
  # with more, the same command runs gunicorn's master and that many workers.
  command: ["python", "-m", "decision"]
  ports:
    - {name: iamgate-dec, containerPort: {{ .port }}}
  env:
    - {name: IAMGATE_DECISION_HOST, value: "0.0.0.0"}
    - {name: IAMGATE_DECISION_PORT, value: {{ .port | int64 | quote }}}
    - {name: IAMGATE_DECISION_WORKERS, value: {{ .workers | int64 | quote }}}
    - {name: IAMGATE_DECISION_MAX_STALENESS, value: {{ .maxStaleness | int64 | quote }}}
    - {name: IAMGATE_DECISION_CACHE_TTL, value: {{ .cacheTtl | int64 | quote }}}
    - {name: IAMGATE_DECISION_LOG_SAMPLE, value: {{ include "iamgate.envValue" .decisionLogs.sample }}}
    - {name: IAMGATE_DECISION_LOG_DENIALS, value: {{ .decisionLogs.denials | quote }}}
    - {name: IAMGATE_CONTROL_PLANE_URL, value: {{ .controlPlaneUrl | quote }}}
    - {name: IAMGATE_PUBLIC_URL, value: {{ .publicUrl | quote }}}
    - name: IAMGATE_DECISION_API_KEY
      valueFrom: {secretKeyRef: {name: {{ .apiKeySecret.name }}, key: {{ .apiKeySecret.key }}}}
    {{- /* Its port is the pod's, reachable from the pod network: /metrics wants the token. */}}
    {{- with $metricsToken.name }}
    - name: IAMGATE_METRICS_TOKEN
      valueFrom: {secretKeyRef: {name: {{ . }}, key: {{ $metricsToken.key }}}}
    {{- end }}
    {{- include "iamgate.metricsEnv" . | nindent 4 }}
    {{- range $name, $value := .env }}
    - {name: {{ $name }}, value: {{ include "iamgate.envValue" $value }}}
    {{- end }}
  startupProbe:
    httpGet: {path: /healthz, port: {{ .port }}}
    periodSeconds: 1
    timeoutSeconds: 2
    failureThreshold: 30
  livenessProbe:
    httpGet: {path: /healthz, port: {{ .port }}}
    periodSeconds: 10
    timeoutSeconds: 3
    failureThreshold: 6
  {{- if eq .probeMode "readiness" }}
  readinessProbe:
    httpGet: {path: /readyz, port: {{ .port }}}
    periodSeconds: 2
    timeoutSeconds: 2
  {{- end }}
  {{- include "iamgate.preStop" . | nindent 2 }}
  resources: {{- toYaml .resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 10001
    runAsGroup: 10001
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities: {drop: [ALL]}
    seccompProfile: {type: RuntimeDefault}
  # With workers > 1, /metrics sums every worker through files here; mounted whatever
  # the workers, so changing them never changes the pod's volumes.
  volumeMounts:
    - {name: iamgate-decision-metrics, mountPath: {{ include "iamgate.metricsDir" . }}}
{{- end -}}
{{- end -}}

{{/* The pod volumes iamgate.decisionSidecar mounts (an emptyDir in memory). */}}
{{- define "iamgate.decisionSidecarVolumes" -}}
{{- include "iamgate.sidecarContext" . -}}
{{ include "iamgate.metricsVolume" "iamgate-decision-metrics" }}
{{- end -}}
