{{/* The release's base name: <fullname>-<part> names every object. */}}
{{- define "reverser.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "reverser.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; (dict "root" $ "component" "catalog"). */}}
{{- define "reverser.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{ include "reverser.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: reverser
{{- end -}}

{{- define "reverser.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reverser.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* <registry>/<repository>:<tag>; (dict "root" $ "image" .Values.catalog.image). */}}
{{- define "reverser.image" -}}
{{- $registry := .root.Values.image.registry -}}
{{- $tag := .image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- if $registry -}}
{{- printf "%s/%s:%s" $registry .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "reverser.pullPolicy" -}}
{{- .image.pullPolicy | default .root.Values.image.pullPolicy -}}
{{- end -}}

{{/* The Secret holding a certificate; (dict "root" $ "cert" "catalog"). */}}
{{- define "reverser.certSecret" -}}
{{- $names := .root.Values.certificates.secretNames -}}
{{- $default := printf "%s-%s-tls" (include "reverser.fullname" .root) (.cert | kebabcase) -}}
{{- index $names .cert | default $default -}}
{{- end -}}

{{/* In-cluster DNS names of a Service. */}}
{{- define "reverser.dnsNames" -}}
{{- $ns := .root.Release.Namespace -}}
{{ .service }},{{ .service }}.{{ $ns }},{{ .service }}.{{ $ns }}.svc,{{ .service }}.{{ $ns }}.svc.cluster.local
{{- end -}}

{{- define "reverser.serviceAccountName" -}}
{{- printf "%s-%s" (include "reverser.fullname" .root) .component -}}
{{- end -}}

{{/* host:port of a service's gRPC port. */}}
{{- define "reverser.grpcAddress" -}}
{{- printf "%s-%s.%s.svc:%v" (include "reverser.fullname" .root) .component .root.Release.Namespace .root.Values.ports.grpc -}}
{{- end -}}

{{- define "reverser.redisAddress" -}}
{{- if .Values.redis.embedded -}}
{{- printf "%s-redis.%s.svc:6379" (include "reverser.fullname" .) .Release.Namespace -}}
{{- else -}}
{{- required "redis.address is required when redis.embedded is false" .Values.redis.address -}}
{{- end -}}
{{- end -}}

{{- define "reverser.redisPasswordSecret" -}}
{{- .Values.redis.auth.existingSecret | default (printf "%s-redis-auth" (include "reverser.fullname" .)) -}}
{{- end -}}

{{- define "reverser.bodyKeysSecret" -}}
{{- .Values.redis.bodyKeys.existingSecret | default (printf "%s-redis-body-keys" (include "reverser.fullname" .)) -}}
{{- end -}}

{{/* The audit webhook URL the API server posts to. */}}
{{- define "reverser.auditUrl" -}}
{{- if .Values.servers.audit.apiServer.url -}}
{{- .Values.servers.audit.apiServer.url -}}
{{- else if eq .Values.auditService.type "NodePort" -}}
{{- printf "https://<a node's address>:%v/audit-webhook" (.Values.auditService.nodePort | default "<the nodePort>") -}}
{{- else if eq .Values.auditService.type "LoadBalancer" -}}
{{- printf "https://<the load balancer's address>:%v/audit-webhook" .Values.auditService.port -}}
{{- else -}}
{{- printf "https://%s-audit.%s.svc:%v/audit-webhook" (include "reverser.fullname" .) .Release.Namespace .Values.auditService.port -}}
{{- end -}}
{{- end -}}

{{/* Pod scheduling shared by every workload; (dict "root" $ "component" "catalog"). */}}
{{- define "reverser.scheduling" -}}
{{- $v := .root.Values -}}
{{- if ne $v.podAntiAffinity "none" }}
affinity:
  podAntiAffinity:
    {{- if eq $v.podAntiAffinity "hard" }}
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "reverser.selectorLabels" . | nindent 12 }}
    {{- else }}
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "reverser.selectorLabels" . | nindent 14 }}
    {{- end }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- tpl (toYaml .) $.root | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The mesh TLS flags and the flags every service shares. */}}
{{- define "reverser.commonArgs" -}}
- --listen_address=0.0.0.0
- --grpc_port={{ .root.Values.ports.grpc }}
- --http_port={{ .root.Values.ports.http }}
- --log_level={{ .root.Values.logLevel }}
- --shutdown_grace={{ .root.Values.shutdownGrace }}
- --grpc_tls_ca=/etc/reverser/mesh/ca.crt
- --grpc_tls_cert=/etc/reverser/mesh/tls.crt
- --grpc_tls_key=/etc/reverser/mesh/tls.key
- --admin_auth={{ .root.Values.admin.auth }}
{{- end -}}

