#!/bin/bash
# Drives kube-sim with a real kubectl binary and checks exact outputs.
# Usage: kubectl_test.sh <kube-sim binary> <kubectl name, e.g. kubectl.1.33> <profile>
set -euo pipefail

SIM="$1"
KUBECTL_NAME="$2"
PROFILE="$3"
KUBECTL_DIR="$(dirname "$(readlink -f "$(command -v kubectl)")")"
KUBECTL_BIN="$KUBECTL_DIR/$KUBECTL_NAME"
[[ -x "$KUBECTL_BIN" ]] || { echo "missing $KUBECTL_BIN"; exit 1; }

WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/kubectl.XXXXXX")"
SIM_PID=""
WATCH_PID=""
HOOK_PID=""
cleanup() {
  [[ -n "$WATCH_PID" ]] && kill "$WATCH_PID" 2>/dev/null || true
  [[ -n "$HOOK_PID" ]] && kill "$HOOK_PID" 2>/dev/null || true
  [[ -n "$SIM_PID" ]] && kill -TERM "$SIM_PID" 2>/dev/null && wait "$SIM_PID" || true
}
trap cleanup EXIT

# A validating admission webhook over HTTPS (Python's standard library), reached through a
# Service reference that kube-sim maps to its loopback port; its certificate names the Service.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=hook-ca -keyout "$WORK/ca.key" \
  -out "$WORK/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=denier -keyout "$WORK/hook.key" \
  -out "$WORK/hook.csr" 2>/dev/null
printf 'subjectAltName=DNS:denier.hooks.svc\n' >"$WORK/hook.ext"
openssl x509 -req -in "$WORK/hook.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" \
  -CAcreateserial -days 2 -extfile "$WORK/hook.ext" -out "$WORK/hook.crt" 2>/dev/null
cat >"$WORK/hook.py" <<'PY'
import http.server, json, os, ssl, sys
work = sys.argv[1]
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["request"]
        labels = ((request.get("object") or {}).get("metadata") or {}).get("labels") or {}
        with open(os.path.join(work, "hook.log"), "a") as log:
            log.write("%s %s %s dryRun=%s\n" % (request["operation"], request["kind"]["kind"],
                      request.get("name", ""), str(request["dryRun"]).lower()))
        response = {"uid": request["uid"], "allowed": True}
        if labels.get("deny") == "yes":
            response = {"uid": request["uid"], "allowed": False,
                        "status": {"code": 403, "message": "configmaps labelled deny=yes are refused"}}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(os.path.join(work, "hook.crt"), os.path.join(work, "hook.key"))
