{{/* Names ------------------------------------------------------------- */}}

{{- define "snapflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every resource name: the release name, unless it lacks the chart name. */}}
{{- define "snapflow.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "snapflow.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels: call with (dict "root" $ "component" "webhook"). */}}
{{- define "snapflow.labels" -}}
helm.sh/chart: {{ include "snapflow.chart" .root }}
{{ include "snapflow.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: snapflow
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "snapflow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "snapflow.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Images ------------------------------------------------------------ */}}

{{/* An image by tag, pinned to a digest when one is given. */}}
{{- define "snapflow.imageRef" -}}
{{- printf "%s:%s" .repository .tag -}}
{{- with .digest }}@{{ . }}{{ end -}}
{{- end -}}

{{- define "snapflow.image" -}}
{{- include "snapflow.imageRef" (dict "repository" .Values.image.repository "tag" (default .Chart.AppVersion .Values.image.tag) "digest" .Values.image.digest) -}}
{{- end -}}

{{/* The mover image: the main one unless mover.image names another; the
main digest pins it only when it is the same image. */}}
{{- define "snapflow.moverImage" -}}
{{- $m := .Values.mover.image -}}
{{- $repo := default .Values.image.repository $m.repository -}}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) $m.tag -}}
{{- $digest := $m.digest -}}
{{- if and (not $digest) (not $m.repository) (not $m.tag) -}}
{{- $digest = .Values.image.digest -}}
{{- end -}}
{{- include "snapflow.imageRef" (dict "repository" $repo "tag" $tag "digest" $digest) -}}
{{- end -}}

{{- define "snapflow.moverServiceAccount" -}}
{{- default (printf "%s-mover" (include "snapflow.fullname" .)) .Values.mover.serviceAccount.name -}}
{{- end -}}

{{/* Webhook ----------------------------------------------------------- */}}

{{- define "snapflow.webhook.service" -}}
{{- printf "%s-webhook" (include "snapflow.fullname" .) -}}
{{- end -}}

{{- define "snapflow.webhook.mutating" -}}
{{- printf "%s-mutating" (include "snapflow.fullname" .) -}}
{{- end -}}

{{- define "snapflow.webhook.validating" -}}
{{- printf "%s-validating" (include "snapflow.fullname" .) -}}
{{- end -}}

{{- define "snapflow.webhook.velero" -}}
{{- printf "%s-velero" (include "snapflow.fullname" .) -}}
{{- end -}}

