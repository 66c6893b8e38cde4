#!/usr/bin/env python3
"""Runs what the chart renders, and checks that the chart, the images and the binaries agree.

The chart's render (deploy/helm/testdata/run.values.yaml over the defaults, with real generated
certificates) is taken apart the way a kubelet takes a pod spec: each Deployment's and
StatefulSet's pod runs as a podman container from the images deploy/image/build.sh made, on a
private network where each is reachable under its Services' DNS names. The container gets the
args, env (secretKeyRef included, $(VAR) expanded), security context (user, read-only root,
dropped capabilities, no new privileges), memory limit and mounts (ConfigMaps, Secrets with
their items and modes, emptyDirs, the StatefulSet's volume, the service-account token with
KUBERNETES_SERVICE_HOST/PORT) exactly as rendered, and it is only used once its readiness
probe passes.

The API server is the project's kube-sim, also on the network. It authenticates every pod's
service-account token and authorizes it with the rendered ClusterRoles, Roles and bindings
(translated into kube-sim rules), and it sends its audit log to the materializer's webhook
under the rendered audit policy. The webhook kubeconfig is the one NOTES.txt tells users to
write. The Git remote is served over smart HTTP with basic auth from another container. The
story then runs: a GitProvider, GitTarget and WatchRule are applied, two users change
ConfigMaps, and each change must reach the remote as a commit with its user as the author.

Needs root, podman with netavark (tools/install-deps.sh), the images in deploy/image's store,
and the binaries chart-render, kube-sim and kubectl. Everything it starts (containers, the
network, files) is removed at the end, also on failure.

  deploy/helm/chart_run_test.py [--junit FILE] [--keep]
"""

import argparse
import base64
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
import socket

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "deploy", "local"), os.path.join(ROOT, "tools", "ci")]
import junit  # noqa: E402  (tools/ci: what tools/test.sh counts)
from stack import find_kubectl, run  # noqa: E402  (the local stack's helpers)

NAMESPACE = "reverser"        # the release namespace of run.values.yaml
TEAM = "team"                 # where the story's objects live
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def log(msg):
    print(f"chart-run: {msg}", flush=True)


def wait_until(predicate, timeout, what, poll=0.1):
    """Like the local stack's, but a predicate that raises is asked again (a probe's refused
    connection, an object not there yet) and its last error is reported on timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 (the last error is reported on timeout)
            last = e
        time.sleep(poll)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last})" if last else ""))


# ---- the render -------------------------------------------------------------------------------

class Render:
    """The rendered objects, indexed by kind and name."""

    def __init__(self, text):
        self.objects = [d for d in yaml.safe_load_all(text) if d]
        self.by_kind = {}
        for o in self.objects:
            self.by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o

    def kind(self, kind):
        return list(self.by_kind.get(kind, {}).values())

    def get(self, kind, name):
        try:
            return self.by_kind[kind][name]
        except KeyError:
            raise RuntimeError(f"the render has no {kind} {name}") from None

    def secret_data(self, name):
        s = self.get("Secret", name)
        data = {k: base64.b64decode(v) for k, v in (s.get("data") or {}).items()}
        data.update({k: v.encode() for k, v in (s.get("stringData") or {}).items()})
        return data

    def configmap_data(self, name):
        c = self.get("ConfigMap", name)
        return {k: v.encode() for k, v in (c.get("data") or {}).items()}


def rbac_rules(render):
    """kube-sim allow rules equivalent to the rendered RBAC (resourceNames are not narrowed)."""
    rules = []
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for binding in render.kind(kind):
            ref = binding["roleRef"]
            role = render.get(ref["kind"], ref["name"])
            users, groups = [], []
            for s in binding.get("subjects") or []:
                if s["kind"] == "ServiceAccount":
                    users.append(f"system:serviceaccount:{s.get('namespace', binding['metadata'].get('namespace'))}:{s['name']}")
                elif s["kind"] == "User":
                    users.append(s["name"])
                else:
                    groups.append(s["name"])
            namespaces = [binding["metadata"]["namespace"]] if kind == "RoleBinding" else []
            for r in role.get("rules") or []:
                rule = {"users": users, "groups": groups, "verbs": r.get("verbs", []), "namespaces": namespaces}
                if "nonResourceURLs" in r:
                    rule["nonResourceURLs"] = r["nonResourceURLs"]
                else:
                    rule["apiGroups"] = r.get("apiGroups", [])
                    rule["resources"] = r.get("resources", [])
                rules.append(rule)
    return rules


# ---- podman -----------------------------------------------------------------------------------

class Podman:
    """podman with deploy/image's private configuration and store, plus netavark for DNS."""

    def __init__(self, state):
        self.env = dict(os.environ)
        out = run(["bash", "-c", f'source "{ROOT}/deploy/image/podman_env.sh" && env'], env=self.env).stdout
        for line in out.splitlines():
            k, _, v = line.partition("=")
            if k.startswith("CONTAINERS_"):
                self.env[k] = v
        # Container DNS (each pod under its Services' names) needs the netavark backend.
        conf = os.path.join(state, "containers.conf")
        with open(self.env["CONTAINERS_CONF"]) as f:
            base = f.read()
        with open(conf, "w") as f:
            f.write(base.replace("[engine]", '[network]\nnetwork_backend = "netavark"\n[engine]'))
        self.env["CONTAINERS_CONF"] = conf

    def __call__(self, *args, check=True, input=None):
        return run(["podman", *args], check=check, input=input, env=self.env)