{{/* Membership flags of the services whose replicas share work (materializer, splicer,
gitworker): each pod's Lease is named after the pod, in the release namespace. The gitworker
advertises its pod IP, where the splicers that route a branch to it dial; the catalog has no
replicas of its own but routes CommitRequests by the gitworkers' Leases too. A routed client (and
a gitworker asking the others for `reverserctl branches`) dials a pod IP, which the gitworker's
certificate does not name: it checks the gitworker Service's name, which the certificate carries
(reverser.certificateList). A materializer with the audit intake runs once, without a Lease
(deployments.yaml refuses more than one replica of it). */}}
{{- define "reverser.membershipArgs" -}}
{{- $m := .root.Values.membership -}}
{{- $auditIntake := and (eq .component "materializer") (eq .root.Values.materializer.intake "audit") }}
{{- if and $m.enabled (not $auditIntake) (or (eq .component "materializer") (eq .component "splicer") (eq .component "gitworker") (eq .component "catalog")) }}
{{- if ne .component "catalog" }}
- --membership=true
{{- end }}
- --membership_namespace=$(POD_NAMESPACE)
{{- if ne .component "catalog" }}
- --replica_id=$(POD_NAME)
{{- end }}
- --membership_lease_duration={{ $m.leaseDuration }}
- --membership_renew_deadline={{ $m.renewDeadline }}
- --membership_renew_period={{ $m.renewPeriod }}
- --membership_grace={{ $m.grace }}
{{- if eq .component "gitworker" }}
- --advertise_address=$(POD_IP):{{ .root.Values.ports.grpc }}
{{- end }}
{{- if or (eq .component "splicer") (eq .component "catalog") }}
- --gitworker_membership=true
{{- end }}
{{- if or (eq .component "splicer") (eq .component "catalog") (eq .component "gitworker") }}
- --gitworker_tls_server_name={{ include "reverser.gitworkerServerName" .root }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The gitworker Service's name, one of the DNS names its mesh certificate carries. */}}
{{- define "reverser.gitworkerServerName" -}}
{{- printf "%s-gitworker.%s.svc" (include "reverser.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Redis flags of the catalog, the materializer and the splicer. The body key is apart
(reverser.bodyKeyArgs): only the services that read or write object bodies get it. */}}
{{- define "reverser.redisArgs" -}}
{{- $r := .Values.redis -}}
{{- if and (not $r.embedded) $r.sentinel.addresses -}}
- --redis_sentinels={{ join "," $r.sentinel.addresses }}
- --redis_sentinel_master={{ required "redis.sentinel.masterName is required with redis.sentinel.addresses" $r.sentinel.masterName }}
{{- else -}}
- --redis_address={{ include "reverser.redisAddress" . }}
{{- end }}
- --redis_key_prefix={{ $r.keyPrefix }}
{{- if $r.username }}
- --redis_username={{ $r.username }}
{{- end }}
- --redis_password_file=/etc/reverser/redis-auth/password
{{- if $r.tls.enabled }}
{{- if or $r.embedded $r.tls.caSecret }}
- --redis_tls_ca=/etc/reverser/redis-ca/ca.crt
{{- else }}
- --redis_tls
{{- end }}
{{- if or $r.embedded $r.tls.clientCertSecret }}
- --redis_tls_cert=/etc/reverser/redis-client/tls.crt
- --redis_tls_key=/etc/reverser/redis-client/tls.key
{{- end }}
{{- with $r.tls.serverName }}
- --redis_tls_server_name={{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The key that seals sensitive bodies in Redis: the materializer and the splicer only. */}}
{{- define "reverser.bodyKeyArgs" -}}
- --redis_body_key_file=/etc/reverser/redis-body-keys/keys
{{- end -}}

{{- define "reverser.bodyKeyVolumeMounts" -}}
- name: redis-body-keys
  mountPath: /etc/reverser/redis-body-keys
  readOnly: true
{{- end -}}

{{- define "reverser.bodyKeyVolumes" -}}
- name: redis-body-keys
  secret:
    secretName: {{ include "reverser.bodyKeysSecret" . }}
    defaultMode: 0440
    items:
      - key: {{ .Values.redis.bodyKeys.existingSecretKey }}
        path: keys
{{- end -}}

{{- define "reverser.redisVolumeMounts" -}}
{{- $r := .Values.redis -}}
- name: redis-auth
  mountPath: /etc/reverser/redis-auth
  readOnly: true
{{- if $r.tls.enabled }}
{{- if or $r.embedded $r.tls.caSecret }}
- name: redis-ca
  mountPath: /etc/reverser/redis-ca
  readOnly: true
{{- end }}
{{- if or $r.embedded $r.tls.clientCertSecret }}
- name: redis-client
  mountPath: /etc/reverser/redis-client
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{- define "reverser.redisVolumes" -}}
{{- $r := .Values.redis -}}
- name: redis-auth
  secret:
    secretName: {{ include "reverser.redisPasswordSecret" . }}
    defaultMode: 0440
    items:
      - key: {{ $r.auth.existingSecretKey }}
        path: password
{{- if $r.tls.enabled }}
{{- if $r.embedded }}
- name: redis-ca
  secret:
    secretName: {{ include "reverser.certSecret" (dict "root" . "cert" "redisClient") }}
    defaultMode: 0440
    items:
      - key: ca.crt
        path: ca.crt
{{- else if $r.tls.caSecret }}
- name: redis-ca
  secret:
    secretName: {{ $r.tls.caSecret }}
    defaultMode: 0440
    items:
      - key: {{ $r.tls.caKey }}
        path: ca.crt
{{- end }}
{{- if or $r.embedded $r.tls.clientCertSecret }}
- name: redis-client
  secret:
    secretName: {{ $r.tls.clientCertSecret | default (include "reverser.certSecret" (dict "root" . "cert" "redisClient")) }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end }}
{{- end -}}