server.socket = tls.wrap_socket(server.socket, server_side=True)
with open(os.path.join(work, "hook.port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(work, "hook.port.tmp"), os.path.join(work, "hook.port"))
server.serve_forever()
PY
python3 "$WORK/hook.py" "$WORK" 2>"$WORK/hook.err" &
HOOK_PID=$!
for _ in $(seq 1 500); do [[ -s "$WORK/hook.port" ]] && break; sleep 0.02; done
[[ -s "$WORK/hook.port" ]] || { echo "webhook did not start"; cat "$WORK/hook.err"; exit 1; }

"$SIM" --port=0 --port-file="$WORK/port" --profile="$PROFILE" \
  --webhook-service-override="hooks/denier=127.0.0.1:$(cat "$WORK/hook.port")" 2>"$WORK/sim.log" &
SIM_PID=$!

# Poll a condition with a deadline (no sleeps as synchronisation).
wait_for() {
  local what="$1"; shift
  for _ in $(seq 1 500); do
    if "$@"; then return 0; fi
    sleep 0.02
  done
  echo "timed out waiting for: $what"; cat "$WORK/sim.log"; exit 1
}
wait_for "port file" test -s "$WORK/port"
PORT="$(cat "$WORK/port")"
URL="http://127.0.0.1:$PORT"

cat >"$WORK/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: $URL
contexts:
- name: sim
  context: {cluster: sim, user: me, namespace: default}
current-context: sim
users:
- name: me
  user: {}
KC
k() { "$KUBECTL_BIN" --kubeconfig="$WORK/kubeconfig" --cache-dir="$WORK/cache" "$@"; }

FAILURES=0
expect() {  # expect <name> <expected> <actual>
  if [[ "$2" != "$3" ]]; then
    echo "FAIL $1"; echo "--- expected"; echo "$2"; echo "--- actual"; echo "$3"
    FAILURES=$((FAILURES + 1))
  else
    echo "ok   $1"
  fi
}

# api-resources: exactly the served table.
expect "api-resources" "$(cat "$TEST_SRCDIR/$TEST_WORKSPACE/tools/kube-sim/testdata/kubectl/api-resources.txt")" \
  "$(k api-resources 2>&1)"

# apply with default validation: create, unchanged, configured.
cat >"$WORK/cm.yaml" <<'Y'
apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  labels: {app: demo}
data:
  key: value
Y
expect "apply create" "configmap/demo created" "$(k apply -f "$WORK/cm.yaml" 2>&1)"
expect "apply unchanged" "configmap/demo unchanged" "$(k apply -f "$WORK/cm.yaml" 2>&1)"

# get -o yaml, without the volatile fields.
expect "get -o yaml" "apiVersion: v1
data:
  key: value
kind: ConfigMap
metadata:
  labels:
    app: demo
  name: demo
  namespace: default" \
  "$(k get cm demo -o yaml | grep -v -e creationTimestamp -e resourceVersion -e uid: -e annotations: -e last-applied -e '{"apiVersion"')"

# get -w sees a later change.
k get cm -w -o jsonpath='{.metadata.name}={.data.key}{"\n"}' >"$WORK/watch.out" 2>"$WORK/watch.err" &
WATCH_PID=$!
watch_open() { curl -s "$URL/_sim/state" | grep -q '"activeWatches":1'; }
wait_for "kubectl watch" watch_open
sed -i 's/key: value/key: changed/' "$WORK/cm.yaml"
expect "apply configured" "configmap/demo configured" "$(k apply -f "$WORK/cm.yaml" 2>&1)"
wait_for "watch event" grep -q "demo=changed" "$WORK/watch.out"
expect "get -w" "demo=value
demo=changed" "$(cat "$WORK/watch.out")"
kill "$WATCH_PID"; wait "$WATCH_PID" 2>/dev/null || true; WATCH_PID=""

# Deployment: apply, scale, generation.
cat >"$WORK/deploy.yaml" <<'Y'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
Y
expect "apply deployment" "deployment.apps/web created" "$(k apply -f "$WORK/deploy.yaml" 2>&1)"
expect "scale" "deployment.apps/web scaled" "$(k scale deployment web --replicas=3 2>&1)"
expect "scaled replicas" "3 2" "$(k get deploy web -o jsonpath='{.spec.replicas} {.metadata.generation}')"

# Server-side apply.
cat >"$WORK/ssa.yaml" <<'Y'
apiVersion: v1
kind: ConfigMap
metadata:
  name: ssa
data:
  a: "1"
Y
expect "apply --server-side" "configmap/ssa serverside-applied" "$(k apply --server-side -f "$WORK/ssa.yaml" 2>&1)"
expect "ssa manager" "kubectl:Apply" \
  "$(k get cm ssa -o jsonpath='{.metadata.managedFields[0].manager}:{.metadata.managedFields[0].operation}' --show-managed-fields)"

# CRD + custom resource round trip.
cat >"$WORK/crd.yaml" <<'Y'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
Y
cat >"$WORK/widget.yaml" <<'Y'
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
Y
expect "apply crd" "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created" \
  "$(k apply -f "$WORK/crd.yaml" 2>&1)"
expect "apply cr" "widget.example.com/w1 created" "$(k apply -f "$WORK/widget.yaml" 2>&1)"
sed -i 's/size: 3/size: 4/' "$WORK/widget.yaml"
expect "apply cr again" "widget.example.com/w1 configured" "$(k apply -f "$WORK/widget.yaml" 2>&1)"
expect "get cr" "w1 4 2" "$(k get wd w1 -o jsonpath='{.metadata.name} {.spec.size} {.metadata.generation}')"
expect "delete cr" 'widget.example.com "w1" deleted' "$(k delete widget w1 2>&1)"
expect "delete crd" 'customresourcedefinition.apiextensions.k8s.io "widgets.example.com" deleted' \
  "$(k delete -f "$WORK/crd.yaml" 2>&1)"
expect "crd gone from discovery" "" "$(k api-resources --api-group=example.com --no-headers 2>&1)"

# delete, and the real NotFound on a second delete.
expect "delete" 'configmap "demo" deleted' "$(k delete cm demo 2>&1)"
set +e
OUT="$(k delete cm demo 2>&1)"; RC=$?
set -e
expect "delete missing" 'Error from server (NotFound): configmaps "demo" not found' "$OUT"
expect "delete missing rc" "1" "$RC"

# Generator commands (kubectl >= 1.33 sends these bodies as protobuf).
expect "create namespace" "namespace/team-a created" "$(k create namespace team-a 2>&1)"
expect "create configmap" "configmap/gen created" "$(k -n team-a create configmap gen --from-literal=a=b 2>&1)"
expect "create secret" "secret/s1 created" "$(k -n team-a create secret generic s1 --from-literal=pw=hunter2 2>&1)"
expect "secret stored" "aHVudGVyMg== Opaque" "$(k -n team-a get secret s1 -o jsonpath='{.data.pw} {.type}')"
expect "create deployment" "deployment.apps/d created" "$(k -n team-a create deployment d --image=nginx:1.25 2>&1)"
expect "deployment stored" "1 nginx:1.25 RollingUpdate" \
  "$(k -n team-a get deploy d -o jsonpath='{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.strategy.type}')"
expect "delete namespace" 'namespace "team-a" deleted' "$(k delete namespace team-a 2>&1)"
# The namespace is Terminating until the namespace controller has emptied and finalized it.
ns_gone() { ! k get namespace team-a >/dev/null 2>&1; }
wait_for "namespace team-a gone" ns_gone
expect "namespace contents gone" "" "$(k get cm -A -o name | grep gen || true)"

# Reviews: created, answered, never stored. Without a token file every token is the default user
# (system:admin); without RBAC every request is allowed. kubectl >= 1.28 validates a kind that has
# no PATCH operation in /openapi/v3 against /openapi/v2, which the modern profile does not serve
# (as a server with OpenAPI v2 off): there it needs --validate=false.
VALIDATE=()
[[ "$PROFILE" == modern ]] && VALIDATE=(--validate=false)
if [[ "$PROFILE" == modern ]]; then META='"metadata": {},'; else META='"metadata": {
        "creationTimestamp": null
    },'; fi
expect "create tokenreview -o json" "{
    \"apiVersion\": \"authentication.k8s.io/v1\",
    \"kind\": \"TokenReview\",
    $META
    \"spec\": {
        \"token\": \"some-token\"
    },
    \"status\": {
        \"audiences\": [
            \"https://kubernetes.default.svc.cluster.local\"
        ],
        \"authenticated\": true,
        \"user\": {
            \"groups\": [
                \"system:masters\",
                \"system:authenticated\"
            ],
            \"username\": \"system:admin\"
        }
    }
}" "$(echo '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"some-token"}}' |
  k create "${VALIDATE[@]}" -f - -o json 2>&1)"
