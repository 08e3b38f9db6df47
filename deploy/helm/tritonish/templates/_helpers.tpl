{{/*
Names and labels shared by every template. Kubernetes names and label values
hold at most 63 characters, so each helper truncates (and drops a trailing
"-" the cut may leave).
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "tritonish.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's base name: fullnameOverride, else the release name, followed by
the chart's name unless the release name already contains it
(`helm install tritonish` -> tritonish; `helm install tn` -> tn-tritonish).
*/}}
{{- define "tritonish.fullname" -}}
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
A component's object name, "<fullname>-<suffix>", the fullname cut so that the
whole stays within 63 characters. Call as: include "tritonish.componentName" (list . "engine").
*/}}
{{- define "tritonish.componentName" -}}
{{- $root := index . 0 }}
{{- $suffix := index . 1 }}
{{- $base := include "tritonish.fullname" $root | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $base $suffix }}
{{- end }}

{{/* chart-version, as the helm.sh/chart label takes it. */}}
{{- define "tritonish.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels selectors use (stable across upgrades). */}}
{{- define "tritonish.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tritonish.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{/* Every object's labels. */}}
{{- define "tritonish.labels" -}}
helm.sh/chart: {{ include "tritonish.chart" . | quote }}
{{ include "tritonish.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end }}

{{/* The app image, repository:tag, quoted. */}}
{{- define "tritonish.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) | quote }}
{{- end }}

{{/*
A quantity or count that may be written as a number or as a string
("20000", "20k", "25%"): strings are quoted, numbers printed as integers
(Helm 4, and Helm 3 from 1,000,000 up, would print 3.3554432e+07).
*/}}
{{- define "tritonish.intOrString" -}}
{{- if typeIs "string" . }}{{ quote . }}{{ else }}{{ int64 . }}{{ end }}
{{- end }}

{{/* The name of the Secret holding admin-token and webhook-secret. */}}
{{- define "tritonish.secretName" -}}
{{- if .Values.secrets.existingSecret }}{{ .Values.secrets.existingSecret }}{{ else }}{{ include "tritonish.componentName" (list . "secrets") }}{{ end }}
{{- end }}

{{/* A resource quantity ("1Gi", "20000", or a number), always as a quoted string. */}}
{{- define "tritonish.quantity" -}}
{{- if typeIs "string" . }}{{ quote . }}{{ else }}{{ int64 . | toString | quote }}{{ end }}
{{- end }}
