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

{{/* The pods' ServiceAccount: the release's own, or serviceAccount.name ("default" when neither). */}}
{{- define "tritonish.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}{{ default (include "tritonish.fullname" .) .Values.serviceAccount.name }}{{ else }}{{ default "default" .Values.serviceAccount.name }}{{ end }}
{{- end }}

{{/*
The data of the chart's Secret, as JSON, computed once per render and kept
in .Values.secrets (every template of one render sees the same map), so the
Secret and the pods' checksum annotation agree on a generated key. The
engine admin key: secrets.engineAdminKey when set, else the one in the
Secret already in the cluster (lookup: `helm upgrade` keeps it), else 48
random characters (first install, and every `helm template`, which has no
cluster to look in).
*/}}
{{- define "tritonish.secretData" -}}
{{- if not (hasKey .Values.secrets "__data") }}
{{- $key := .Values.secrets.engineAdminKey | toString }}
{{- if not $key }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "tritonish.secretName" .) }}
{{- $key = index ($existing.data | default dict) "engine-admin-key" | default "" | b64dec }}
{{- end }}
{{- $data := dict
  "admin-token" (.Values.secrets.adminToken | toString)
  "webhook-secret" (.Values.secrets.webhookSecret | toString)
  "engine-admin-key" ($key | default (randAlphaNum 48))
  "console-token" (.Values.secrets.consoleToken | toString) }}
{{- $_ := set .Values.secrets "__data" $data }}
{{- end }}
{{- index .Values.secrets "__data" | toJson }}
{{- end }}

{{/*
What the pods read from Secrets, hashed, for the checksum annotation: the
chart's own Secret's data, or the existing Secret's as the cluster holds it
(empty under `helm template`). A change rolls the pods, so the engine and
the gateway never hold different keys after one of them restarts.
*/}}
{{- define "tritonish.secretChecksum" -}}
{{- if .Values.secrets.existingSecret }}
{{- (lookup "v1" "Secret" .Release.Namespace .Values.secrets.existingSecret).data | default dict | toJson | sha256sum }}
{{- else }}
{{- include "tritonish.secretData" . | sha256sum }}
{{- end }}
{{- end }}

{{/*
Fails the render when a container asks for a GPU the image cannot use: the
default image has no CUDA libraries (image.cuda says the GPU variant is used).
*/}}
{{- define "tritonish.gpuGuard" -}}
{{- if not .Values.image.cuda }}
{{- range $part, $res := dict "engine" .Values.engine.resources "gateway" .Values.gateway.resources }}
{{- range $kind := list "limits" "requests" }}
{{- range $name, $_ := index $res $kind | default dict }}
{{- if hasSuffix "/gpu" $name }}
{{- fail (printf "%s.resources.%s asks for %s, but image.cuda is false: the default image has no CUDA libraries. Build the GPU variant (docs/deploy/gpu-hosts.md) and set image.cuda=true" $part $kind $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
