{{/* Chart name, overridable with nameOverride. */}}
{{- define "sweeper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the objects: fullnameOverride, else the release name when it contains the chart name
(release "sweeper" gives "sweeper", as in deploy/manifests), else "<release>-<chart>".
*/}}
{{- define "sweeper.fullname" -}}
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

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "sweeper.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "sweeper.labels" -}}
helm.sh/chart: {{ include "sweeper.chart" . }}
{{ include "sweeper.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the pods (Deployment selector, Service selector). */}}
{{- define "sweeper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sweeper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the pods run as. */}}
{{- define "sweeper.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sweeper.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image, "<registry>/<path>:<tag>" (tag: image.tag, else the chart's appVersion). A repository
whose first component names no registry host (a dot, a port or "localhost", as Docker reads it), such
as a bare "sweeper", resolves on Docker Hub, where no sweeper image is published: the chart refuses
it. The released chart's default is the release's own image (deploy/release.env); from a checkout,
`make image` and load it into kind or push it, then set image.repository (README, "Get sweeper").
*/}}
{{- define "sweeper.image" -}}
{{- $repo := required "image.repository is required" .Values.image.repository }}
{{- $host := index (splitList "/" $repo) 0 }}
{{- if not (and (contains "/" $repo) (or (contains "." $host) (contains ":" $host) (eq $host "localhost"))) }}
{{- fail (printf "image.repository %q names no registry: it would resolve on Docker Hub, where sweeper publishes nothing. Use the release's image (the chart's default), or build one (make image), load it into kind or push it, and set image.repository=<registry>/<path>" $repo) }}
{{- end }}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{/* Name of the leader-election Role and RoleBinding. */}}
{{- define "sweeper.leaderElectionName" -}}
{{- printf "%s-leader-election" (include "sweeper.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
SWEEPER_FEATURE_GATES: the four known gates first, in the order sweeper documents them, then any
other gate sorted by name. A gate left out of featureGates keeps sweeper's default.
*/}}
{{- define "sweeper.featureGates" -}}
{{- $known := list "CascadeGC" "TenantGC" "ExternalResourceGC" "AlternativeGCStrategy" }}
{{- $gates := list }}
{{- range $known }}
{{- if hasKey $.Values.featureGates . }}
{{- $gates = append $gates (printf "%s=%v" . (index $.Values.featureGates .)) }}
{{- end }}
{{- end }}
{{- range $gate, $on := .Values.featureGates }}
{{- if not (has $gate $known) }}
{{- $gates = append $gates (printf "%s=%v" $gate $on) }}
{{- end }}
{{- end }}
{{- join "," $gates }}
{{- end }}

{{/*
"true" when only the external collector runs (CascadeGC and TenantGC both off): the chart then
grants the least-privilege role of deploy/manifests/external-only instead of the cluster-wide one.
*/}}
{{- define "sweeper.externalOnly" -}}
{{- if and (not .Values.featureGates.CascadeGC) (not .Values.featureGates.TenantGC) }}true{{ end }}
{{- end }}

{{/*
A duration of one unit ("90s", "30m", "1h", "2d") in seconds, for PromQL comparisons.
*/}}
{{- define "sweeper.seconds" -}}
{{- $d := toString . }}
{{- $units := dict "s" 1 "m" 60 "h" 3600 "d" 86400 }}
{{- $unit := substr (int (sub (len $d) 1)) (len $d) $d }}
{{- $n := trimSuffix $unit $d }}
{{- if and (hasKey $units $unit) (regexMatch "^[0-9]+$" $n) }}
{{- mul (int $n) (get $units $unit) }}
{{- else }}
{{- fail (printf "%q is not a duration of one unit (90s, 30m, 1h, 2d)" $d) }}
{{- end }}
{{- end }}

{{/*
The container environment of sweeper: the Deployment's, and the `helm test` pod's (sweeper check
reads the same variables as sweeper run, so it checks the configuration the service runs with).
*/}}
{{- define "sweeper.env" -}}
- name: SWEEPER_FEATURE_GATES
  value: {{ include "sweeper.featureGates" . | quote }}
- name: SWEEPER_LOG_FORMAT
  value: {{ .Values.logFormat | quote }}
- name: SWEEPER_HTTP_ADDR
  value: "0.0.0.0:8080"
- name: SWEEPER_KUBE_API_QPS
  value: {{ .Values.kubeApi.qps | quote }}
- name: SWEEPER_KUBE_API_BURST
  value: {{ .Values.kubeApi.burst | quote }}
{{- with .Values.concurrency.cascadeWorkers }}
- name: SWEEPER_CASCADE_WORKERS
  value: {{ . | quote }}
{{- end }}
- name: SWEEPER_TENANT_DELETE_CONCURRENCY
  value: {{ .Values.concurrency.tenantDeletes | quote }}
- name: SWEEPER_LEADER_ELECT
  value: {{ .Values.leaderElection.enabled | quote }}
{{- if .Values.leaderElection.enabled }}
- name: SWEEPER_LEADER_ELECT_LEASE_NAME
  value: {{ .Values.leaderElection.leaseName | quote }}
- name: SWEEPER_LEADER_ELECT_LEASE_DURATION
  value: {{ .Values.leaderElection.leaseDuration | quote }}
- name: SWEEPER_LEADER_ELECT_RENEW_DEADLINE
  value: {{ .Values.leaderElection.renewDeadline | quote }}
- name: SWEEPER_LEADER_ELECT_RETRY_PERIOD
  value: {{ .Values.leaderElection.retryPeriod | quote }}
- name: SWEEPER_LEADER_ELECT_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: SWEEPER_LEADER_ELECT_IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}
- name: SWEEPER_CAPA_NAMESPACE
  value: {{ .Values.external.capaNamespace | quote }}
- name: SWEEPER_EXTERNAL_CONCURRENCY
  value: {{ .Values.external.concurrency | quote }}
{{- with .Values.external.gcSelector }}
- name: SWEEPER_EXTERNAL_GC_SELECTOR
  value: {{ . | quote }}
{{- end }}
{{- with .Values.external.scopeNamespaces }}
- name: SWEEPER_SCOPE_NAMESPACES
  value: {{ join "," . | quote }}
{{- end }}
{{- if .Values.external.dryRun }}
- name: SWEEPER_EXTERNAL_DRY_RUN
  value: "true"
{{- end }}
{{- if not .Values.external.ebsSnapshot }}
- name: SWEEPER_EXTERNAL_EBS_SNAPSHOT
  value: "false"
{{- end }}
{{- if not (has (toString .Values.scan.interval) (list "0" "0s" "")) }}
- name: SWEEPER_SCAN_INTERVAL
  value: {{ .Values.scan.interval | quote }}
{{- with .Values.scan.regions }}
- name: SWEEPER_SCAN_REGIONS
  value: {{ join "," . | quote }}
{{- end }}
{{- with .Values.scan.notOurs }}
- name: SWEEPER_SCAN_NOT_OURS
  value: {{ join "," . | quote }}
{{- end }}
{{- end }}
{{- if ne (toString .Values.archive.mode) "all" }}
- name: SWEEPER_ARCHIVE
  value: {{ .Values.archive.mode | quote }}
{{- end }}
{{- if ne (toString .Values.archive.ttl) "72h" }}
- name: SWEEPER_ARCHIVE_TTL
  value: {{ .Values.archive.ttl | quote }}
{{- end }}
{{- if ne (int .Values.archive.maxObjectBytes) 524288 }}
- name: SWEEPER_ARCHIVE_MAX_OBJECT_BYTES
  value: {{ .Values.archive.maxObjectBytes | quote }}
{{- end }}
{{- with .Values.aws.region }}
- name: AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- with .Values.aws.endpointUrl }}
- name: AWS_ENDPOINT_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.aws.credentialsSecret }}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $.Values.aws.accessKeyIdKey | quote }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $.Values.aws.secretAccessKeyKey | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end }}

{{/*
How a PodMonitor or ServiceMonitor reaches the HTTP port: HTTPS with the scraper service account's
token (templates/metrics-reader.yaml), the certificate verified against http.tlsSecret's ca.crt
when there is one, else not verified (the default certificate is self-signed).
*/}}
{{- define "sweeper.scrapeAuth" -}}
{{- if .Values.http.insecure -}}
scheme: http
{{- else -}}
scheme: https
authorization:
  type: Bearer
  credentials:
    name: {{ include "sweeper.fullname" . }}-metrics-scraper
    key: token
tlsConfig:
  {{- if .Values.http.tlsSecret }}
  ca:
    secret:
      name: {{ .Values.http.tlsSecret }}
      key: ca.crt
  serverName: {{ include "sweeper.fullname" . }}.{{ .Release.Namespace }}.svc
  {{- else }}
  insecureSkipVerify: true
  {{- end }}
{{- end }}
{{- end }}
