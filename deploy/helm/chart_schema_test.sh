#!/bin/bash
# values.schema.json refuses typos and wrong values, naming the field; every example passes.
set -euo pipefail
renderer="$TEST_TMPDIR/chart-render"
bash tools/chart-render/build.sh "$renderer"
chart=deploy/helm/reverser
status=0
refused() {  # what the error must name, renderer args...
  local want=$1; shift
  if "$renderer" "$@" "$chart" >/dev/null 2>"$TEST_TMPDIR/err"; then
    echo "FAIL: $* was accepted"; status=1; return
  fi
  if ! grep -qF -- "$want" "$TEST_TMPDIR/err"; then
    echo "FAIL: $* was refused without naming $want:"; cat "$TEST_TMPDIR/err"; status=1; return
  fi
  echo "ok: $* refused: $(grep -F -- "$want" "$TEST_TMPDIR/err")"
}
refused "- rbac.watchTypes.mdoe: unknown field" -f deploy/helm/testdata/typo.values.yaml
refused "- atribution: unknown field" --set atribution.enabled=false
refused "- redis.server.persistence.sise: unknown field" --set redis.server.persistence.sise=1Gi
refused "- auditService.type: auditService.type must be one of" --set auditService.type=Ingress
refused "- rbac.watchTypes.mode: rbac.watchTypes.mode must be one of" --set rbac.watchTypes.mode=some
refused "- attribution.grace: Does not match pattern" --set attribution.grace=3sec
refused "- catalog.replicas: Invalid type" --set-string catalog.replicas=two
refused "- redis.address: String length" --set redis.embedded=false
refused "- redis.sentinel.masterName: String length" --set redis.embedded=false,redis.sentinel.addresses[0]=s-0:26379
refused "- redis.sentinel.addresses.0: Does not match pattern" --set redis.embedded=false,redis.sentinel.addresses[0]=no-port,redis.sentinel.masterName=m
refused "- rbac.watchTypes.selected: Array must have at least 1 items" --set rbac.watchTypes.mode=selected
refused "- quickstart.gitProvider.url: String length" --set quickstart.enabled=true
refused "- servers.admission.failurePolicy: servers.admission.failurePolicy must be one of" --set servers.admission.failurePolicy=Deny
refused "- servers.admission.timeoutSeconds: Must be less than or equal to 30" --set servers.admission.timeoutSeconds=31
refused "- attribution.admission.timeoutSeconds: Must be less than or equal to 30" --set attribution.admission.timeoutSeconds=31
refused "- attribution.admission.enabeld: unknown field" --set attribution.admission.enabeld=true
# Not the schema but the template: existing certificates need the admission webhook's CA.
refused "servers.admission.caBundle is required with certificates.source existing" --set certificates.source=existing
# Attribution from admission is recorded by the admission webhook.
refused "attribution.admission.enabled needs servers.admission.enabled" --set attribution.admission.enabled=true,servers.admission.enabled=false
# Replicas share work only through Leases; the audit intake runs as one materializer.
refused "gitworker.replicas=2 needs membership.enabled=true" --set gitworker.replicas=2
refused "materializer.replicas=2 with materializer.intake=audit" --set membership.enabled=true,materializer.replicas=2,materializer.intake=audit
# Every level with named properties refuses others (free-form maps name none).
if ! python3 - "$chart/values.schema.json" <<'PY'
import json, sys
open_levels = []
def walk(schema, path):
    if not isinstance(schema, dict):
        return
    if "properties" in schema and schema.get("additionalProperties") is not False:
        open_levels.append(path or "(root)")
    for key, sub in schema.get("properties", {}).items():
        walk(sub, f"{path}.{key}" if path else key)
    walk(schema.get("items"), path + "[]")
walk(json.load(open(sys.argv[1])), "")
if open_levels:
    print("FAIL: values.schema.json levels without additionalProperties false: " + ", ".join(open_levels))
    sys.exit(1)
print("ok: every level of values.schema.json refuses unknown keys")
PY
then
  status=1
fi
for values in deploy/helm/testdata/*.values.yaml deploy/helm/install.values.yaml; do
  [[ $(basename "$values") == typo.values.yaml ]] && continue
  if ! "$renderer" --fake-secrets -f "$values" "$chart" >/dev/null 2>"$TEST_TMPDIR/err"; then
    echo "FAIL: $values is refused:"; cat "$TEST_TMPDIR/err"; status=1
  fi
done
# With Leases on and the audit intake, the materializer runs once without a Lease, the others
# keep theirs.
if "$renderer" --fake-secrets --set membership.enabled=true,materializer.intake=audit "$chart" \
    >"$TEST_TMPDIR/audit.yaml" 2>"$TEST_TMPDIR/err"; then
  if ! python3 - "$TEST_TMPDIR/audit.yaml" <<'PY'
import sys, yaml
args = {}
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc and doc.get("kind") == "Deployment":
        component = doc["metadata"]["labels"]["app.kubernetes.io/component"]
        args[component] = doc["spec"]["template"]["spec"]["containers"][0]["args"]
wrong = [c for c in ("splicer", "gitworker") if "--membership=true" not in args.get(c, [])]
if "--membership=true" in args.get("materializer", []) or wrong:
    print(f"FAIL: membership with the audit intake: materializer {args.get('materializer')}, without a Lease: {wrong}")
    sys.exit(1)
print("ok: with the audit intake the materializer runs without a Lease, the splicer and gitworker with one")
PY
  then
    status=1
  fi
else
  echo "FAIL: membership.enabled with materializer.intake=audit is refused:"; cat "$TEST_TMPDIR/err"; status=1
fi
exit $status
