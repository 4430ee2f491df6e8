{{- /* The pod template of the prune Job and CronJob: `snapflow prune plan|prune`. */ -}}
{{- define "snapflow.prunePod" -}}
{{- $p := .Values.prune -}}
metadata:
  labels:
    {{- include "snapflow.labels" (dict "root" $ "component" "prune") | nindent 4 }}
spec:
  serviceAccountName: {{ include "snapflow.fullname" . }}-prune
  restartPolicy: Never
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: prune
      image: {{ include "snapflow.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - prune
        - {{ $p.command }}
        - --output={{ $p.output }}
        - --timeout={{ $p.timeout }}
        - --bucket-versioning={{ $p.bucketVersioning }}
        - --use-backup-repo-credentials={{ $p.useBackupRepoCredentials }}
        {{- with $p.minAge }}
        - --min-age={{ . }}
        {{- end }}
        {{- if $p.pathStyle }}
        - --path-style
        {{- end }}
        {{- if $p.includeRetained }}
        - --include-retained
        {{- end }}
        {{- if $p.deleteRepositoryStray }}
        - --delete-repository-stray
        {{- end }}
        {{- if $p.purgeVersions }}
        - --purge-versions
        {{- end }}
        {{- if eq $p.command "plan" }}
        {{- if $p.failOnOrphans }}
        - --fail-on-orphans
        {{- end }}
        {{- else }}
        - --concurrency={{ $p.concurrency }}
        - --dry-run={{ $p.dryRun }}
        {{- if not $p.dryRun }}
        - --confirm={{ $p.confirm }}
        {{- end }}
        {{- end }}
        {{- with $p.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        - name: KBBACKUP_PRUNE_KUBE_MODE
          value: in-cluster
        {{- include "snapflow.pruneEnv" . | nindent 8 }}
        {{- with $p.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      resources:
        {{- toYaml $p.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.containerSecurityContext | nindent 8 }}
      {{- with $p.extraVolumeMounts }}
      volumeMounts:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  {{- with $p.extraVolumes }}
  volumes:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
