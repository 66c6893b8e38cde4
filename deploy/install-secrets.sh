#!/bin/bash
# The Secrets deploy/install.yaml expects, as YAML on stdout: a CA each for the gRPC mesh, the
# audit webhook and Redis, the certificates they sign, the Redis password and the keys that
# seal sensitive bodies in Redis.
#   kubectl apply -f deploy/install.yaml        # creates namespace reverser; pods wait for these
#   deploy/install-secrets.sh | kubectl apply -f -
# Run it once: running it again makes new keys (apply them all, the pods re-read the files).
# install.yaml installs into namespace reverser; for another namespace use the chart.
set -euo pipefail
ns=reverser
days=${DAYS:-3650}
work=$(mktemp -d "${TMPDIR:-/tmp}/reverser-secrets.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

b64() { base64 -w0 "$1"; }
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
dns() {  # the in-cluster names of Service $1
  printf 'DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.cluster.local' "$1" "$1" "$ns" "$1" "$ns" "$1" "$ns"
}

for ca in mesh webhook redis; do
  key "$ca-ca.key"
  openssl req -x509 -new -key "$ca-ca.key" -out "$ca-ca.crt" -days "$days" -subj "/CN=reverser-$ca-ca" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
done

# leaf <Secret suffix> <CA> <common name> <subjectAltName>
leaf() {
  local name=$1 ca=$2 cn=$3 san=$4
  key "$name.key"
  openssl req -new -key "$name.key" -out "$name.csr" -subj "/CN=$cn" 2>/dev/null
  printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' \
    "$san" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$ca-ca.crt" -CAkey "$ca-ca.key" -CAcreateserial \
    -out "$name.crt" -days "$days" -extfile "$name.ext" 2>/dev/null
  cat <<YAML
---
apiVersion: v1
kind: Secret
metadata:
  name: reverser-$name-tls
  namespace: $ns
type: kubernetes.io/tls
data:
  ca.crt: $(b64 "$ca-ca.crt")
  tls.crt: $(b64 "$name.crt")
  tls.key: $(b64 "$name.key")
YAML
}

# The mesh roles are the names reverser-<role> (docs/security.md).
for s in catalog materializer splicer gitworker; do
  leaf "$s" mesh "reverser-$s" "DNS:reverser-$s,$(dns "reverser-$s")"
done
leaf admin mesh reverser-admin DNS:reverser-admin
leaf audit-webhook webhook reverser-audit "$(dns reverser-audit)${EXTRA_AUDIT_SANS:+,$EXTRA_AUDIT_SANS}"
leaf audit-client webhook kube-apiserver DNS:kube-apiserver
leaf redis redis reverser-redis "$(dns reverser-redis),DNS:reverser-redis-0.reverser-redis-headless.$ns.svc"
leaf redis-client redis reverser-redis-client DNS:reverser-redis-client

printf '%s' "$(openssl rand -hex 20)" >password
printf 'install-1:%s\n' "$(openssl rand -base64 32)" >keys
cat <<YAML
---
apiVersion: v1
kind: Secret
metadata:
  name: reverser-redis-auth
  namespace: $ns
type: Opaque
data:
  password: $(b64 password)
---
apiVersion: v1
kind: Secret
metadata:
  name: reverser-redis-body-keys
  namespace: $ns
type: Opaque
data:
  keys: $(b64 keys)
YAML
