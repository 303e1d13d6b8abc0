{{/* Names and labels. */}}

{{- define "rkcm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rkcm.fullname" -}}
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

{{- define "rkcm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rkcm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rkcm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rkcm.labels" -}}
helm.sh/chart: {{ include "rkcm.chart" . }}
{{ include "rkcm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller-manager
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "rkcm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rkcm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "rkcm.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.resourceNamespace }}
{{- end }}

{{- define "rkcm.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The controllers the chart grants RBAC to: canonical names of the kube-controller-manager
controllers rkcm implements or will implement (spec/manager.md §1.3), alphabetical. None of
them is off by default upstream.
*/}}
{{- define "rkcm.inScopeControllers" -}}
cronjob-controller daemonset-controller deployment-controller garbage-collector-controller job-controller pod-garbage-collector-controller replicaset-controller replicationcontroller-controller statefulset-controller ttl-after-finished-controller
{{- end }}

{{/* Legacy aliases (pre-1.29 short names) of the in-scope controllers. */}}
{{- define "rkcm.aliases" -}}
cronjob: cronjob-controller
daemonset: daemonset-controller
deployment: deployment-controller
garbagecollector: garbage-collector-controller
job: job-controller
podgc: pod-garbage-collector-controller
replicaset: replicaset-controller
replicationcontroller: replicationcontroller-controller
statefulset: statefulset-controller
ttl-after-finished: ttl-after-finished-controller
{{- end }}

{{/*
"true" if `--controllers` (.Values.controllers) enables the controller named by .name,
else "". Upstream IsControllerEnabled: walk the list in order, the first entry naming the
controller decides ('name' on, '-name' off, aliases resolved first); undecided = on if a
'*' was seen (no in-scope controller is off by default). The garbage collector also needs
--enable-garbage-collector.
Call: include "rkcm.controllerEnabled" (dict "name" $name "root" $)
*/}}
{{- define "rkcm.controllerEnabled" -}}
{{- $name := .name }}
{{- $aliases := include "rkcm.aliases" .root | fromYaml }}
{{- $decided := "" }}
{{- $star := false }}
{{- range .root.Values.controllers }}
{{- if not $decided }}
{{- $entry := toString . }}
{{- if eq $entry "*" }}
{{- $star = true }}
{{- else }}
{{- $bare := trimPrefix "-" $entry }}
{{- $canonical := default $bare (get $aliases $bare) }}
{{- if eq $canonical $name }}
{{- $decided = ternary "off" "on" (hasPrefix "-" $entry) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $on := or (eq $decided "on") (and (eq $decided "") $star) }}
{{- if and $on (eq $name "garbage-collector-controller") (not .root.Values.enableGarbageCollector) }}
{{- $on = false }}
{{- end }}
{{- if $on }}true{{ end }}
{{- end }}

{{/*
Per-controller RBAC rules: upstream's bootstrap policy for the controller's ServiceAccount
(plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go, `system:controller:<sa>`),
verbatim. Each role already covers the list/watch of every informer its controller reads,
which upstream grants to the manager identity instead (list and watch on every resource).
*/}}

{{- define "rkcm.eventsRule" -}}
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "update", "patch"]
{{- end }}

{{- define "rkcm.rules.cronjob-controller" -}}
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "update", "delete", "patch"]
- apiGroups: ["batch"]
  resources: ["cronjobs/status"]
  verbs: ["update"]
- apiGroups: ["batch"]
  resources: ["cronjobs/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "delete"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{- define "rkcm.rules.daemonset-controller" -}}
- apiGroups: ["extensions", "apps"]
  resources: ["daemonsets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["extensions", "apps"]
  resources: ["daemonsets/status"]
  verbs: ["update"]
- apiGroups: ["extensions", "apps"]
  resources: ["daemonsets/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "create", "delete", "patch"]
- apiGroups: [""]
  resources: ["pods/binding"]
  verbs: ["create"]
- apiGroups: ["apps"]
  resources: ["controllerrevisions"]
  verbs: ["get", "list", "watch", "create", "delete", "update", "patch"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{- define "rkcm.rules.deployment-controller" -}}
- apiGroups: ["extensions", "apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: ["extensions", "apps"]
  resources: ["deployments/status"]
  verbs: ["update"]
- apiGroups: ["extensions", "apps"]
  resources: ["deployments/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps", "extensions"]
  resources: ["replicasets"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "update"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{- define "rkcm.rules.garbage-collector-controller" -}}
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["get", "list", "watch", "patch", "update", "delete"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{- define "rkcm.rules.job-controller" -}}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["batch"]
  resources: ["jobs/status"]
  verbs: ["update"]
- apiGroups: ["batch"]
  resources: ["jobs/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "create", "delete", "patch"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{/* Upstream grants PodGC no events rule: it emits none. */}}
{{- define "rkcm.rules.pod-garbage-collector-controller" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "delete"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
{{- end }}

{{- define "rkcm.rules.replicaset-controller" -}}
- apiGroups: ["apps", "extensions"]
  resources: ["replicasets"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: ["apps", "extensions"]
  resources: ["replicasets/status"]
  verbs: ["update"]
- apiGroups: ["apps", "extensions"]
  resources: ["replicasets/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "patch", "create", "delete"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{- define "rkcm.rules.replicationcontroller-controller" -}}
- apiGroups: [""]
  resources: ["replicationcontrollers"]
  verbs: ["get", "list", "watch", "update"]
- apiGroups: [""]
  resources: ["replicationcontrollers/status"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["replicationcontrollers/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "patch", "create", "delete"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{- define "rkcm.rules.statefulset-controller" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["apps"]
  resources: ["statefulsets/status"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["statefulsets/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "create", "delete", "update", "patch"]
- apiGroups: ["apps"]
  resources: ["controllerrevisions"]
  verbs: ["get", "create", "delete", "update", "patch", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "create", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["update", "delete"]
- apiGroups: [""]
  resources: ["pods/finalizers"]
  verbs: ["update"]
{{- /* Not upstream's: the stuck-rollout recovery leaves pods on nodes that are not Ready. */}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
{{ include "rkcm.eventsRule" . }}
{{- end }}

{{- define "rkcm.rules.ttl-after-finished-controller" -}}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "delete"]
{{ include "rkcm.eventsRule" . }}
{{- end }}
