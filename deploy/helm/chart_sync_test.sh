#!/bin/bash
# The chart's copies are byte-identical to their sources: crds/ to deploy/crds (gen_crds.py
# writes those) and files/audit-policy.yaml to deploy/local/audit-policy.yaml.
set -euo pipefail
fix="cp deploy/crds/configbutler.ai_*.yaml deploy/helm/reverser/crds/ && cp deploy/local/audit-policy.yaml deploy/helm/reverser/files/"
status=0
for src in deploy/crds/configbutler.ai_*.yaml; do
  copy="deploy/helm/reverser/crds/$(basename "$src")"
  if [[ ! -f $copy ]]; then
    echo "FAIL: $copy is missing"; status=1
  elif ! cmp -s "$src" "$copy"; then
    diff -u "$src" "$copy" | head -20 || true
    echo "FAIL: $copy differs from $src"; status=1
  fi
done
for copy in deploy/helm/reverser/crds/*; do
  if [[ ! -f "deploy/crds/$(basename "$copy")" ]]; then
    echo "FAIL: $copy has no source in deploy/crds"; status=1
  fi
done
if ! cmp -s deploy/local/audit-policy.yaml deploy/helm/reverser/files/audit-policy.yaml; then
  echo "FAIL: deploy/helm/reverser/files/audit-policy.yaml differs from deploy/local/audit-policy.yaml"; status=1
fi
[[ $status -eq 0 ]] && echo "ok: the chart's CRDs and audit policy match their sources" || echo "to fix: $fix"
exit $status
