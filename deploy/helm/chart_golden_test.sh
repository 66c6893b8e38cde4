#!/bin/bash
# The chart renders exactly the goldens: testdata/<name>.values.yaml -> <name>.golden.yaml, and
# the default NOTES.txt -> default.notes.golden.txt.
set -euo pipefail
renderer="$TEST_TMPDIR/chart-render"
bash tools/chart-render/build.sh "$renderer"
source deploy/helm/render.sh
status=0
check() {  # golden file, render command...
  local golden=$1; shift
  if ! "$@" >"$TEST_TMPDIR/got" 2>"$TEST_TMPDIR/err"; then
    echo "FAIL: rendering $golden failed:"; cat "$TEST_TMPDIR/err"; status=1; return
  fi
  if ! diff -u "$golden" "$TEST_TMPDIR/got"; then
    echo "FAIL: $golden differs from the render; if the change is meant, run deploy/helm/regenerate.sh"
    status=1
  else
    echo "ok: $golden"
  fi
}
count=0
for values in deploy/helm/testdata/*.values.yaml; do
  name=$(basename "$values" .values.yaml)
  [[ $name == typo ]] && continue
  check "deploy/helm/testdata/$name.golden.yaml" render_golden "$renderer" "$values"
  count=$((count + 1))
done
check deploy/helm/testdata/default.notes.golden.txt render_notes "$renderer"
if [[ $count -lt 3 ]]; then
  echo "FAIL: $count golden value sets, want default, external-redis and ha"; status=1
fi
exit $status
