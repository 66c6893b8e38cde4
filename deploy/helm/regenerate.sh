#!/bin/bash
# Writes the golden renders (deploy/helm/testdata/*.golden.yaml, default.notes.golden.txt) and
# deploy/install.yaml from the chart, with tools/chart-render.
#   deploy/helm/regenerate.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/chart-render.XXXXXX")
trap 'rm -rf "$work"' EXIT
bash "$root/tools/chart-render/build.sh" "$work/chart-render"
# shellcheck source=deploy/helm/render.sh
source "$root/deploy/helm/render.sh"
cd "$root"
for values in deploy/helm/testdata/*.values.yaml; do
  name=$(basename "$values" .values.yaml)
  [[ $name == typo ]] && continue
  render_golden "$work/chart-render" "$values" >"deploy/helm/testdata/$name.golden.yaml"
done
render_notes "$work/chart-render" >deploy/helm/testdata/default.notes.golden.txt
render_install "$work/chart-render" >deploy/install.yaml
echo "regenerated deploy/helm/testdata/*.golden.* and deploy/install.yaml" >&2