{{/* Every certificate the release uses: name -> common name, issuing CA, DNS names, IPs. The
mesh roles are the names reverser-<role> (docs/security.md). The webhook CA signs both webhooks'
server certificates and the audit client's. */}}
{{- define "reverser.certificateList" -}}
{{- $fullname := include "reverser.fullname" . -}}
items:
{{- range $c := list "catalog" "materializer" "splicer" "gitworker" }}
  {{ $c }}:
    cn: reverser-{{ $c }}
    ca: mesh
    dns:
      - reverser-{{ $c }}
      {{- range splitList "," (include "reverser.dnsNames" (dict "root" $ "service" (printf "%s-%s" $fullname $c))) }}
      - {{ . }}
      {{- end }}
{{- end }}
  admin:
    cn: reverser-admin
    ca: mesh
    dns: [reverser-admin]
{{- if .Values.servers.audit.enabled }}
  auditWebhook:
    cn: {{ $fullname }}-audit
    ca: webhook
    dns:
      {{- range splitList "," (include "reverser.dnsNames" (dict "root" $ "service" (printf "%s-audit" $fullname))) }}
      - {{ . }}
      {{- end }}
      {{- range .Values.certificates.auditWebhook.extraDNSNames }}
      - {{ . }}
      {{- end }}
    ips: {{ .Values.certificates.auditWebhook.extraIPs | toJson }}
  auditClient:
    cn: {{ first .Values.servers.audit.clientNames | default "kube-apiserver" }}
    ca: webhook
    dns: [{{ first .Values.servers.audit.clientNames | default "kube-apiserver" }}]
{{- end }}
{{- if .Values.servers.admission.enabled }}
  admissionWebhook:
    cn: {{ $fullname }}-admission
    ca: webhook
    dns:
      {{- range splitList "," (include "reverser.dnsNames" (dict "root" $ "service" (printf "%s-admission" $fullname))) }}
      - {{ . }}
      {{- end }}
{{- end }}
{{- if .Values.redis.embedded }}
  redis:
    cn: {{ $fullname }}-redis
    ca: redis
    dns:
      {{- range splitList "," (include "reverser.dnsNames" (dict "root" $ "service" (printf "%s-redis" $fullname))) }}
      - {{ . }}
      {{- end }}
      - {{ $fullname }}-redis-0.{{ $fullname }}-redis-headless.{{ .Release.Namespace }}.svc
  redisClient:
    cn: reverser-redis-client
    ca: redis
    dns: [reverser-redis-client]
{{- end }}
{{- end -}}