expect "create tokenreview" "tokenreview.authentication.k8s.io/<unknown> created" \
  "$(echo '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"t"}}' |
    k create "${VALIDATE[@]}" -f - 2>&1)"
expect "create subjectaccessreview" "true" \
  "$(echo '{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"u","resourceAttributes":{"verb":"get","resource":"pods"}}}' |
    k create "${VALIDATE[@]}" -f - -o jsonpath='{.status.allowed}' 2>&1)"
set +e
OUT="$(k get tokenreviews 2>&1)"
set -e
expect "get tokenreviews" \
  "Error from server (MethodNotAllowed): the server does not allow this method on the requested resource" "$OUT"

# Validating admission: a denying webhook rejects kubectl's create with kube-apiserver's text;
# --dry-run=server calls it too (sideEffects None), with dryRun true, and stores nothing.
cat >"$WORK/vwc.yaml" <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: deny-labelled
webhooks:
- name: deny.example.com
  clientConfig:
    service: {namespace: hooks, name: denier, path: /validate}
    caBundle: $(base64 -w0 "$WORK/ca.crt")
  rules:
  - {operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
YAML
expect "create webhook configuration" \
  "validatingwebhookconfiguration.admissionregistration.k8s.io/deny-labelled created" \
  "$(k create -f "$WORK/vwc.yaml" 2>&1)"
cat >"$WORK/denied.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: denied, labels: {deny: "yes"}}
data: {k: v}
YAML
DENIAL='admission webhook "deny.example.com" denied the request: configmaps labelled deny=yes are refused'
set +e
OUT="$(k create -f "$WORK/denied.yaml" 2>&1)"; RC=$?
set -e
# The webhook's status has no reason (as the real capture's), so kubectl names none.
expect "denied create" "Error from server: error when creating \"$WORK/denied.yaml\": $DENIAL" "$OUT"
expect "denied create rc" "1" "$RC"
set +e
OUT="$(k create -f "$WORK/denied.yaml" --dry-run=server 2>&1)"; RC=$?
set -e
expect "denied dry-run create" "Error from server: error when creating \"$WORK/denied.yaml\": $DENIAL" "$OUT"
expect "allowed dry-run create" "configmap/allowed created (server dry run)" \
  "$(k create configmap allowed --from-literal=k=v --dry-run=server 2>&1)"
expect "dry run stored nothing" "" "$(k get cm allowed --ignore-not-found -o name 2>&1)"
expect "allowed create" "configmap/allowed created" "$(k create configmap allowed --from-literal=k=v 2>&1)"
expect "webhook saw" "CREATE ConfigMap denied dryRun=false
CREATE ConfigMap denied dryRun=true
CREATE ConfigMap allowed dryRun=true
CREATE ConfigMap allowed dryRun=false" "$(cat "$WORK/hook.log")"
expect "sim logged the calls" "4" "$(grep -c 'kube-sim: admission webhook "deny.example.com" CREATE configmaps default/' "$WORK/sim.log")"

# SIGTERM stops the server cleanly.
kill -TERM "$SIM_PID"; wait "$SIM_PID"; RC=$?; SIM_PID=""
expect "sigterm exit code" "0" "$RC"

[[ $FAILURES -eq 0 ]] || { echo "$FAILURES failure(s)"; exit 1; }
echo "all kubectl checks passed"
