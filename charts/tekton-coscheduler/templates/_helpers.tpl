{{/* Names and labels shared by every template. */}}

{{- define "tcs.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tcs.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "tcs.labels" -}}
{{ include "tcs.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tcs.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tcs.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tcs.tlsSecretName" -}}
{{- if eq .Values.webhook.tls.mode "secret" -}}
{{- required "webhook.tls.existingSecret is required with webhook.tls.mode=secret" .Values.webhook.tls.existingSecret -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "tcs.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- /* registry/repository at the digest, or at the tag (the chart's appVersion by default). */}}
{{- define "tcs.image" -}}
{{- $name := .Values.image.repository -}}
{{- with .Values.image.registry -}}
{{- $name = printf "%s/%s" (trimSuffix "/" .) $name -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $name .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $name (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "tcs.serviceHost" -}}
{{- printf "%s.%s.svc" (include "tcs.fullname" .) .Release.Namespace -}}
{{- end -}}

{{- /* webhook or policy: what admission.mode asks, auto deciding by what the API server serves. */}}
{{- define "tcs.admissionMode" -}}
{{- $mode := .Values.admission.mode -}}
{{- if eq $mode "auto" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
policy
{{- else -}}
webhook
{{- end -}}
{{- else if or (eq $mode "policy") (eq $mode "webhook") -}}
{{- $mode -}}
{{- else -}}
{{- fail (printf "admission.mode must be auto, policy or webhook, not %q" $mode) -}}
{{- end -}}
{{- end -}}

{{- /* v1 where served (1.36+); v1beta1 where an administrator turned it on (1.34, 1.35). */}}
{{- define "tcs.admissionPolicyVersion" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
v1
{{- else if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy" -}}
v1beta1
{{- else -}}
v1
{{- end -}}
{{- end -}}
