#!/bin/bash
set -euo pipefail
exec python3 deploy/helm/chart_kube_sim_test.py "$@"
