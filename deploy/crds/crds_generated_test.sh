#!/bin/bash
# The checked-in CRD YAML is exactly what gen_crds.py writes: regenerate into a scratch folder
# and compare file by file.
set -euo pipefail
out="${TEST_TMPDIR:-$(mktemp -d)}/generated"
mkdir -p "$out"
python3 deploy/crds/gen_crds.py --out-dir "$out"
status=0
count=0
for generated in "$out"/*.yaml; do
  count=$((count + 1))
  name=$(basename "$generated")
  if [[ ! -f "deploy/crds/$name" ]]; then
    echo "deploy/crds/$name is missing; run python3 deploy/crds/gen_crds.py" >&2
    status=1
  elif ! diff -u "deploy/crds/$name" "$generated"; then
    echo "deploy/crds/$name differs from gen_crds.py's output; run python3 deploy/crds/gen_crds.py" >&2
    status=1
  fi
done
for checked_in in deploy/crds/configbutler.ai_*.yaml; do
  if [[ ! -f "$out/$(basename "$checked_in")" ]]; then
    echo "$checked_in is not written by gen_crds.py" >&2
    status=1
  fi
done
if [[ $count -ne 5 ]]; then
  echo "gen_crds.py wrote $count files, want 5" >&2
  status=1
fi
exit $status
