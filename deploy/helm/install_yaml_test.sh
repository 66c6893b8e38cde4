#!/bin/bash
# deploy/install.yaml is the chart's defaults as deploy/helm/render.sh renders them.
set -euo pipefail
renderer="$TEST_TMPDIR/chart-render"
bash tools/chart-render/build.sh "$renderer"
source deploy/helm/render.sh
render_install "$renderer" >"$TEST_TMPDIR/install.yaml"
if ! diff -u deploy/install.yaml "$TEST_TMPDIR/install.yaml"; then
  echo "FAIL: deploy/install.yaml is not the chart's render; run deploy/helm/regenerate.sh"
  exit 1
fi
if grep -n "BEGIN .*PRIVATE KEY\|FAKE" deploy/install.yaml; then
  echo "FAIL: deploy/install.yaml carries key material"
  exit 1
fi
echo "ok: deploy/install.yaml is in sync"
