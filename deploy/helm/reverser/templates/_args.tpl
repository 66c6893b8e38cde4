{{/* Each service's own flags (after reverser.commonArgs); every flag is one of its --help. */}}
{{- define "reverser.args.catalog" -}}
- --discovery_refresh_period={{ .Values.catalog.discoveryRefreshPeriod }}
- --gitworker_address={{ include "reverser.grpcAddress" (dict "root" . "component" "gitworker") }}
{{ include "reverser.redisArgs" . }}
{{- with .Values.additionalSensitiveResources }}
- --additional_sensitive_resources={{ join "," . }}
{{- end }}
{{- if .Values.attribution.admission.enabled }}
- --attribution_webhook_configuration={{ include "reverser.fullname" . }}-attribution
{{- end }}
{{- end -}}

{{- define "reverser.args.materializer" -}}
- --catalog_address={{ include "reverser.grpcAddress" (dict "root" . "component" "catalog") }}
- --intake={{ .Values.materializer.intake }}
- --compact_after_entries={{ .Values.materializer.compactAfterEntries | int64 }}
- --use_watch_list={{ .Values.materializer.useWatchList }}
- --author_fact_ttl={{ .Values.attribution.ttl }}
{{ include "reverser.redisArgs" . }}
{{ include "reverser.bodyKeyArgs" . }}
{{- if .Values.servers.audit.enabled }}
- --audit_webhook=true
- --audit_port={{ .Values.servers.audit.port }}
- --audit_tls_cert=/etc/reverser/audit/tls.crt
- --audit_tls_key=/etc/reverser/audit/tls.key
- --audit_client_ca=/etc/reverser/audit/ca.crt
- --audit_client_names={{ join "," .Values.servers.audit.clientNames }}
- --audit_max_body_bytes={{ .Values.servers.audit.maxRequestBodyBytes | int64 }}
- --audit_max_event_bytes={{ .Values.servers.audit.maxEventBytes | int64 }}
- --audit_read_timeout={{ .Values.servers.audit.timeouts.read }}
- --audit_write_timeout={{ .Values.servers.audit.timeouts.write }}
- --audit_idle_timeout={{ .Values.servers.audit.timeouts.idle }}
{{- else }}
- --audit_webhook=false
{{- end }}
{{- if .Values.servers.admission.enabled }}
- --admission_webhook=true
- --admission_port={{ .Values.servers.admission.port }}
- --admission_tls_cert=/etc/reverser/admission/tls.crt
- --admission_tls_key=/etc/reverser/admission/tls.key
{{- if .Values.attribution.admission.enabled }}
- --admission_attribution
{{- end }}
{{- else }}
- --admission_webhook=false
{{- end }}
{{- end -}}

{{- define "reverser.args.splicer" -}}
- --catalog_address={{ include "reverser.grpcAddress" (dict "root" . "component" "catalog") }}
- --gitworker_address={{ include "reverser.grpcAddress" (dict "root" . "component" "gitworker") }}
- --attribution={{ .Values.attribution.enabled }}
- --attribution_grace={{ .Values.attribution.grace }}
{{- if .Values.attribution.admission.enabled }}
- --attribution_sources={{ if .Values.servers.audit.enabled }}audit,{{ end }}admission
{{- end }}
- --max_in_flight={{ .Values.splicer.maxInFlight | int64 }}
{{ include "reverser.redisArgs" . }}
{{ include "reverser.bodyKeyArgs" . }}
{{- end -}}

{{- define "reverser.args.gitworker" -}}
- --catalog_address={{ include "reverser.grpcAddress" (dict "root" . "component" "catalog") }}
- --target_config_source=catalog
- --secrets_source=api
- --work_dir={{ .Values.gitworker.workDir }}
- --push_cooldown={{ .Values.gitworker.pushCooldown }}
{{- end -}}