{{/* The Secret the webhook serves from: self-managed, cert-manager's, or the manual one. */}}
{{- define "snapflow.webhook.tlsSecret" -}}
{{- if and (eq .Values.webhook.tls.mode "manual") .Values.webhook.tls.manual.existingSecret -}}
{{- .Values.webhook.tls.manual.existingSecret -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "snapflow.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Annotations of the webhook configurations: cert-manager injects the caBundle. */}}
{{- define "snapflow.webhook.annotations" -}}
{{- if eq .Values.webhook.tls.mode "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s-webhook" .Release.Namespace (include "snapflow.fullname" .) }}
{{- end }}
{{- end -}}

{{/* clientConfig of one webhook: call with (dict "root" $ "path" "/mutate/snapshot"). */}}
{{- define "snapflow.webhook.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "snapflow.webhook.service" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- if eq .root.Values.webhook.tls.mode "manual" }}
  caBundle: {{ .root.Values.webhook.tls.manual.ca | b64enc }}
  {{- end }}
{{- end -}}

{{/* Functions --------------------------------------------------------- */}}

{{/* Every function the chart knows, in a stable order. */}}
{{- define "snapflow.functionNames" -}}
snapshot cleanup retention schedule restore verify maintenance prune
{{- end -}}

{{/* Whether function NAME runs: call with (dict "root" $ "name" "snapshot"); prints "true" or nothing. */}}
{{- define "snapflow.functionEnabled" -}}
{{- if eq .name "prune" -}}
{{- if .root.Values.prune.function.enabled }}true{{ end -}}
{{- else -}}
{{- if (index .root.Values.functions .name).enabled }}true{{ end -}}
{{- end -}}
{{- end -}}

{{- define "snapflow.functionServiceAccount" -}}
{{- if eq .name "prune" -}}
{{- printf "%s-prune" (include "snapflow.fullname" .root) -}}
{{- else -}}
{{- printf "%s-%s" (include "snapflow.fullname" .root) .name -}}
{{- end -}}
{{- end -}}

{{/* In-cluster URL of a function (a Knative Service or the Deployment's Service). */}}
{{- define "snapflow.functionURL" -}}
{{- printf "http://%s-%s.%s.svc" (include "snapflow.fullname" .root) .name .root.Release.Namespace -}}
{{- end -}}

{{- define "snapflow.brokerName" -}}
{{- default (include "snapflow.fullname" .) .Values.knative.broker.name -}}
{{- end -}}

{{/* The sink of function NAME's emitted events, or nothing (it then only logs them). */}}
{{- define "snapflow.functionSink" -}}
{{- $v := .root.Values -}}
{{- if $v.functions.eventSink -}}
{{- $v.functions.eventSink -}}
{{- else if and (not $v.knative.enabled) (eq .name "snapshot") $v.functions.retention.enabled -}}
{{- include "snapflow.functionURL" (dict "root" .root "name" "retention") -}}
{{- end -}}
{{- end -}}

{{/* Arguments of `snapflow function NAME`. */}}
{{- define "snapflow.functionArgs" -}}
{{- $v := .root.Values -}}
- function
- {{ .name }}
- --namespace={{ .root.Release.Namespace }}
- --addr=:{{ $v.functions.port }}
{{- if ne .name "prune" }}
- --mover-image={{ include "snapflow.moverImage" .root }}
- --mover-service-account={{ include "snapflow.moverServiceAccount" .root }}
{{- end }}
{{- if and (eq .name "snapshot") $v.functions.maxConcurrentJobs }}
- --max-concurrent-jobs={{ $v.functions.maxConcurrentJobs }}
{{- end }}
{{- if and (has .name (list "snapshot" "schedule")) $v.globalVolumePolicies.name }}
- --global-backup-volume-policies-configmap={{ $v.globalVolumePolicies.name }}
{{- end }}
{{- if eq .name "prune" }}
- --prune-record={{ include "snapflow.fullname" .root }}-prune-record
{{- end }}
{{- if eq .name "schedule" }}
- --coverage-every={{ $v.functions.schedule.coverage.every }}
- --coverage-grace={{ $v.functions.schedule.coverage.grace }}
{{- end }}
{{- if eq .name "snapshot" }}
{{- range $v.functions.snapshot.hookDenyCIDRs }}
- --hook-deny-cidr={{ . }}
{{- end }}
{{- range $v.functions.snapshot.hookAllowCIDRs }}
- --hook-allow-cidr={{ . }}
{{- end }}
{{- end }}
{{- if and (or (eq .name "snapshot") (eq .name "restore")) $v.functions.snapshot.workloadExecHooks }}
- --workload-exec-hooks
{{- end }}
{{- if and (or (eq .name "snapshot") (eq .name "restore")) (not $v.functions.progress) }}
- --progress=false
{{- end }}
{{- if eq .name "cleanup" }}
- --delete-window={{ $v.functions.cleanup.deleteWindow }}
{{- end }}
{{- if eq .name "maintenance" }}
- --default-maintenance-quick={{ $v.functions.maintenance.defaultSchedule.quick }}
- --default-maintenance-full={{ $v.functions.maintenance.defaultSchedule.full }}
{{- end }}
{{- if include "snapflow.sinkToken" . }}
- --sink-token-file=/var/run/secrets/snapflow/token
{{- end }}
{{- if and (include "snapflow.senderAuth" .root) $v.knative.enabled }}
{{- /* Knative Eventing's OIDC: the Broker delivers each Trigger's events
with that Trigger's token, issued for the audience the Trigger names; what
a function emits goes to the Broker with the SinkBinding's token. */}}
- --sender-audience={{ include "snapflow.knativeAudience" . }}
{{- $fn := .name -}}
{{- range include "snapflow.knativeTriggers" .root | fromJsonArray }}
{{- if eq .fn $fn }}
- --trusted-trigger={{ .name }}
{{- end }}
{{- end }}
{{- if and (eq .name "prune") $v.prune.s3Source.enabled }}
- --trusted-sender=system:serviceaccount:{{ .root.Release.Namespace }}:{{ include "snapflow.fullname" .root }}-s3-source
{{- end }}
{{- range $v.functions.senderAuth.trustedSenders }}
- --trusted-sender={{ . }}
{{- end }}
{{- if not $v.functions.eventSink }}
- --sink-token-file=/oidc/token
{{- end }}
{{- else if include "snapflow.senderAuth" .root }}
- --sender-audience={{ $v.functions.senderAuth.audience }}
{{- range include "snapflow.trustedSenders" .root | splitList " " }}
- --trusted-sender={{ . }}
{{- end }}
{{- else }}
- --insecure-accept-any-sender
{{- end }}
{{- if $v.devLogs }}
- --dev-logs
{{- end }}
{{- end -}}

{{/* Environment of function NAME: its sink and, for prune, the KBBACKUP_PRUNE_* settings. */}}
{{- define "snapflow.functionEnv" -}}
{{- $sink := include "snapflow.functionSink" . -}}
- name: SNAPFLOW_IMAGE
  value: {{ include "snapflow.image" .root | quote }}
{{- if $sink }}
- name: K_SINK
  value: {{ $sink | quote }}
{{- end }}
{{- if eq .name "prune" }}
{{ include "snapflow.pruneEnv" .root }}
- name: KBBACKUP_PRUNE_CONFIRM
  value: {{ .root.Values.prune.function.confirm | quote }}
{{- with .root.Values.prune.minAge }}
- name: KBBACKUP_PRUNE_MIN_AGE
  value: {{ . | quote }}
{{- end }}
- name: KBBACKUP_PRUNE_INCLUDE_RETAINED
  value: {{ .root.Values.prune.includeRetained | quote }}
- name: KBBACKUP_PRUNE_DELETE_REPOSITORY_STRAY
  value: {{ .root.Values.prune.deleteRepositoryStray | quote }}
- name: KBBACKUP_PRUNE_BUCKET_VERSIONING
  value: {{ .root.Values.prune.bucketVersioning | quote }}
- name: KBBACKUP_PRUNE_PURGE_VERSIONS
  value: {{ .root.Values.prune.purgeVersions | quote }}
- name: KBBACKUP_PRUNE_PATH_STYLE
  value: {{ .root.Values.prune.pathStyle | quote }}
- name: KBBACKUP_PRUNE_USE_BACKUP_REPO_CREDENTIALS
  value: {{ .root.Values.prune.useBackupRepoCredentials | quote }}
- name: KBBACKUP_PRUNE_CONCURRENCY
  value: {{ .root.Values.prune.concurrency | quote }}
- name: KBBACKUP_PRUNE_TIMEOUT
  value: {{ .root.Values.prune.timeout | quote }}
{{- with .root.Values.prune.s3Source.snsTopicArns }}
- name: KBBACKUP_PRUNE_SNS_TOPIC_ARNS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .root.Values.prune.s3Source.snsMaxAge }}
- name: KBBACKUP_PRUNE_SNS_MAX_AGE
  value: {{ . | quote }}
{{- end }}
{{- with .root.Values.prune.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Prune ------------------------------------------------------------- */}}

{{/* KBBACKUP_PRUNE_* variables shared by the CLI and the function. */}}
{{- define "snapflow.pruneEnv" -}}
{{- $p := .Values.prune -}}
- name: KBBACKUP_PRUNE_BACKUP_REPO
  value: {{ $p.backupRepo | quote }}
{{- with $p.namespace }}
- name: KBBACKUP_PRUNE_NAMESPACE
  value: {{ . | quote }}
{{- end }}
{{- with $p.prefix }}
- name: KBBACKUP_PRUNE_PREFIX
  value: {{ . | quote }}
{{- end }}
{{- with $p.bucket }}
- name: KBBACKUP_PRUNE_BUCKET
  value: {{ . | quote }}
{{- end }}
{{- with $p.endpoint }}
- name: KBBACKUP_PRUNE_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with $p.region }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The word `snapflow prune` demands for the flags (internal/prune/confirm.go). */}}
{{- define "snapflow.pruneWord" -}}
{{- if and .includeRetained .deleteRepositoryStray -}}DELETE-RETAINED-AND-STRAY
{{- else if .includeRetained -}}DELETE-RETAINED
{{- else if .deleteRepositoryStray -}}DELETE-STRAY
{{- else -}}DELETE
{{- end -}}
{{- end -}}

