{{/* Names and labels shared by every template. */}}

{{- define "tcs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /* fullnameOverride as given; else the release's name, followed by the chart's (or
nameOverride) unless the release's name holds it already. */}}
{{- define "tcs.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tcs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tcs.name" . }}
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

{{- /* "true" when the controller keeps the webhook's certificate itself (webhook.tls.mode
controller, in admission mode webhook), "" otherwise. */}}
{{- define "tcs.selfManagedTLS" -}}
{{- if and (eq (include "tcs.admissionMode" .) "webhook") (eq .Values.webhook.tls.mode "controller") -}}
true
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


{{- /* The controller's environment: the settings the chart decides (each a COSCHEDULER_*
variable), then extraEnv. The Deployment's container and `helm test`'s check pod share it. */}}
{{- define "tcs.env" -}}
{{- $webhook := eq (include "tcs.admissionMode" .) "webhook" -}}
{{- /* A name in extraEnv replaces the chart's own: each name once, as server-side apply
       (Argo CD, kubectl --server-side) requires of a list merged by name. */}}
{{- $extra := dict }}
{{- range .Values.extraEnv }}{{- $_ := set $extra .name true }}{{- end }}
{{- if not (hasKey $extra "POD_NAME") }}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
{{- end }}
{{- if not (hasKey $extra "POD_NAMESPACE") }}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
{{- end }}
{{- $c := .Values.config }}
{{- $b := .Values.config.balloon }}
{{- $env := dict
    "NAMESPACE_LABEL" $c.namespaceLabel
    "NAMESPACE_LABEL_VALUE" $c.namespaceLabelValue
    "TOPOLOGY_KEY" $c.topologyKey
    "ISOLATION" $c.isolation
    "TEKTON_NAMESPACE" $c.tektonNamespace
    "RESYNC_INTERVAL" $c.resyncInterval
    "RESYNC_SETTLED_ROUNDS" $c.resyncSettledRounds
    "BALLOON_STUCK_AFTER" $c.balloonStuckAfter
    "POD_STUCK_AFTER" $c.podStuckAfter
    "API_TIMEOUT" $c.apiTimeout
    "LEASE_DURATION" $c.leaseDuration
    "SHUTDOWN_DRAIN_SECONDS" $c.shutdownDrainSeconds
    "SHUTDOWN_DRAIN_MAX_SECONDS" $c.shutdownDrainMaxSeconds
    "RECONCILE" true
    "LOG_LEVEL" $c.logLevel
    "LOG_FORMAT" $c.logFormat
    "CAPACITY_ANCHOR" $c.capacity.anchor
    "CAPACITY_WAIT_SECONDS" $c.capacity.waitSeconds
    "CLUSTER_AUTOSCALER" $c.capacity.clusterAutoscaler
    "WARM_IMAGES" $c.warm.images
    "RESERVATION_PRIORITY_CLASS_NAME" (printf "%s-reservation" (include "tcs.fullname" .))
    "BALLOON_IMAGE" $b.image
    "BALLOON_RESOURCES" (toJson $b.resources)
    "BALLOON_NODE_SELECTOR" (toJson $b.nodeSelector)
    "BALLOON_TOLERATIONS" (toJson $b.tolerations)
    "BALLOON_IMAGE_PULL_SECRETS" (toJson $b.imagePullSecrets)
    "WEBHOOK_HOST" "0.0.0.0"
    "WEBHOOK_PORT" (ternary .Values.webhook.port 0 $webhook)
    "WEBHOOK_CERT_CHECK_INTERVAL" .Values.webhook.certCheckInterval
    "ADMISSION_MODE" (include "tcs.admissionMode" .)
    "GATE_UNTIL_ANCHORED" .Values.admission.gateUntilAnchored
    "ADMISSION_POLICY_NAME" (include "tcs.fullname" .)
    "ADMISSION_POLICY_VERSION" (include "tcs.admissionPolicyVersion" .)
    "METRICS_HOST" "0.0.0.0"
    "METRICS_PORT" .Values.metrics.port
    "HEALTH_PORT" .Values.health.port
    "LEADER_ELECTION" true
    "LEASE_NAME" (include "tcs.fullname" .)
}}
{{- if $webhook }}
{{- /* A draining replica answers until this Service's endpoints drop it. */}}
{{- $_ := set $env "WEBHOOK_SERVICE" (include "tcs.fullname" .) }}
{{- end }}
{{- $_ := set $env "WEBHOOK_TLS_SECRET" "" }}
{{- $_ := set $env "WEBHOOK_CONFIGURATION" "" }}
{{- if include "tcs.selfManagedTLS" . }}
{{- /* The server keeps its certificate in the Secret and writes it where it reads it. */}}
{{- $_ := set $env "WEBHOOK_TLS_SECRET" (include "tcs.tlsSecretName" .) }}
{{- $_ := set $env "WEBHOOK_CONFIGURATION" (include "tcs.fullname" .) }}
{{- $_ := set $env "WEBHOOK_CERT_FILE" "/tmp/tls/tls.crt" }}
{{- $_ := set $env "WEBHOOK_KEY_FILE" "/tmp/tls/tls.key" }}
{{- else if $webhook }}
{{- $_ := set $env "WEBHOOK_CERT_FILE" "/tls/tls.crt" }}
{{- $_ := set $env "WEBHOOK_KEY_FILE" "/tls/tls.key" }}
{{- end }}
{{- with $b.priorityClassName }}
{{- $_ := set $env "BALLOON_PRIORITY_CLASS_NAME" . }}
{{- end }}
{{- range $key := keys $env | sortAlpha }}
{{- if not (hasKey $extra (printf "COSCHEDULER_%s" $key)) }}
- name: COSCHEDULER_{{ $key }}
  value: {{ get $env $key | toString | quote }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end -}}
