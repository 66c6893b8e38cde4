#!/usr/bin/env python3
"""Every object the chart renders is accepted by the test API server (kube-sim, server-side dry
run with strict field validation) and, for core/v1 and apps/v1 kinds, by the OpenAPI v3 schema
kube-sim serves (the real v1.27 documents). Covers the golden value sets, other option
combinations, deploy/install.yaml with the Secrets deploy/install-secrets.sh makes, and checks
that the certificates the chart generates chain to their CA and carry the names the services
dial. With the service binaries given, every rendered container's args parse with the
service's own flag parser.

Usage: chart_kube_sim_test.py KUBE_SIM [SERVICE_BINARY...]
"""
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import yaml

CHART = "deploy/helm/reverser"
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
FAILURES = []


def fail(message):
    FAILURES.append(message)
    print("FAIL: " + message, flush=True)


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


class Sim:
    def __init__(self, binary):
        port_file = os.path.join(TMP, "kube-sim.port")
        self.log = open(os.path.join(TMP, "kube-sim.log"), "w")
        self.proc = subprocess.Popen([binary, "--port=0", f"--port_file={port_file}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("kube-sim did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{open(port_file).read().strip()}"
        self.resources = {}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.loads(r.read().decode() or "null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "null")

    def resource(self, api_version, kind):
        """(plural, namespaced) of a kind, from discovery (read again after CRDs change)."""
        key = (api_version, kind)
        if key not in self.resources:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            status, body = self.call("GET", path)
            if status == 200:
                for r in body["resources"]:
                    if "/" not in r["name"]:
                        self.resources[(api_version, r["kind"])] = (r["name"], r["namespaced"])
        return self.resources.get(key)

    def create(self, obj, dry_run=True):
        found = self.resource(obj["apiVersion"], obj["kind"])
        if not found:
            return 404, {"message": f"{obj['apiVersion']} {obj['kind']} is not served"}
        plural, namespaced = found
        prefix = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
        ns = obj.get("metadata", {}).get("namespace")
        if namespaced:
            if not ns:
                return 400, {"message": "a namespaced object without metadata.namespace"}
            prefix += f"/namespaces/{ns}"
        query = "?fieldValidation=Strict" + ("&dryRun=All" if dry_run else "")
        return self.call("POST", f"{prefix}/{plural}{query}", obj)


# ---- OpenAPI v3 ------------------------------------------------------------------------------

class OpenApi:
    def __init__(self, sim):
        self.schemas = {}
        self.by_gvk = {}
        for doc in ("api/v1", "apis/apps/v1"):
            status, body = sim.call("GET", f"/openapi/v3/{doc}")
            if status != 200:
                raise RuntimeError(f"/openapi/v3/{doc}: {status}")
            for name, schema in body["components"]["schemas"].items():
                self.schemas[name] = schema
                for gvk in schema.get("x-kubernetes-group-version-kind", []):
                    api = gvk["version"] if not gvk["group"] else f"{gvk['group']}/{gvk['version']}"
                    self.by_gvk[(api, gvk["kind"])] = schema

    def resolve(self, schema):
        while True:
            if "$ref" in schema:
                schema = self.schemas[schema["$ref"].rsplit("/", 1)[1]]
            elif "allOf" in schema and len(schema["allOf"]) == 1 and "type" not in schema:
                schema = schema["allOf"][0]
            else:
                return schema

    def check(self, obj):
        schema = self.by_gvk.get((obj["apiVersion"], obj["kind"]))
        if schema is None:
            return None  # no document for this group
        errors = []
        self._check(schema, obj, "", errors)
        return errors

    def _check(self, schema, value, path, errors):
        schema = self.resolve(schema)
        if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
            if not isinstance(value, (int, str)) or isinstance(value, bool):
                errors.append(f"{path}: want an integer or a string, got {value!r}")
            return
        if "oneOf" in schema and "type" not in schema:
            types = {s.get("type") for s in schema["oneOf"]}
            if not any(self._is(t, value) for t in types):
                errors.append(f"{path}: want one of {sorted(types)}, got {value!r}")
            return
        t = schema.get("type")
        if t and not self._is(t, value):
            errors.append(f"{path}: want {t}, got {value!r}")
            return
        if t == "object":
            props = schema.get("properties")
            for key in schema.get("required", []):
                if key not in value:
                    errors.append(f"{path}.{key}: required")
            for key, item in value.items():
                if props is not None:
                    if key not in props:
                        errors.append(f"{path}.{key}: unknown field")
                    else:
                        self._check(props[key], item, f"{path}.{key}", errors)
                elif isinstance(schema.get("additionalProperties"), dict):
                    self._check(schema["additionalProperties"], item, f"{path}.{key}", errors)
        elif t == "array" and "items" in schema:
            for i, item in enumerate(value):
                self._check(schema["items"], item, f"{path}[{i}]", errors)
        elif t == "string" and schema.get("format") == "byte":
            try:
                base64.b64decode(value, validate=True)
            except ValueError:
                errors.append(f"{path}: not base64")

    @staticmethod
    def _is(t, value):
        return {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
                "string": lambda v: isinstance(v, str),
                "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
                "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                "boolean": lambda v: isinstance(v, bool)}.get(t, lambda v: True)(value)


# ---- checks ----------------------------------------------------------------------------------

def render(renderer, *args):
    return [d for d in yaml.safe_load_all(run([renderer, *args, CHART])) if d]


def accept_all(sim, openapi, name, docs):
    kinds = {}
    for obj in docs:
        what = f"{name}: {obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
        real = obj["kind"] in ("Namespace", "CustomResourceDefinition")
        status, body = sim.create(obj, dry_run=not real)
        if real and status == 409:
            status = 201  # made by an earlier set
        if status not in (200, 201):
            fail(f"{what}: kube-sim answered {status}: {body.get('message') if body else ''}")
            continue
        if real and obj["kind"] == "CustomResourceDefinition":
            sim.resources.clear()
        errors = openapi.check(obj)
        if errors:
            fail(f"{what}: the OpenAPI schema refuses it:\n  " + "\n  ".join(errors[:10]))
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    print(f"ok: {name}: {len(docs)} objects accepted "
          f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})", flush=True)


def check_certificates(name, docs, want_count, namespace="reverser"):
    """Each kubernetes.io/tls Secret: the certificate chains to ca.crt, the key is its key, a
    mesh certificate carries its role and the DNS name its peers dial, and the admission
    webhook's carries its Service's name and chains to the caBundle of every
    ValidatingWebhookConfiguration (the admission one, and the attribution one when rendered)."""
    bundles = [h["clientConfig"].get("caBundle") for d in docs if d["kind"] == "ValidatingWebhookConfiguration"
               for h in d["webhooks"]]
    count = 0
    for obj in docs:
        if obj["kind"] != "Secret" or obj.get("type") != "kubernetes.io/tls":
            continue
        secret = obj["metadata"]["name"]
        d = os.path.join(TMP, "certs", name, secret)
        os.makedirs(d, exist_ok=True)
        for key in ("ca.crt", "tls.crt", "tls.key"):
            with open(os.path.join(d, key), "wb") as f:
                f.write(base64.b64decode(obj["data"][key]))
        try:
            run(["openssl", "verify", "-CAfile", "ca.crt", "tls.crt"], cwd=d)
            cert_pub = run(["openssl", "x509", "-in", "tls.crt", "-noout", "-pubkey"], cwd=d)
            key_pub = run(["openssl", "pkey", "-in", "tls.key", "-pubout"], cwd=d)
            text = run(["openssl", "x509", "-in", "tls.crt", "-noout", "-text"], cwd=d)
        except RuntimeError as e:
            fail(f"{name}: Secret {secret}: {e}")
            continue
        if cert_pub != key_pub:
            fail(f"{name}: Secret {secret}: tls.key is not the key of tls.crt")
        m = re.match(r"^reverser-(catalog|materializer|splicer|gitworker)-tls$", secret)
        if m:
            role = m.group(1)
            for want in (f"CN = reverser-{role}", f"DNS:reverser-{role}.{namespace}.svc", "TLS Web Client Authentication",
                         "TLS Web Server Authentication"):
                if want not in text:
                    fail(f"{name}: Secret {secret}: the certificate lacks {want}")
        if secret == "reverser-admission-webhook-tls":
            if f"DNS:reverser-admission.{namespace}.svc" not in text:
                fail(f"{name}: Secret {secret}: the certificate lacks DNS:reverser-admission.{namespace}.svc")
            if not bundles or any(b != obj["data"]["ca.crt"] for b in bundles):
                fail(f"{name}: a ValidatingWebhookConfiguration's caBundle is not {secret}'s ca.crt")
        count += 1
    if count != want_count:
        fail(f"{name}: {count} certificate Secrets, want {want_count}")
    else:
        print(f"ok: {name}: {count} certificates chain to their CA and carry their names", flush=True)


def check_flags(docs, binaries):
    """Every service container's args parse with its binary's own flag parser (an unknown flag
    or an illegal value is an error before --helpshort is handled)."""
    by_name = {os.path.basename(b): b for b in binaries}
    checked = 0
    for obj in docs:
        if obj["kind"] != "Deployment":
            continue
        for c in obj["spec"]["template"]["spec"]["containers"]:
            if c["name"] not in by_name:
                fail(f"no binary of {c['name']} to check its flags with")
                continue
            out = subprocess.run([by_name[c["name"]], *c.get("args", []), "--helpshort"],
                                 capture_output=True, text=True, timeout=30)
            errors = [l for l in (out.stdout + out.stderr).splitlines() if l.startswith("ERROR:")]
            if errors:
                fail(f"Deployment {obj['metadata']['name']}: its args do not parse: " + "; ".join(errors))
            checked += len(c.get("args", []))
    print(f"ok: {checked} rendered flags parse with their services' flag parsers", flush=True)


def check_attribution(name, docs, sources, fullname="reverser"):
    """Attribution from admission: the attribution ValidatingWebhookConfiguration (one webhook,
    failurePolicy Ignore, no rules: the catalog writes them) on the admission Service, each
    service's flag, and the catalog's RBAC on that configuration."""
    configs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"}
    config = configs.get(f"{fullname}-attribution")
    if config is None:
        fail(f"{name}: no ValidatingWebhookConfiguration {fullname}-attribution")
        return
    hooks = config["webhooks"]
    admission = configs[f"{fullname}-validate-operator-types"]["webhooks"][0]
    if len(hooks) != 1 or hooks[0]["name"] != "changes.reverser.configbutler.ai":
        fail(f"{name}: {fullname}-attribution's webhooks are {[h['name'] for h in hooks]}")
    elif "rules" in hooks[0]:
        fail(f"{name}: {fullname}-attribution renders rules (the catalog owns them)")
    elif hooks[0]["failurePolicy"] != "Ignore" or hooks[0]["sideEffects"] != "NoneOnDryRun":
        fail(f"{name}: {fullname}-attribution may block writes or has side effects")
    elif hooks[0]["clientConfig"] != admission["clientConfig"]:
        fail(f"{name}: {fullname}-attribution does not call the admission webhook as "
             f"{fullname}-validate-operator-types does")
    elif config["metadata"].get("annotations") != configs[f"{fullname}-validate-operator-types"]["metadata"].get("annotations"):
        fail(f"{name}: {fullname}-attribution's annotations (the CA injection) differ from the admission one's")
    want = {"catalog": f"--attribution_webhook_configuration={fullname}-attribution",
            "materializer": "--admission_attribution",
            "splicer": f"--attribution_sources={sources}"}
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        for c in d["spec"]["template"]["spec"]["containers"]:
            if c["name"] in want and want[c["name"]] not in c.get("args", []):
                fail(f"{name}: the {c['name']} lacks {want[c['name']]}")
    role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{fullname}-catalog")
    writes = [r for r in role["rules"] if "validatingwebhookconfigurations" in r.get("resources", [])
              and "update" in r["verbs"]]
    if [r.get("resourceNames") for r in writes] != [[f"{fullname}-attribution"]]:
        fail(f"{name}: the catalog may update validatingwebhookconfigurations beyond {fullname}-attribution")
    print(f"ok: {name}: the attribution webhook configuration, flags and RBAC", flush=True)


def self_check(sim, openapi, docs):
    """The checks refuse what they should: an unknown field and a wrong type in a Deployment,
    an unknown field in a custom resource."""
    deployment = json.loads(json.dumps(next(d for d in docs if d["kind"] == "Deployment")))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["imagePullPolicyy"] = "Always"
    container["ports"][0]["containerPort"] = "9090"
    errors = openapi.check(deployment) or []
    if len(errors) != 2:
        fail(f"the OpenAPI check of a broken Deployment found {errors}, want 2 errors")
    rule = {"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
            "metadata": {"name": "x", "namespace": "demo"},
            "spec": {"targetRef": {"name": "t"}, "rules": [{"resources": ["configmaps"]}], "typo": 1}}
    status, _ = sim.create(rule)
    if status != 400:
        fail(f"kube-sim answered {status} to a WatchRule with an unknown field, want 400")


THIRD_PARTY_CRDS = [
    ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    ("cert-manager.io", "Certificate", "certificates"),
    ("cert-manager.io", "Issuer", "issuers"),
]


def third_party_crd(group, kind, plural):
    """A stand-in for a CRD another project installs: any spec."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}


def main():
    sim_binary, service_binaries = sys.argv[1], sys.argv[2:]
    renderer = os.path.join(TMP, "chart-render")
    run(["bash", "tools/chart-render/build.sh", renderer])
    sim = Sim(sim_binary)
    try:
        for ns in ("reverser", "team-a", "demo"):
            sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, dry_run=False)
        for crd in THIRD_PARTY_CRDS:
            status, body = sim.create(third_party_crd(*crd), dry_run=False)
            if status != 201:
                raise RuntimeError(f"{crd}: {status} {body}")
        openapi = OpenApi(sim)
        crds = []
        for name in sorted(os.listdir(os.path.join(CHART, "crds"))):
            with open(os.path.join(CHART, "crds", name)) as f:
                crds += [d for d in yaml.safe_load_all(f) if d]
        accept_all(sim, openapi, "the chart's crds/", crds)

        default = render(renderer, "--include-crds")
        self_check(sim, openapi, default)
        accept_all(sim, openapi, "default (generated certificates)", default)
        check_certificates("default", default, 10)
        if service_binaries:
            check_flags(default, service_binaries)
        if any(d["kind"] == "ValidatingWebhookConfiguration" and d["metadata"]["name"] == "reverser-attribution"
               for d in default):
            fail("default: renders the attribution webhook configuration (attribution.admission is off by default)")
        attribution = render(renderer, "--set", "attribution.admission.enabled=true")
        accept_all(sim, openapi, "attribution from admission (generated certificates)", attribution)
        check_certificates("attribution from admission", attribution, 10)
        check_attribution("attribution from admission", attribution, "audit,admission")
        if service_binaries:
            check_flags(attribution, service_binaries)
        attribution_sets = {
            "attribution from admission, cert-manager, no audit webhook": (
                ["--fake-secrets", "--set",
                 "attribution.admission.enabled=true,certificates.source=certManager,servers.audit.enabled=false"],
                "admission", "reverser"),
            "attribution from admission, existing certificates, release foo": (
                ["--name", "foo", "--set", "attribution.admission.enabled=true,certificates.source=existing",
                 "--set-string", "servers.admission.caBundle=" + base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()],
                "audit,admission", "foo-reverser"),
        }
        for name, (args, sources, fullname) in attribution_sets.items():
            docs = render(renderer, *args)
            accept_all(sim, openapi, name, docs)
            check_attribution(name, docs, sources, fullname)
            if service_binaries:
                check_flags(docs, service_binaries)
        sets = {
            "external-redis": ["--fake-secrets", "-f", "deploy/helm/testdata/external-redis.values.yaml"],
            "external-sentinel": ["--fake-secrets", "-f", "deploy/helm/testdata/external-sentinel.values.yaml"],
            "ha": ["--fake-secrets", "-f", "deploy/helm/testdata/ha.values.yaml"],
            "cert-manager issuers, quickstart, ServiceMonitor, NodePort": [
                "--fake-secrets", "--set", "certificates.source=certManager",
                "--set", "quickstart.enabled=true,quickstart.namespace=demo",
                "--set-string", "quickstart.gitProvider.url=https://git.example.com/mirror.git",
                "--set", "monitoring.serviceMonitor.enabled=true",
                "--set", "auditService.type=NodePort,auditService.nodePort=30444",
                "--set", "podAntiAffinity=none,admin.auth=certificate,attribution.enabled=false"],
            "existing certificates, an admission caBundle, failurePolicy Fail": [
                "--set", "certificates.source=existing,servers.admission.failurePolicy=Fail",
                "--set-string", "servers.admission.caBundle=" + base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()],
            "no audit webhook, plain Redis, release foo": [
                "--fake-secrets", "--name", "foo", "--namespace", "team-a",
                "--set", "servers.audit.enabled=false,redis.tls.enabled=false,redis.server.persistence.enabled=false"],
        }
        for name, args in sets.items():
            docs = render(renderer, *args)
            accept_all(sim, openapi, name, docs)
            if service_binaries:
                check_flags(docs, service_binaries)

        with open("deploy/install.yaml") as f:
            install = [d for d in yaml.safe_load_all(f) if d]
        secrets = [d for d in yaml.safe_load_all(run(["bash", "deploy/install-secrets.sh"])) if d]
        accept_all(sim, openapi, "deploy/install.yaml", install)
        accept_all(sim, openapi, "deploy/install-secrets.sh", secrets)
        check_certificates("deploy/install-secrets.sh", secrets, 9)
        mounted = {v["secret"]["secretName"] for d in install if d["kind"] in ("Deployment", "StatefulSet")
                   for v in d["spec"]["template"]["spec"].get("volumes", []) if "secret" in v}
        # The body key reaches only the services that seal or open object bodies.
        for d in install:
            if d["kind"] != "Deployment":
                continue
            component = d["metadata"]["labels"].get("app.kubernetes.io/component", "")
            has_key = any(v.get("name") == "redis-body-keys" for v in d["spec"]["template"]["spec"].get("volumes", []))
            if has_key != (component in ("materializer", "splicer")):
                fail(f"deploy/install.yaml: {component} {'mounts' if has_key else 'lacks'} the Redis body key")
        made = {d["metadata"]["name"] for d in secrets}
        if mounted - made:
            fail(f"deploy/install.yaml mounts Secrets install-secrets.sh does not make: {sorted(mounted - made)}")
        else:
            print(f"ok: install-secrets.sh makes the {len(mounted)} Secrets deploy/install.yaml mounts", flush=True)
    finally:
        sim.stop()
    if FAILURES:
        print(f"\n{len(FAILURES)} failures; kube-sim's log: {os.path.join(TMP, 'kube-sim.log')}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