{{/* Non-empty when Knative mode runs the progress-only kube source: progress
is on, kubeSource.progress is not zero, and a function that reads it runs. */}}
{{- define "snapflow.progressSource" -}}
{{- $p := toString .Values.kubeSource.progress -}}
{{- $movers := or (include "snapflow.functionEnabled" (dict "root" . "name" "snapshot")) (include "snapflow.functionEnabled" (dict "root" . "name" "restore")) -}}
{{- /* Zero in any spelling (0s, 0m0s, 0.0h) has no digit but 0. */ -}}
{{- if and .Values.knative.enabled .Values.functions.progress $movers (regexMatch "[1-9]" $p) -}}true{{- end -}}
{{- end -}}

{{/* Non-empty when the functions check their senders' tokens. */}}
{{- define "snapflow.senderAuth" -}}
{{- if .Values.functions.senderAuth.enabled -}}true{{- end -}}
{{- end -}}

{{/* The audience function NAME's Knative Service is addressed with, in
Knative's own format; each Trigger's subscriber names it. */}}
{{- define "snapflow.knativeAudience" -}}
{{- printf "serving.knative.dev/service/%s/%s-%s" .root.Release.Namespace (include "snapflow.fullname" .root) .name | lower -}}
{{- end -}}

{{/* The Triggers, as a JSON list of {name, fn, filter}: one per (function,
CloudEvent type), filtering on `type` exactly as docs/events.md lists who
consumes what. The prune function gets only its own PingSource's ticks
(filtered on `source` too), never the minute tick. */}}
{{- define "snapflow.knativeTriggers" -}}
{{- $root := . -}}
{{- $fullname := include "snapflow.fullname" . -}}
{{- $apiserver := dict "add" "dev.knative.apiserver.resource.add" "update" "dev.knative.apiserver.resource.update" "delete" "dev.knative.apiserver.resource.delete" -}}
{{- $ping := "dev.knative.sources.ping" -}}
{{- $tickSource := printf "/apis/v1/namespaces/%s/pingsources/%s-tick" .Release.Namespace $fullname -}}
{{- $triggers := list -}}
{{- range $name := list "snapshot" "cleanup" "retention" "schedule" "restore" "verify" "maintenance" }}
{{- range $short, $type := $apiserver }}
{{- $triggers = append $triggers (dict "fn" $name "short" $short "filter" (dict "type" $type)) }}
{{- end }}
{{- $triggers = append $triggers (dict "fn" $name "short" "ping" "filter" (dict "type" $ping "source" $tickSource)) }}
{{- end }}
{{- $triggers = append $triggers (dict "fn" "retention" "short" "succeeded" "filter" (dict "type" "dev.snapflow.snapshot.succeeded")) }}
{{- $triggers = append $triggers (dict "fn" "retention" "short" "unchanged" "filter" (dict "type" "dev.snapflow.snapshot.unchanged")) }}
{{- $triggers = append $triggers (dict "fn" "snapshot" "short" "requested" "filter" (dict "type" "dev.snapflow.snapshot.requested")) }}
{{- $triggers = append $triggers (dict "fn" "restore" "short" "requested" "filter" (dict "type" "dev.snapflow.restore.requested")) }}
{{- $triggers = append $triggers (dict "fn" "prune" "short" "requested" "filter" (dict "type" "dev.snapflow.prune.requested")) }}
{{- $triggers = append $triggers (dict "fn" "prune" "short" "s3" "filter" (dict "type" "dev.snapflow.s3.notification")) }}
{{- $triggers = append $triggers (dict "fn" "prune" "short" "ping" "filter" (dict "type" $ping "source" (printf "/apis/v1/namespaces/%s/pingsources/%s-prune-tick" $root.Release.Namespace $fullname))) }}
{{- $out := list -}}
{{- range $triggers }}
{{- if include "snapflow.functionEnabled" (dict "root" $root "name" .fn) }}
{{- $out = append $out (dict "name" (printf "%s-%s-%s" $fullname .fn .short) "fn" .fn "filter" .filter) }}
{{- end }}
{{- end }}
{{- toJson $out -}}
{{- end -}}