def expand(value, env):
    """Kubernetes' $(VAR) expansion in command, args and env values ($$ escapes)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


class Cluster:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="reverser-chart-run.")
        os.chmod(self.work, 0o755)
        self.tag = secrets.token_hex(3)
        self.network = f"reverser-chart-{self.tag}"
        self.subnet = f"10.{random_octet()}.{random_octet()}"
        self.containers = []
        self.pods = {}  # container name -> (IP, HTTP port) for the failure report
        self.podman = Podman(self.work)
        self.kubectl_bin = find_kubectl()
        self.tokens = {}

    # -- lifecycle

    def cleanup(self):
        """Removes what was started; returns what could not be removed."""
        for name in reversed(self.containers):
            self.podman("rm", "-f", "-t", "2", name, check=False)
        self.podman("network", "rm", "-f", self.network, check=False)
        left = self.podman("ps", "-a", "--format", "{{.Names}}", "--filter", f"name={self.network}",
                           check=False).stdout.split()
        left += [n for n in self.podman("network", "ls", "--format", "{{.Name}}", check=False).stdout.split()
                 if n == self.network]
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            log(f"kept {self.work}")
        return left

    def path(self, *parts):
        """A file's path under the work directory, its folder made."""
        p = os.path.join(self.work, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def folder(self, *parts):
        """A folder under the work directory, made."""
        p = os.path.join(self.work, *parts)
        os.makedirs(p, exist_ok=True)
        return p

    def write(self, rel, data, mode=0o644, uid=0, gid=0):
        p = self.path(rel)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        os.chmod(p, mode)
        os.chown(p, uid, gid)
        return p

    def ip(self, n):
        return f"{self.subnet}.{n}"

    # -- PKI for the API server (the chart makes every other certificate)

    def pki(self):
        d = self.folder("pki")

        def ossl(*a):
            subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
             "-out", "ca.crt", "-days", "1", "-subj", "/CN=chart-run-cluster-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        with open(os.path.join(d, "kube.ext"), "w") as f:
            f.write(f"subjectAltName=DNS:kubernetes.default.svc,DNS:kubernetes.default,IP:{self.ip(2)}\n"
                    "extendedKeyUsage=serverAuth\n")
        ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "kube.key",
             "-out", "kube.csr", "-subj", "/CN=kube-apiserver")
        ossl("x509", "-req", "-in", "kube.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "kube.crt", "-days", "1", "-extfile", "kube.ext")
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)
        return d

    # -- the API server

    def start_api_server(self, render):
        pki = self.pki()
        self.ca = os.path.join(pki, "ca.crt")
        # Tokens: one per service account, the test's admin, and two people.
        lines = []
        for sa in render.kind("ServiceAccount"):
            ns = sa["metadata"].get("namespace", NAMESPACE)
            name = sa["metadata"]["name"]
            token = secrets.token_hex(24)
            self.tokens[f"sa:{name}"] = token
            lines.append(f'{token},system:serviceaccount:{ns}:{name},uid-{name},'
                         f'"system:serviceaccounts,system:serviceaccounts:{ns},system:authenticated"')
        for user, groups in (("admin", "system:masters"), ("alice", "system:authenticated"),
                             ("bob", "system:authenticated")):
            token = secrets.token_hex(24)
            self.tokens[user] = token
            lines.append(f'{token},{user},uid-{user},"{groups}"')
        tokens = self.write("kube/tokens.csv", "\n".join(lines) + "\n")
        rules = rbac_rules(render)
        # The two people may change ConfigMaps and Secrets in the story's namespace.
        rules.append({"users": ["alice", "bob"], "verbs": ["*"], "apiGroups": [""],
                      "resources": ["configmaps", "secrets"], "namespaces": [TEAM]})
        rbac = self.write("kube/rbac.json", json.dumps(rules, indent=1))
        # The audit policy users give the API server: the rendered ConfigMap's.
        policy_cm = next(c for c in render.kind("ConfigMap") if "audit-policy.yaml" in (c.get("data") or {}))
        policy = self.write("kube/audit-policy.yaml", policy_cm["data"]["audit-policy.yaml"])
        webhook = self.audit_webhook_kubeconfig(render)
        sim = os.path.realpath(self.args.kube_sim)
        argv = [sim, "--bind_address=0.0.0.0", "--port=6443", f"--tls_cert_file={pki}/kube.crt",
                f"--tls_key_file={pki}/kube.key", f"--tokens_file={tokens}", f"--rbac_file={rbac}",
                f"--audit_policy_file={policy}", f"--audit_webhook_config_file={webhook}",
                "--audit_webhook_batch_max_wait_seconds=0.05", "--audit_webhook_initial_backoff_seconds=0.2"]
        self.host_container("kube-apiserver", 2, ["kubernetes.default.svc", "kubernetes.default"], argv,
                            [self.work, os.path.dirname(sim)])
        self.server = f"https://{self.ip(2)}:6443"
        self.kubeconfig = self.write("kube/admin.kubeconfig", kubeconfig(self.server, self.ca, self.tokens["admin"]))
        wait_until(lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, 60,
                   "the API server")

    def audit_webhook_kubeconfig(self, render):
        """The kubeconfig NOTES.txt tells users to write, with files instead of *-data."""
        notes = self.args.notes_text
        server = re.search(r"server: (https://\S+)", notes).group(1)
        ca_secret = re.search(r"certificate-authority-data: \$\(secret (\S+) ", notes).group(1)
        client_secret = re.search(r"client-certificate-data: \$\(secret (\S+) ", notes).group(1)
        ca = self.write("kube/webhook-ca.crt", render.secret_data(ca_secret)["ca.crt"])
        cert = self.write("kube/webhook-client.crt", render.secret_data(client_secret)["tls.crt"])
        key = self.write("kube/webhook-client.key", render.secret_data(client_secret)["tls.key"])
        return self.write("kube/audit-webhook.kubeconfig", yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "reverser-audit", "cluster": {"server": server, "certificate-authority": ca}}],
            "users": [{"name": "kube-apiserver", "user": {"client-certificate": cert, "client-key": key}}],
            "contexts": [{"name": "reverser-audit", "context": {"cluster": "reverser-audit", "user": "kube-apiserver"}}],
            "current-context": "reverser-audit"}))

    def kubectl(self, *args, user=None, input=None, check=True):
        config = self.kubeconfig if user is None else self.user_kubeconfig(user)
        return run([self.kubectl_bin, f"--kubeconfig={config}", *args], check=check, input=input)

    def user_kubeconfig(self, user):
        p = os.path.join(self.work, "kube", f"{user}.kubeconfig")
        if not os.path.exists(p):
            self.write(f"kube/{user}.kubeconfig", kubeconfig(self.server, self.ca, self.tokens[user]))
        return p

    def host_container(self, name, octet, aliases, argv, mounts):
        """A helper process (API server, Git server) on the network, from the host's own files."""
        cname = f"{self.network}-{name}"
        cmd = ["run", "-d", "--name", cname, "--network", self.network, "--ip", self.ip(octet),
               "--hostname", name, "--rootfs"]
        for a in aliases:
            cmd += ["--network-alias", a]
        for m in mounts:
            cmd += ["-v", f"{m}:{m}"]
        self.podman(*cmd, "/:O", *argv)  # the root: an overlay of the host's, writes discarded
        self.containers.append(cname)
        return cname

    # -- the Git remote

    def start_git_server(self):
        self.git_user, self.git_password = "mirror", secrets.token_hex(12)
        self.remote = self.path("git", "repo.git")
        run(["git", "init", "-q", "--bare", "-b", "main", self.remote])
        run(["git", "-C", self.remote, "config", "http.receivepack", "true"])
        seed = self.folder("git", "seed")
        run(["git", "clone", "-q", self.remote, seed])
        with open(os.path.join(seed, "README.md"), "w") as f:
            f.write("cluster mirror\n")
        run(["git", "-C", seed, "add", "."])
        run(["git", "-C", seed, "-c", "user.name=seed", "-c", "user.email=seed@example.com", "commit", "-qm", "seed"])
        run(["git", "-C", seed, "push", "-q", "origin", "main"])
        # The local stack's smart-HTTP server (git http-backend), with basic auth, in a container.
        with open(os.path.join(ROOT, "deploy", "local", "git_http_server.py")) as f:
            server = self.write("git/server.py", f.read())
        self.host_container("git", 3, ["git.example.test"],
                            [sys.executable, server, self.folder("git"), "8080",
                             "--user", self.git_user, "--password", self.git_password],
                            [self.work])
        self.git_url = "http://git.example.test:8080/repo.git"
        wait_until(lambda: http_status(f"http://{self.ip(3)}:8080/healthz") == 200, 30, "the Git server")

    # -- pods

    def run_pods(self, render):
        services = render.kind("Service")
        workloads = render.kind("StatefulSet") + render.kind("Deployment")  # Redis first
        octet = 10
        for w in workloads:
            replicas = w["spec"].get("replicas", 1)
            for i in range(replicas):
                octet += 1
                self.run_pod(render, w, i, octet, services)

    def run_pod(self, render, workload, index, octet, services):
        kind = workload["kind"]
        wname = workload["metadata"]["name"]
        pod_name = f"{wname}-{index}" if kind == "StatefulSet" else f"{wname}-{secrets.token_hex(4)}"
        template = workload["spec"]["template"]
        spec = template["spec"]
        labels = template["metadata"].get("labels", {})
        ns = workload["metadata"].get("namespace", NAMESPACE)
        if len(spec["containers"]) != 1:
            raise RuntimeError(f"{wname}: one container per pod is what this runner knows")
        c = spec["containers"][0]
        pod_sc = spec.get("securityContext") or {}
        sc = {**pod_sc, **(c.get("securityContext") or {})}
        uid = sc.get("runAsUser")
        gid = sc.get("runAsGroup", uid)
        fs_group = pod_sc.get("fsGroup")
        if sc.get("runAsNonRoot") and (uid is None or uid == 0):
            raise RuntimeError(f"{wname}: runAsNonRoot without a non-zero runAsUser")
        cname = f"{self.network}-{pod_name}"
        cmd = ["run", "-d", "--name", cname, "--network", self.network, "--ip", self.ip(octet),
               "--hostname", pod_name, "--pull=never"]
        aliases = []
        for s in services:
            sel = s["spec"].get("selector") or {}
            if sel and all(labels.get(k) == v for k, v in sel.items()):
                n = s["metadata"]["name"]
                aliases += [n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local"]
                if kind == "StatefulSet" and workload["spec"].get("serviceName") == n:
                    aliases += [f"{pod_name}.{n}.{ns}.svc", f"{pod_name}.{n}.{ns}.svc.cluster.local"]
        for a in aliases:
            cmd += ["--network-alias", a]
        if uid is not None:
            cmd += ["--user", f"{uid}:{gid}"]
        if fs_group is not None:
            cmd += ["--group-add", str(fs_group)]
        if sc.get("readOnlyRootFilesystem"):
            cmd += ["--read-only", "--read-only-tmpfs=false"]
        caps = sc.get("capabilities") or {}
        for cap in caps.get("drop") or []:
            cmd += ["--cap-drop", cap]
        for cap in caps.get("add") or []:
            cmd += ["--cap-add", cap]
        if sc.get("allowPrivilegeEscalation") is False:
            cmd += ["--security-opt", "no-new-privileges"]
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp not in (None, "RuntimeDefault"):
            raise RuntimeError(f"{wname}: seccomp {seccomp} is not what this runner knows")
        memory = ((c.get("resources") or {}).get("limits") or {}).get("memory")
        if memory:
            cmd += ["--memory", quantity_bytes(memory)]
        # Environment, as the kubelet builds it.
        env = {"KUBERNETES_SERVICE_HOST": self.ip(2), "KUBERNETES_SERVICE_PORT": "6443"}
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = expand(str(e["value"]), env)
            else:
                env[e["name"]] = self.value_from(render, e["valueFrom"], pod_name, ns, self.ip(octet))
        for k, v in env.items():
            cmd += ["--env", f"{k}={v}"]
        # Volumes.
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for claim in workload["spec"].get("volumeClaimTemplates") or []:
            volumes[claim["metadata"]["name"]] = {"name": claim["metadata"]["name"], "pvc": True}
        for m in c.get("volumeMounts") or []:
            source = self.volume_dir(render, pod_name, volumes[m["name"]], uid, gid, fs_group)
            if m.get("subPath"):
                source = os.path.join(source, m["subPath"])
            ro = ",ro" if m.get("readOnly") else ""
            cmd += ["--mount", f"type=bind,source={source},destination={m['mountPath']}{ro}"]
        if spec.get("automountServiceAccountToken", True) and spec.get("serviceAccountName"):
            token_dir = self.folder("pods", pod_name, "serviceaccount")
            sa = spec["serviceAccountName"]
            self.write(os.path.relpath(os.path.join(token_dir, "token"), self.work), self.tokens[f"sa:{sa}"],
                       0o440, 0, fs_group or 0)
            with open(self.ca, "rb") as f:
                self.write(os.path.relpath(os.path.join(token_dir, "ca.crt"), self.work), f.read(), 0o444)
            self.write(os.path.relpath(os.path.join(token_dir, "namespace"), self.work), ns, 0o444)
            cmd += ["--mount", f"type=bind,source={token_dir},destination={TOKEN_DIR},ro"]
        if c.get("command"):
            cmd += ["--entrypoint", json.dumps([expand(a, env) for a in c["command"]])]
        cmd.append(c["image"])
        cmd += [expand(str(a), env) for a in c.get("args") or []]
        self.podman(*cmd)
        self.containers.append(cname)
        http = next((p["containerPort"] for p in c.get("ports") or [] if p.get("name") == "http"), None)
        if http:
            self.pods[cname] = (self.ip(octet), http)
        self.wait_ready(cname, c, octet, pod_name)

    def value_from(self, render, source, pod_name, ns, pod_ip):
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            return render.secret_data(ref["name"])[ref["key"]].decode()
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            return render.configmap_data(ref["name"])[ref["key"]].decode()
        if "fieldRef" in source:
            field = source["fieldRef"]["fieldPath"]
            return {"metadata.name": pod_name, "metadata.namespace": ns, "status.podIP": pod_ip}[field]
        raise RuntimeError(f"valueFrom {source} is not what this runner knows")

    def volume_dir(self, render, pod_name, volume, uid, gid, fs_group):
        d = self.folder("pods", pod_name, "volumes", volume["name"])
        if "secret" in volume or "configMap" in volume:
            src = volume.get("secret") or volume.get("configMap")
            data = (render.secret_data(src["secretName"]) if "secret" in volume
                    else render.configmap_data(src["name"]))
            items = src.get("items") or [{"key": k, "path": k} for k in data]
            mode = src.get("defaultMode", 0o644)
            for item in items:
                if item["key"] not in data:
                    raise RuntimeError(f"volume {volume['name']}: no key {item['key']}")
                self.write(os.path.relpath(os.path.join(d, item["path"]), self.work), data[item["key"]],
                           item.get("mode", mode), 0, fs_group if fs_group is not None else 0)
            os.chmod(d, 0o755)
        elif "emptyDir" in volume or volume.get("pvc"):
            # Owned by the fsGroup, group-writable with setgid, as the kubelet prepares them.
            os.chown(d, 0, fs_group if fs_group is not None else (gid or 0))
            os.chmod(d, 0o2775 if fs_group is not None else 0o777)
        else:
            raise RuntimeError(f"volume {volume['name']}: kind {sorted(volume)} is not what this runner knows")
        return d

    def wait_ready(self, cname, container, octet, pod_name):
        probe = container.get("readinessProbe")
        if not probe:
            return
        ports = {p["name"]: p["containerPort"] for p in container.get("ports") or [] if "name" in p}

        def port(p):
            return ports[p] if isinstance(p, str) else p

        def ok():
            state = self.podman("inspect", "-f", "{{.State.Status}}", cname).stdout.strip()
            if state not in ("running", "created"):
                raise RuntimeError(f"{pod_name} is {state}:\n{self.logs(cname)}")
            if "httpGet" in probe:
                g = probe["httpGet"]
                return http_status(f"http://{self.ip(octet)}:{port(g['port'])}{g.get('path', '/')}") == 200
            if "tcpSocket" in probe:
                with socket.create_connection((self.ip(octet), port(probe["tcpSocket"]["port"])), timeout=1):
                    return True
            if "exec" in probe:
                return self.podman("exec", cname, *probe["exec"]["command"], check=False).returncode == 0
            raise RuntimeError(f"{pod_name}: probe {sorted(probe)} is not what this runner knows")
        try:
            wait_until(ok, 90, f"{pod_name}'s readiness probe", poll=0.2)
        except Exception:
            log(f"{pod_name} logs:\n{self.logs(cname)}")
            raise
        log(f"{pod_name} ready")

    def report(self, cname):
        """What a failure shows of a container: its log tail, and /readyz and metrics of a pod."""
        text = self.logs(cname)
        if cname in self.pods:
            ip, port = self.pods[cname]
            for path in ("/readyz", "/metrics"):
                try:
                    with urllib.request.urlopen(f"http://{ip}:{port}{path}", timeout=2) as r:
                        body = r.read().decode()
                except urllib.error.HTTPError as e:
                    body = e.read().decode()
                except OSError as e:
                    body = str(e)
                if path == "/metrics":
                    body = "\n".join(l for l in body.splitlines()
                                     if l.startswith("reverser_") and not l.endswith(" 0") and "_bucket" not in l)
                text += f"\n{path}:\n{body}"
        return text

    def logs(self, cname):
        p = self.podman("logs", cname, check=False)
        return (p.stdout + p.stderr)[-6000:]


def kubeconfig(server, ca, token):
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c"})


def random_octet():
    return 100 + secrets.randbelow(150)


def quantity_bytes(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6, "G": 10**9}
    for u, f in units.items():
        if q.endswith(u):
            return str(int(float(q[:-len(u)]) * f))
    return str(int(q))


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


# ---- the story --------------------------------------------------------------------------------

def story(cluster, render):
    k = cluster.kubectl
    crds = [o for o in render.objects if o["kind"] == "CustomResourceDefinition"]
    if not crds:
        raise RuntimeError("the render has no CRDs (chart-render --include-crds)")
    k("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(crds))
    k("create", "namespace", NAMESPACE)
    k("create", "namespace", TEAM)
    # What the pods read through the API: the rendered Secrets and ConfigMaps (the gitworker and
    # the catalog read credentials and keys this way; the rest are mounted).
    plain = [o for o in render.objects if o["kind"] in ("Secret", "ConfigMap", "ServiceAccount")]
    k("apply", "-f", "-", input=yaml.safe_dump_all(plain))
    k("-n", TEAM, "create", "secret", "generic", "git-creds",
      f"--from-literal=username={cluster.git_user}", f"--from-literal=password={cluster.git_password}")
    cluster.run_pods(render)
    log("every pod is ready; applying the quickstart mirror")
    mirror = [o for o in render.objects if o["kind"] in ("GitProvider", "GitTarget", "WatchRule")]
    if len(mirror) != 3:
        raise RuntimeError(f"the render's quickstart has {len(mirror)} objects, not 3 (run.values.yaml)")
    target = next(o for o in mirror if o["kind"] == "GitTarget")
    name, path = target["metadata"]["name"], target["spec"]["path"]
    age_secret = target["spec"]["encryption"]["secretRef"]["name"]
    # kubectl validates a List through /openapi/v2, which kube-sim's modern profile does not serve.
    k("apply", "--validate=false", "-f", "-", input=yaml.safe_dump_all(mirror))

    def streams_running():
        status = json.loads(k("-n", TEAM, "get", "gittarget", name, "-o", "json").stdout).get("status") or {}
        running = [c for c in status.get("conditions") or [] if c.get("type") == "StreamsRunning"]
        return running and running[0].get("status") == "True"
    # Changes made from here on are live events (earlier ones reach Git in the first resync).
    wait_until(streams_running, 120, f"GitTarget {name}'s StreamsRunning condition", poll=0.25)
    log("the GitTarget's streams are running")
    # generateWhenMissing: the catalog made the age key (its RBAC allows creating Secrets).
    key = json.loads(k("-n", TEAM, "get", "secret", age_secret, "-o", "json").stdout)
    if not key.get("data"):
        raise AssertionError(f"Secret {age_secret} holds no key")

    def log_lines():
        return run(["git", "--git-dir", cluster.remote, "log", "--format=%an|%s", "main"]).stdout.splitlines()
    plaintext = "the-password-of-bob-" + secrets.token_hex(4)
    changes = [("alice", ["create", "configmap", "from-alice", "--from-literal=who=alice"], "configmaps/from-alice"),
               ("bob", ["create", "configmap", "from-bob", "--from-literal=who=bob"], "configmaps/from-bob"),
               ("bob", ["create", "secret", "generic", "bobs-secret", f"--from-literal=password={plaintext}"],
                "secrets/bobs-secret")]
    for user, argv, subject in changes:
        k("-n", TEAM, *argv, user=user)
        wait_until(lambda: any(line.startswith(f"{user}|") and line.endswith(subject) for line in log_lines()), 120,
                   f"{user}'s commit of {subject} on the remote (log so far: {log_lines()})", poll=0.25)
        log(f"{user}'s change of {subject} is on the remote")

    def show(rel):
        return run(["git", "--git-dir", cluster.remote, "show", f"main:{path}/{TEAM}/{rel}"]).stdout
    if "who: bob" not in show("configmaps/from-bob.yaml"):
        raise AssertionError(f"from-bob.yaml does not hold its data:\n{show('configmaps/from-bob.yaml')}")
    secret_file = show("secrets/bobs-secret.sops.yaml")
    if "ENC[" not in secret_file or "sops:" not in secret_file:
        raise AssertionError(f"the Secret is not SOPS-encrypted in Git:\n{secret_file}")
    everything = run(["git", "--git-dir", cluster.remote, "log", "-p", "--all"]).stdout
    for form in (plaintext, base64.b64encode(plaintext.encode()).decode()):
        if form in everything:
            raise AssertionError("the Secret's value is in the Git history in plaintext")
    return log_lines()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--render", required=True, help="the chart rendered with --include-crds (a file)")
    ap.add_argument("--notes", required=True, help="the chart's NOTES.txt rendered with the same values (a file)")
    ap.add_argument("--kube_sim", required=True, help="the kube-sim binary")
    ap.add_argument("--junit", help="write one JUnit result here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (containers are removed)")
    args = ap.parse_args()
    if not os.access(args.kube_sim, os.X_OK):
        ap.error(f"--kube_sim {args.kube_sim}: not an executable (bazel build //tools/kube-sim)")
    with open(args.render) as f:
        render = Render(f.read())
    with open(args.notes) as f:
        args.notes_text = f.read()
    started = time.monotonic()
    cluster = Cluster(args)
    ok, message = False, ""
    # A SIGTERM (a CI timeout) still removes what was started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for attempt in range(5):  # a random /24; another network may hold it
            created = cluster.podman("network", "create", "--subnet", f"{cluster.subnet}.0/24", cluster.network,
                                     check=attempt == 4)
            if created.returncode == 0:
                break
            cluster.subnet = f"10.{random_octet()}.{random_octet()}"
        cluster.start_api_server(render)
        cluster.start_git_server()
        commits = story(cluster, render)
        log("commits on the remote, newest first:\n  " + "\n  ".join(commits))
        ok = True
    except Exception as e:  # noqa: BLE001 (reported, then the cleanup runs)
        message = f"{e}\n{traceback.format_exc()}"
        for name in cluster.containers:
            message += f"\n--- {name}\n{cluster.report(name)}"
        if getattr(cluster, "kubeconfig", None):
            for kind in ("gitproviders", "gittargets", "watchrules"):
                got = cluster.kubectl("get", kind, "-A", "-o", "json", check=False)
                for item in (json.loads(got.stdout).get("items", []) if got.returncode == 0 else []):
                    conditions = [(c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                                  for c in (item.get("status") or {}).get("conditions") or []]
                    message += f"\n--- {kind} {item['metadata']['namespace']}/{item['metadata']['name']}: {conditions}"
        print(message, file=sys.stderr)
    finally:
        left = cluster.cleanup()
    if left:
        ok, message = False, message + f"\nleft behind after the cleanup: {left}"
        print(message, file=sys.stderr)
    seconds = time.monotonic() - started
    log(("passed" if ok else "FAILED") + f" in {seconds:.0f} s")
    if args.junit:
        junit.write(args.junit, "chart-run", [("default render runs the story", ok,
                                               message.splitlines()[0] if message else "", message)])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
