{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "loadmgr.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: release-chart unless the release name already contains the chart name. */}}
{{- define "loadmgr.fullname" -}}
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

{{- define "loadmgr.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "loadmgr.labels" -}}
helm.sh/chart: {{ include "loadmgr.chart" . }}
{{ include "loadmgr.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels are immutable on a Deployment: name and instance only. */}}
{{- define "loadmgr.selectorLabels" -}}
app.kubernetes.io/name: {{ include "loadmgr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "loadmgr.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "loadmgr.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the admin token: the operator's, or the one the chart generates. */}}
{{- define "loadmgr.apiTokenSecret" -}}
{{- default (printf "%s-api-token" (include "loadmgr.fullname" .)) .Values.api.tokenSecretName }}
{{- end }}