{{/* The users that may send any event: snapflow's sources and the listed ones. */}}
{{- define "snapflow.trustedSenders" -}}
{{- $fullname := include "snapflow.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $out := list (printf "system:serviceaccount:%s:%s-kube-source" $ns $fullname) -}}
{{- if .Values.prune.s3Source.enabled -}}
{{- $out = append $out (printf "system:serviceaccount:%s:%s-s3-source" $ns $fullname) -}}
{{- end -}}
{{- if and (not .Values.functions.eventSink) .Values.functions.retention.enabled -}}
{{- $out = append $out (printf "system:serviceaccount:%s:%s-snapshot" $ns $fullname) -}}
{{- end -}}
{{- join " " (concat $out .Values.functions.senderAuth.trustedSenders) -}}
{{- end -}}

{{/* A source's projected token for the functions (volume and mount). */}}
{{- define "snapflow.senderTokenVolume" -}}
- name: sender-token
  projected:
    sources:
      - serviceAccountToken:
          {{- if .Values.knative.enabled }}
          {{- /* Only the S3 source sends directly to a Knative Service: prune. */}}
          audience: {{ include "snapflow.knativeAudience" (dict "root" . "name" "prune") }}
          {{- else }}
          audience: {{ .Values.functions.senderAuth.audience }}
          {{- end }}
          expirationSeconds: 3600
          path: token
{{- end -}}
{{- define "snapflow.senderTokenMount" -}}
- name: sender-token
  mountPath: /var/run/secrets/snapflow
  readOnly: true
{{- end -}}

{{/* Non-empty when function NAME sends its events to another function
(snapshot to retention without Knative) and so carries a token. */}}
{{- define "snapflow.sinkToken" -}}
{{- $v := .root.Values -}}
{{- if and (include "snapflow.senderAuth" .root) (not $v.knative.enabled) (eq .name "snapshot") (not $v.functions.eventSink) $v.functions.retention.enabled -}}true{{- end -}}
{{- end -}}

{{/*
snapflow.seconds turns a duration written as a whole number of days, hours
or minutes ("26h", "8d", "90m") into seconds for an alert's threshold, and
refuses anything else so a typo fails the install instead of an alert.
*/}}
{{- define "snapflow.seconds" -}}
{{- $v := toString . -}}
{{- if not (regexMatch "^[1-9][0-9]*[dhm]$" $v) -}}
{{- fail (printf "monitoring.prometheusRule: %q is not a duration like 26h, 8d or 90m" $v) -}}
{{- end -}}
{{- $n := atoi (trimSuffix "d" (trimSuffix "h" (trimSuffix "m" $v))) -}}
{{- if hasSuffix "d" $v }}{{ mul $n 86400 }}{{ else if hasSuffix "h" $v }}{{ mul $n 3600 }}{{ else }}{{ mul $n 60 }}{{ end -}}
{{- end -}}

{{/*
snapflow.duration checks a duration for an alert's for: the same forms as
snapflow.seconds, written back as given.
*/}}
{{- define "snapflow.duration" -}}
{{- $_ := include "snapflow.seconds" . -}}
{{- . -}}
{{- end -}}
