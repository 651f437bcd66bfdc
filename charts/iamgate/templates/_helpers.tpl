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

{{- define "iamgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "iamgate.secretName" -}}
{{ .Values.secrets.existingSecret | default (printf "%s-secrets" (include "iamgate.fullname" .)) }}
{{- end -}}

{{- define "iamgate.mongodbSecretName" -}}
{{ .Values.mongodb.existingSecret | default (printf "%s-secrets" (include "iamgate.fullname" .)) }}
{{- end -}}

{{/* Environment shared by both processes. */}}
{{- define "iamgate.commonEnv" -}}
- name: IAMGATE_PUBLIC_URL
  value: {{ .Values.publicUrl | quote }}
- name: IAMGATE_INTERNAL_TOKEN
  valueFrom: {secretKeyRef: {name: {{ include "iamgate.secretName" . }}, key: internal-token}}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
