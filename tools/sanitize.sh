#!/usr/bin/env bash
# Opt-in: builds the pure-library unit tests (no redis-server, no service processes) and the fuzz
# corpus replays with gcc's AddressSanitizer and UndefinedBehaviorSanitizer (--config=asan in
# .bazelrc) and runs them. Any memory error, leak or undefined behaviour fails its test.
# Usage: tools/sanitize.sh [bazel test options...]
set -uo pipefail
cd "$(dirname "$0")/.."

targets=(
  //libs/core:core_test
  //libs/commitmeta:commitmeta_test
  //libs/fastjson:canonical_test
  //libs/gotemplate:gotemplate_test
  //libs/manifest:manifest_test
  //libs/kube:unit_test
  //libs/audit:audit_test
  //libs/sanitize:sanitize_test
  //libs/rules:rules_test
  //libs/typeset:typeset_test
  //libs/redisstore:keys_test
  //libs/redisstore:append_plan_test
  //libs/redisstore:materialization_model_test
  //libs/sops:age_test
  //libs/sops:sops_test
  //libs/sops:secret_file_test
  //libs/sops:robustness_test
  //fuzz:all
)
exec bazel test --config=asan --keep_going "$@" "${targets[@]}"
