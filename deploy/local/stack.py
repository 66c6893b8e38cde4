#!/usr/bin/env python3
"""The local reverser stack: a real redis-server, the test API server (kube-sim) with its audit
backend posting to the materializer's webhook over mTLS, the four services as separate
processes, and a local bare Git remote; everything on loopback in a temporary directory and torn
down on exit (no stray processes).

Used by the README's main command (deploy/local/demo.sh) and by the end-to-end tests
(tests/e2e). Run `stack.py --help` for the demo's options.
"""
import argparse
import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import tempfile
import time

USERS = {
    # token: (user, groups)
    "admin-token": ("admin", "system:masters"),
    "alice-token": ("alice@example.com", "system:authenticated"),
    "bob-token": ("bob@example.com", "system:authenticated"),
    "ci-token": ("system:serviceaccount:ci:deployer", "system:serviceaccounts,system:authenticated"),
    # The materializer's own identity when the stack restricts it (Stack(materializer_rbac=...)).
    "materializer-token": ("system:serviceaccount:reverser:materializer",
                           "system:serviceaccounts,system:authenticated"),
}
MATERIALIZER_USER = USERS["materializer-token"][0]
# Where the replicas of a scaled-out stack keep their Leases (Stack(replicas=...)).
MEMBERSHIP_NAMESPACE = "reverser-system"
# The admission webhook's Service (namespace, name), as the chart names it.
ADMISSION_SERVICE = ("reverser", "reverser-materializer")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout, what, poll=0.05):
    """Asks `predicate` until it answers something true, and returns that answer."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)


def metric_sum(text, name, **labels):
    """Sum of a Prometheus metric's samples whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def find_kubectl(version="1.33"):
    """The versioned kubectl binary beside the gcloud dispatcher (the dispatcher itself probes
    /version first; calling the real binary avoids that)."""
    dispatcher = shutil.which("kubectl")
    if dispatcher:
        candidate = os.path.join(os.path.dirname(os.path.realpath(dispatcher)), f"kubectl.{version}")
        if os.path.exists(candidate):
            return candidate
    found = shutil.which(f"kubectl.{version}")
    if found:
        return found
    raise FileNotFoundError(f"kubectl.{version} not found (install the google-cloud-sdk kubectl)")


def run(cmd, check=True, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result


class Stack:
    def __init__(self, bin_dir, repo_root, workdir=None, commit_window="0s", push_cooldown="0s",
                 attribution_grace="3s", log=print, profile="modern", materializer_rbac=None,
                 grpc_tls=True, attribution="audit", redis_sentinel=False, replicas=None,
                 git_server="file"):
        """commit_window: the GitProvider's spec.push.commitWindow (apply_mirror);
        push_cooldown: the gitworker's --push_cooldown; attribution_grace: the splicer's wait for
        an author fact; profile: kube-sim's API server profile, "modern" (WatchList served) or
        "legacy" (1.27-1.33: sendInitialEvents rejected with 422, clients fall back to LIST);
        materializer_rbac: kube-sim allow rules ({verbs, apiGroups, resources, namespaces}) for
        the materializer, which then runs as its own user (MATERIALIZER_USER) instead of admin —
        RBAC is on, so alice, bob and ci may do nothing either (admin is system:masters);
        grpc_tls: the mesh and Redis speak mutual TLS (as in a cluster); False runs the mesh with
        --grpc_insecure and Redis without TLS, only for the benchmark's plaintext comparison;
        attribution: where authors come from — "audit" (the API server audits to the
        materializer), "admission" (no audit webhook at all, as on a managed control plane: the
        attribution ValidatingWebhookConfiguration sends changes to the admission webhook) or
        "both"; redis_sentinel: Redis as a primary, a replica and a Sentinel (all TLS, the ACL
        user), the services finding the primary through the Sentinel (--redis_sentinels);
        replicas: how many processes of the materializer, the splicer and the gitworker run
        ({"gitworker": 3, ...}; default one each). With more than one of any, every one of them
        joins with --membership (Leases in MEMBERSHIP_NAMESPACE, short timing) and the splicers
        route by the gitworkers' Leases. Replica 0 keeps the plain name ("gitworker"), the others
        are "gitworker-1", ...; each has its own log, ports and work dir; git_server: how the
        gitworkers reach the bare remote, "file" (a file:// URL: libgit2's local transport, which
        packs what a fetch needs itself) or "http" (smart HTTP from git_http_server.py on
        loopback: Git's upload-pack and receive-pack, as a Git host serves it)."""
        if git_server not in ("file", "http"):
            raise ValueError(f"git_server: {git_server!r} (file, http)")
        self.git_server = git_server
        self.redis_sentinel = redis_sentinel
        self.replicas = {"materializer": 1, "splicer": 1, "gitworker": 1, **(replicas or {})}
        for service, count in self.replicas.items():
            if service not in ("materializer", "splicer", "gitworker") or count < 1:
                raise ValueError(f"replicas: {service}={count} (materializer, splicer, gitworker; >= 1)")
        self.membership = any(count > 1 for count in self.replicas.values())
        if attribution not in ("audit", "admission", "both"):
            raise ValueError(f"attribution: {attribution!r} (audit, admission, both)")
        self.attribution = attribution
        self.bin = bin_dir
        self.root = repo_root
        self.dir = workdir or tempfile.mkdtemp(prefix="reverser-stack.")
        self.commit_window = commit_window
        self.push_cooldown = push_cooldown
        self.attribution_grace = attribution_grace
        self.profile = profile
        self.materializer_rbac = materializer_rbac
        self.grpc_tls = grpc_tls
        self.log = log
        self.procs = {}
        self.ports = {}
        self.kubectl_bin = find_kubectl()

    # ---- processes -------------------------------------------------------------------------

    def _spawn(self, name, argv, env=None):
        with open(os.path.join(self.dir, f"{name}.log"), "a") as out:  # a restart appends
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
        self.procs[name] = proc
        return proc

    def _binary(self, rel):
        path = os.path.join(self.bin, rel)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} is missing (build with bazel first)")
        return path

    @staticmethod
    def service_of(name):
        """The service a process runs: "gitworker-2" → "gitworker"."""
        base, _, suffix = name.rpartition("-")
        return base if base and suffix.isdigit() else name

    def replica_names(self, service):
        """The process names of a service's replicas: "gitworker", "gitworker-1", ..."""
        return [service] + [f"{service}-{i}" for i in range(1, self.replicas.get(service, 1))]

    def mesh_tls_args(self, name):
        """The --grpc_tls_* flags of certificate `name` (a service, or "admin" for reverserctl);
        replicas share their service's certificate."""
        if not self.grpc_tls:
            return ["--grpc_insecure"]
        name = self.service_of(name)
        return [f"--grpc_tls_ca={self.pki}/ca.crt", f"--grpc_tls_cert={self.pki}/grpc-{name}.crt",
                f"--grpc_tls_key={self.pki}/grpc-{name}.key"]

    def reverserctl_argv(self, *args, kubeconfig=None):
        """reverserctl as an operator runs it here: mutual TLS with the admin certificate, and the
        bearer token of a kubeconfig's user (default: admin's), which the services review with
        the API server."""
        return [self._binary("tools/reverserctl/reverserctl"), f"--endpoints_dir={self.dir}",
                *self.mesh_tls_args("admin"), f"--kubeconfig={kubeconfig or self.kubeconfig}", *args]

    def _service(self, name, args):
        endpoints = os.path.join(self.dir, f"{name}.json")
        if os.path.exists(endpoints):
            os.unlink(endpoints)
        service = self.service_of(name)
        self._spawn(name, [self._binary(f"services/{service}/{service}"), "--listen_address=127.0.0.1",
                           f"--grpc_port={self.ports.get(name + '_grpc', 0)}",
                           f"--http_port={self.ports.get(name + '_http', 0)}",
                           f"--endpoints_file={endpoints}"] + self.mesh_tls_args(name) + args)
        wait_until(lambda: os.path.exists(endpoints) or self.procs[name].poll() is not None, 30,
                   f"{name} to listen")
        if self.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited:\n{self.logs(name)}")
        with open(endpoints) as f:
            ep = json.load(f)
        # Keep the ports across restarts so peers reconnect to the same address.
        self.ports[name + "_grpc"], self.ports[name + "_http"] = ep["grpc_port"], ep["http_port"]
        return ep

    def logs(self, name):
        try:
            with open(os.path.join(self.dir, f"{name}.log")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def start_then(self, prepare):
        """start() and then prepare(); if either fails, shows the log tails, cleans up and
        re-raises (what every test suite's class set-up does)."""
        try:
            self.start()
            prepare()
        except Exception:
            self.print_log_tails()
            self.cleanup()
            raise

    def print_log_tails(self, lines=30, file=sys.stderr):
        """The last lines of every process's log: what a failed start or test shows."""
        for name in self.procs:
            print(f"--- {name} ---\n" + "\n".join(self.logs(name).splitlines()[-lines:]), file=file)

    def grpc(self, name):
        return f"127.0.0.1:{self.ports[name + '_grpc']}"

    def http(self, name):
        return f"http://127.0.0.1:{self.ports[name + '_http']}"

    # ---- setup -----------------------------------------------------------------------------

    def _pki(self):
        d = os.path.join(self.dir, "pki")
        os.makedirs(d)
        def ossl(*args):
            run(["openssl", *args], cwd=d)
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=reverser-local-ca",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        loopback = "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        # The gRPC mesh (docs/security.md): each service's certificate serves and calls, named
        # reverser-<role>; reverserctl calls as reverser-admin.
        mesh = [(f"grpc-{name}", f"reverser-{name}", loopback + "extendedKeyUsage=serverAuth,clientAuth\n")
                for name in ("catalog", "materializer", "splicer", "gitworker")]
        mesh.append(("grpc-admin", "reverser-admin", "extendedKeyUsage=clientAuth\n"))
        # Redis serves TLS on loopback and asks its clients (the services, redis-cli) for a
        # certificate of this CA (tls-auth-clients).
        redis = [("redis", "localhost", loopback + "extendedKeyUsage=serverAuth\n"),
                 ("redis-client", "reverser-redis-client", "extendedKeyUsage=clientAuth\n")]
        # The admission webhook is called by service name, as in a cluster.
        admission = f"subjectAltName=DNS:{ADMISSION_SERVICE[1]}.{ADMISSION_SERVICE[0]}.svc\n"
        for name, cn, ext in [("webhook", "localhost", loopback + "extendedKeyUsage=serverAuth\n"),
                              ("admission", "reverser-materializer", admission + "extendedKeyUsage=serverAuth\n"),
                              ("kube", "localhost", loopback + "extendedKeyUsage=serverAuth\n"),
                              ("apiserver", "kube-apiserver", "extendedKeyUsage=clientAuth\n")] + mesh + redis:
            with open(os.path.join(d, f"{name}.ext"), "w") as f:
                f.write(ext)
            ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
            ossl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")
        return d

    def start(self):
        self.log(f"==> working directory {self.dir}")
        # Git remote: a bare repository as a user has it.
        self.remote = os.path.join(self.dir, "remote.git")
        run(["git", "init", "-q", "--bare", "-b", "main", self.remote])
        # A reflog on the remote records every ref update (push) with its time.
        run(["git", "-C", self.remote, "config", "core.logAllRefUpdates", "always"])
        seed = os.path.join(self.dir, "seed")
        run(["git", "clone", "-q", self.remote, seed])
        with open(os.path.join(seed, "README.md"), "w") as f:
            f.write("# cluster mirror\n")
        git_env = {**os.environ, "GIT_AUTHOR_NAME": "Seed", "GIT_AUTHOR_EMAIL": "seed@example.com",
                   "GIT_COMMITTER_NAME": "Seed", "GIT_COMMITTER_EMAIL": "seed@example.com"}
        run(["git", "-C", seed, "add", "-A"])
        run(["git", "-C", seed, "commit", "-q", "-m", "initial commit"], env=git_env)
        run(["git", "-C", seed, "push", "-q", "origin", "main"])
        shutil.rmtree(seed)
        if self.git_server == "http":
            run(["git", "-C", self.remote, "config", "http.receivepack", "true"])
            self.ports["git"] = free_port()
            self._spawn("git-server", [sys.executable, os.path.join(self.root, "deploy", "local", "git_http_server.py"),
                                      self.dir, str(self.ports["git"]), "--bind", "127.0.0.1"])
            self.remote_url = f"http://127.0.0.1:{self.ports['git']}/remote.git"
            wait_until(lambda: run(["git", "ls-remote", self.remote_url], check=False).returncode == 0, 30,
                       "the Git server")
        else:
            self.remote_url = f"file://{self.remote}"
        self.log(f"==> git remote         {self.remote_url}")

        pki = self._pki()
        self.pki = pki

        # Redis: TLS only, with the stack's CA (its certificate names 127.0.0.1).
        self.ports["redis"] = free_port()
        self._start_redis()
        if self.redis_sentinel:
            self.ports["redis_replica"] = free_port()
            self.ports["redis_sentinel"] = free_port()
            self._start_redis("redis-replica", self.ports["redis_replica"],
                              replica_of=self.ports["redis"])
            self._start_sentinel()
        self.redis = f"127.0.0.1:{self.ports['redis']}"
        self.log(f"==> redis-server       {self.redis} (TLS)")

        self.ports["audit"] = free_port()
        self.ports["admission"] = free_port()
        # The catalog calls the gitworker (CommitRequests) and starts first: its port is fixed now.
        # Each gitworker advertises its address in its Lease, so every replica's is fixed too.
        for name in self.replica_names("gitworker"):
            self.ports[name + "_grpc"] = free_port()

        # The API server, auditing to the materializer's webhook over mTLS.
        tokens = os.path.join(self.dir, "tokens.csv")
        with open(tokens, "w") as f:
            for i, (token, (user, groups)) in enumerate(USERS.items()):
                f.write(f'{token},{user},uid-{i},"{groups}"\n')
        policy = os.path.join(self.root, "deploy", "local", "audit-policy.yaml")
        port_file = os.path.join(self.dir, "kube-sim.port")
        rbac_args = []
        if self.materializer_rbac is not None:
            rbac = os.path.join(self.dir, "rbac.json")
            with open(rbac, "w") as f:
                # What the chart grants every service besides its own rules (system:auth-delegator):
                # reviewing operators' bearer tokens.
                delegation = [{"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"]},
                              {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                               "resources": ["subjectaccessreviews"]}]
                # Replicas hold their Leases (the chart's Role).
                leases = ([{"verbs": ["get", "list", "watch", "create", "update", "delete"],
                            "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}]
                          if self.membership else [])
                json.dump([{**rule, "users": [MATERIALIZER_USER]}
                           for rule in self.materializer_rbac + delegation + leases], f)
            rbac_args = [f"--rbac_file={rbac}"]
        audit_args = []
        if self.attribution != "admission":
            audit_args = [f"--audit_webhook_url=https://127.0.0.1:{self.ports['audit']}/audit-webhook",
                          f"--audit_webhook_ca_file={pki}/ca.crt",
                          f"--audit_webhook_client_cert={pki}/apiserver.crt",
                          f"--audit_webhook_client_key={pki}/apiserver.key",
                          "--audit_webhook_batch_max_wait_seconds=0.02",
                          "--audit_webhook_initial_backoff_seconds=0.2"]
        # HTTPS, as a real API server: kubectl sends bearer tokens only over TLS.
        self._spawn("kube-sim", [self._binary("tools/kube-sim/kube-sim"), "--port=0", f"--port_file={port_file}", *rbac_args,
                                 f"--tls_cert_file={pki}/kube.crt", f"--tls_key_file={pki}/kube.key",
                                 f"--tokens_file={tokens}", f"--audit_policy_file={policy}",
                                 f"--profile={self.profile}", *audit_args,
                                 "--webhook_service_override="
                                 f"{ADMISSION_SERVICE[0]}/{ADMISSION_SERVICE[1]}=127.0.0.1:{self.ports['admission']}"])
        def port_written():
            if not os.path.exists(port_file):
                return ""
            with open(port_file) as f:
                return f.read().strip()
        wait_until(port_written, 20, "kube-sim")
        self.ports["kube"] = int(port_written())
        self.server = f"https://127.0.0.1:{self.ports['kube']}"
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.materializer_kubeconfig = self.kubeconfig
        if self.materializer_rbac is not None:
            self.materializer_kubeconfig = os.path.join(self.dir, "kubeconfig-materializer")
            self._write_kubeconfig(self.materializer_kubeconfig, "materializer-token")
        self._write_kubeconfig(self.kubeconfig, "admin-token")
        self.log(f"==> kube-sim           {self.server} (profile {self.profile})")

        # The CRDs and the demo namespace.
        for crd in sorted(os.listdir(os.path.join(self.root, "deploy", "crds"))):
            if crd.endswith(".yaml"):
                self.kubectl("apply", "-f", os.path.join(self.root, "deploy", "crds", crd))
        # kubectl's `create` subcommands send protobuf bodies, which kube-sim does not decode:
        # objects are created with `apply` (JSON) instead.
        self.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}))
        if self.membership:
            self.kubectl("apply", "-f", "-", input=json.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MEMBERSHIP_NAMESPACE}}))

        # The catalog first: the gitworker follows its target configs, the others its claims.
        self.start_service("catalog")
        for service in ("gitworker", "materializer", "splicer"):
            for name in self.replica_names(service):
                self.start_service(name)
        for name in ["catalog"] + [n for s in ("materializer", "splicer", "gitworker") for n in self.replica_names(s)]:
            self.log(f"==> {name:<18} grpc {self.grpc(name)}  http {self.http(name)}")
        # CommitRequest CREATEs go through the materializer's admission webhook, which records
        # who asked (the chart's ValidatingWebhookConfiguration).
        self.kubectl("apply", "-f", "-", input=json.dumps(self.admission_webhook_configuration()))
        if self.attribution != "audit":
            # The chart's attribution configuration: no rules, the catalog writes the followed
            # types' (wait_attribution_rules).
            self.kubectl("apply", "-f", "-", input=json.dumps(self.attribution_webhook_configuration()))

    ATTRIBUTION_CONFIGURATION = "reverser-attribution"

    def attribution_webhook_configuration(self):
        config = self.admission_webhook_configuration()
        webhook = config["webhooks"][0]
        del webhook["rules"]
        webhook.update({"name": "changes.reverser.configbutler.ai", "timeoutSeconds": 1})
        config["metadata"]["name"] = self.ATTRIBUTION_CONFIGURATION
        return config

    def attribution_rules(self):
        """(group, resource) pairs the attribution configuration's rules send to the webhook."""
        out = self.kubectl("get", "validatingwebhookconfiguration", self.ATTRIBUTION_CONFIGURATION,
                           "-o", "json", check=False)
        if out.returncode != 0:
            return set()
        rules = json.loads(out.stdout)["webhooks"][0].get("rules") or []
        return {(g, r) for rule in rules for g in rule.get("apiGroups", []) for r in rule.get("resources", [])}

    def wait_attribution_rules(self, *group_resources, timeout=30):
        """Until the catalog's rules send every (group, resource) given to the webhook."""
        return wait_until(lambda: set(group_resources) <= self.attribution_rules(), timeout,
                          f"attribution rules for {group_resources}")

    def admission_webhook_configuration(self):
        with open(f"{self.pki}/ca.crt", "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "reverser-validate-operator-types"},
                "webhooks": [{"name": "commitrequests.reverser.configbutler.ai",
                              "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
                              "failurePolicy": "Ignore", "timeoutSeconds": 2,
                              "clientConfig": {"caBundle": ca_bundle, "service": {
                                  "namespace": ADMISSION_SERVICE[0], "name": ADMISSION_SERVICE[1],
                                  "port": self.ports["admission"], "path": "/validate-operator-types"}},
                              "rules": [{"apiGroups": ["configbutler.ai"], "apiVersions": ["*"],
                                         "operations": ["CREATE"], "resources": ["commitrequests"]}]}]}

    def _write_kubeconfig(self, path, token):
        with open(path, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: {self.server}
    certificate-authority: {self.pki}/ca.crt
users:
- name: reverser
  user:
    token: {token}
contexts:
- name: local
  context:
    cluster: local
    user: reverser
current-context: local
""")

    REDIS_USER = "reverser"

    def _redis_password_file(self):
        """The ACL user's password in a 0600 file, as a mounted Secret gives it."""
        path = os.path.join(self.dir, "redis-password")
        if not os.path.exists(path):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(16) + "\n")
        return path

    def _redis_password(self):
        with open(self._redis_password_file()) as f:
            return f.read().strip()

    def _body_key_file(self):
        """The key that seals sensitive bodies before Redis (shared by materializer and splicer)."""
        path = os.path.join(self.dir, "redis-body-keys")
        if not os.path.exists(path):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(f"local-1:{base64.b64encode(secrets.token_bytes(32)).decode()}\n")
        return path

    def redis_auth_args(self, body_key=True):
        """The services' flags for the stack's Redis: TLS verified against the stack's CA with a
        client certificate, an ACL user with a password from a file, and (`body_key`) the key
        that seals sensitive bodies, which only the services that handle bodies get."""
        tls = [f"--redis_tls_ca={self.pki}/ca.crt", f"--redis_tls_cert={self.pki}/redis-client.crt",
               f"--redis_tls_key={self.pki}/redis-client.key"] if self.grpc_tls else []
        sentinel = ([f"--redis_sentinels=127.0.0.1:{self.ports['redis_sentinel']}",
                     f"--redis_sentinel_master={self.SENTINEL_MASTER}"] if self.redis_sentinel else [])
        return [f"--redis_address={self.redis}", *tls, *sentinel,
                f"--redis_username={self.REDIS_USER}",
                f"--redis_password_file={self._redis_password_file()}",
                *([f"--redis_body_key_file={self._body_key_file()}"] if body_key else [])]

    def _redis_tls_args(self, port):
        return (["--port", "0", "--tls-port", str(port),
                 "--tls-cert-file", f"{self.pki}/redis.crt", "--tls-key-file", f"{self.pki}/redis.key",
                 "--tls-ca-cert-file", f"{self.pki}/ca.crt", "--tls-auth-clients", "yes",
                 # What a replica or the Sentinel presents when it connects to a server.
                 "--tls-client-cert-file", f"{self.pki}/redis-client.crt",
                 "--tls-client-key-file", f"{self.pki}/redis-client.key", "--tls-replication", "yes"]
                if self.grpc_tls else ["--port", str(port)])

    def _start_redis(self, name="redis", port=None, replica_of=None):
        # No persistence, as in the stack's deployment: a restart comes back empty. TLS only (no
        # plaintext port), clients need a certificate of the stack's CA, and the default user is
        # off: every client authenticates as the ACL user (docs/security.md).
        port = port or self.ports["redis"]
        replica = (["--replicaof", "127.0.0.1", str(replica_of), "--masteruser", self.REPLICATION_USER,
                    "--masterauth", self._redis_password()] if replica_of else [])
        workdir = os.path.join(self.dir, name)
        os.makedirs(workdir, exist_ok=True)
        self._spawn(name, ["redis-server", *self._redis_tls_args(port), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", workdir, *replica,
                           "--user", "default", "off",
                           "--user", self.REDIS_USER, "on", f">{self._redis_password()}", "~*", "&*", "+@all",
                           # Replicas connect as their own user, so a test can cut one off.
                           "--user", self.REPLICATION_USER, "on", f">{self._redis_password()}", "+psync",
                           "+replconf", "+ping"])
        wait_until(lambda: run(self.redis_cli_argv("ping", port=port), check=False).stdout.strip() == "PONG",
                   10, name)

    SENTINEL_MASTER = "reverser"
    REPLICATION_USER = "replicator"

    def cut_off_replica(self):
        """The primary stops serving its replica (its user is disabled, its link closed): from
        now on the replica misses every write, as a lagging replica does."""
        self.redis_cli("ACL", "SETUSER", self.REPLICATION_USER, "off")
        self.redis_cli("CLIENT", "KILL", "USER", self.REPLICATION_USER)
        wait_until(lambda: "master_link_status:down" in run(
            self.redis_cli_argv("INFO", "replication", port=self.ports["redis_replica"])).stdout,
            10, "the replica to lose its primary")

    def _start_sentinel(self):
        """One Sentinel (quorum 1, a primary is down after 1 s) monitoring the stack's primary."""
        conf = os.path.join(self.dir, "sentinel.conf")
        tls = ""
        if self.grpc_tls:
            tls = (f"port 0\ntls-port {self.ports['redis_sentinel']}\n"
                   f"tls-cert-file {self.pki}/redis.crt\ntls-key-file {self.pki}/redis.key\n"
                   f"tls-ca-cert-file {self.pki}/ca.crt\ntls-auth-clients yes\n"
                   f"tls-client-cert-file {self.pki}/redis-client.crt\n"
                   f"tls-client-key-file {self.pki}/redis-client.key\ntls-replication yes\n")
        else:
            tls = f"port {self.ports['redis_sentinel']}\n"
        m = self.SENTINEL_MASTER
        with open(conf, "w") as f:
            f.write(f"{tls}bind 127.0.0.1\ndir {self.dir}\n"
                    f"sentinel monitor {m} 127.0.0.1 {self.ports['redis']} 1\n"
                    f"sentinel auth-user {m} {self.REDIS_USER}\nsentinel auth-pass {m} {self._redis_password()}\n"
                    f"sentinel down-after-milliseconds {m} 1000\nsentinel failover-timeout {m} 5000\n")
        self._spawn("redis-sentinel", ["redis-server", conf, "--sentinel"])
        wait_until(lambda: self.redis_primary_port() == self.ports["redis"], 10, "the Sentinel")

    def redis_primary_port(self):
        """The port of the server the Sentinel names as primary (the stack's own without one)."""
        if not self.redis_sentinel:
            return self.ports["redis"]
        out = run(self.redis_cli_argv("SENTINEL", "get-master-addr-by-name", self.SENTINEL_MASTER,
                                      port=self.ports["redis_sentinel"], auth=False), check=False)
        lines = out.stdout.split()
        return int(lines[1]) if out.returncode == 0 and len(lines) == 2 else None

    def redis_cli(self, *args, check=True):
        return run(self.redis_cli_argv(*args), check=check)

    def redis_cli_argv(self, *args, port=None, auth=True):
        """redis-cli as the services connect: TLS against the stack's CA with the client
        certificate, as the ACL user, to the primary (or `port`)."""
        tls = ["--tls", "--cacert", f"{self.pki}/ca.crt", "--cert", f"{self.pki}/redis-client.crt",
               "--key", f"{self.pki}/redis-client.key"] if self.grpc_tls else []
        port = port or self.redis_primary_port() or self.ports["redis"]
        login = ["--user", self.REDIS_USER, "--pass", self._redis_password(), "--no-auth-warning"] if auth else []
        return ["redis-cli", "-h", "127.0.0.1", "-p", str(port), *tls, *login, *args]

    def restart_redis(self):
        """Kills redis-server (SIGKILL, as a crash or a rescheduled pod) and starts a fresh one on
        the same port: every key is gone. The reverser services keep running."""
        self.kill("redis")
        dump = os.path.join(self.dir, "redis", "dump.rdb")
        if os.path.exists(dump):
            os.unlink(dump)
        self._start_redis()

    # Short, so a killed replica's units move within seconds (renew_period < renew_deadline <
    # lease_duration, as the services require).
    MEMBERSHIP_TIMING = ["--membership_lease_duration=4s", "--membership_renew_deadline=3s",
                         "--membership_renew_period=1s", "--membership_grace=1s"]

    def membership_args(self, name):
        """What every replica of a scaled-out service adds (none while each runs once)."""
        if not self.membership:
            return []
        args = ["--membership=true", f"--membership_namespace={MEMBERSHIP_NAMESPACE}",
                f"--replica_id={name}", *self.MEMBERSHIP_TIMING]
        service = self.service_of(name)
        if service == "gitworker":
            args.append(f"--advertise_address={self.grpc(name)}")
        if service == "splicer":
            args.append("--gitworker_membership=true")
        return args

    def service_args(self, name):
        if name != "catalog":
            return self._service_args(name) + self.membership_args(name)
        # The catalog runs once; with gitworker replicas it calls the owner of a CommitRequest's
        # branch, read from their Leases.
        routing = (["--gitworker_membership=true", f"--membership_namespace={MEMBERSHIP_NAMESPACE}",
                    *self.MEMBERSHIP_TIMING] if self.replicas["gitworker"] > 1 else [])
        return self._service_args(name) + routing

    def _service_args(self, name):
        service = self.service_of(name)
        first = name == service
        if service == "gitworker":
            # Secrets (credentials, signing keys) through the API, as a key the catalog generates
            # exists only there.
            # Targets' remotes and Secrets from the catalog, never from a delivery.
            return [f"--work_dir={self.dir}/{name}", f"--push_cooldown={self.push_cooldown}",
                    "--secrets_source=api", f"--kubeconfig={self.kubeconfig}",
                    f"--catalog_address={self.grpc('catalog')}"]
        if service == "catalog":
            # CommitRequests attach to the gitworker; their command authors are read from Redis.
            attribution = ([f"--attribution_webhook_configuration={self.ATTRIBUTION_CONFIGURATION}"]
                           if self.attribution != "audit" else [])
            return [f"--kubeconfig={self.kubeconfig}", "--discovery_refresh_period=2s",
                    f"--gitworker_address={self.grpc('gitworker')}", *self.redis_auth_args(body_key=False),
                    *attribution]
        if service == "materializer":
            # The API server audits to (and admits through) replica 0's fixed ports; the other
            # replicas serve theirs on free ports, as pods behind one Service would all serve.
            return [f"--kubeconfig={self.materializer_kubeconfig}", *self.redis_auth_args(),
                    f"--catalog_address={self.grpc('catalog')}",
                    f"--audit_port={self.ports['audit'] if first else 0}",
                    f"--audit_tls_cert={self.pki}/webhook.crt", f"--audit_tls_key={self.pki}/webhook.key",
                    f"--audit_client_ca={self.pki}/ca.crt", "--admission_webhook=true",
                    f"--admission_port={self.ports['admission'] if first else 0}",
                    f"--admission_tls_cert={self.pki}/admission.crt",
                    f"--admission_tls_key={self.pki}/admission.key",
                    f"--admission_attribution={'false' if self.attribution == 'audit' else 'true'}"]
        if service == "splicer":
            # Its kubeconfig only reviews operators' tokens (--admin_auth=kubernetes).
            return [*self.redis_auth_args(), f"--catalog_address={self.grpc('catalog')}",
                    f"--kubeconfig={self.kubeconfig}", f"--gitworker_address={self.grpc('gitworker')}",
                    f"--attribution_grace={self.attribution_grace}",
                    "--attribution_sources=" + {"audit": "audit", "admission": "admission",
                                                "both": "audit,admission"}[self.attribution]]
        raise ValueError(name)

    def start_service(self, name):
        return self._service(name, self.service_args(name))

    def add_replica(self, service):
        """One more replica of a scaled-out service, started now (a scale-up): its name."""
        if not self.membership:
            raise ValueError("add_replica: the stack runs without membership (start it with replicas)")
        name = f"{service}-{self.replicas[service]}"
        self.replicas[service] += 1
        if service == "gitworker":
            self.ports[name + "_grpc"] = free_port()  # advertised in its Lease
        self.start_service(name)
        return name

    def pause(self, name):
        """SIGSTOP: the process keeps its sockets and state but does nothing (a long GC pause, a
        frozen VM), so its Lease runs out while it still believes it owns its units."""
        self.procs[name].send_signal(signal.SIGSTOP)

    def resume(self, name):
        self.procs[name].send_signal(signal.SIGCONT)

    def kill(self, name, sig=signal.SIGKILL):
        proc = self.procs.get(name)
        if proc and proc.poll() is None:
            proc.send_signal(sig)
            proc.wait(timeout=10)
        if (sig == signal.SIGKILL and self.service_of(name) == "gitworker" and getattr(self, "remote", None)
                and self.git_server == "file"):
            self.release_remote_locks()

    def release_remote_locks(self):
        """The remote here is a local bare repository, which a gitworker's push updates itself
        (libgit2's local transport): one SIGKILLed mid-push leaves `refs/heads/<b>.lock` behind,
        where a Git server's receive-pack, ending with its connection, would drop its own. Done
        here as the server would: a lock present now and unchanged a second later (a live push
        holds one for milliseconds) is the dead process's, and is removed."""
        def locks():
            found = {}
            for folder, _, files in os.walk(os.path.join(self.remote, "refs")):
                for f in files:
                    if f.endswith(".lock"):
                        path = os.path.join(folder, f)
                        try:
                            st = os.stat(path)
                        except FileNotFoundError:
                            continue
                        found[path] = (st.st_ino, st.st_mtime_ns)
            return found
        left = locks()
        if not left:
            return

        def release():
            time.sleep(1.0)
            now = locks()
            for path, identity in left.items():
                if now.get(path) == identity:
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass
        threading.Thread(target=release, daemon=True).start()

    def stop(self):
        for name, proc in reversed(list(self.procs.items())):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 8
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---- clients ---------------------------------------------------------------------------

    def kubectl(self, *args, user="admin", input=None, check=True):
        token = {"admin": "admin-token", "alice": "alice-token", "bob": "bob-token", "ci": "ci-token"}[user]
        cache = os.path.join(self.dir, f"kubecache-{user}")
        cmd = [self.kubectl_bin, f"--server={self.server}", f"--token={token}", f"--cache-dir={cache}",
               f"--certificate-authority={self.pki}/ca.crt", "--kubeconfig=/dev/null", *args]
        return run(cmd, check=check, input=input)

    def sim(self, method, path, body=None):
        """kube-sim's admin endpoints (/_sim/...): faults, compaction, audit hold, request log."""
        import ssl
        import urllib.request
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        context = ssl.create_default_context(cafile=f"{self.pki}/ca.crt")
        with urllib.request.urlopen(request, context=context, timeout=10) as r:
            return json.loads(r.read().decode() or "null")

    def git(self, *args):
        return run(["git", "-C", self.remote, *args]).stdout

    def head(self, branch="main"):
        return run(["git", "-C", self.remote, "rev-parse", "--verify", "-q", branch], check=False).stdout.strip()

    def files(self, branch="main"):
        return sorted(self.git("ls-tree", "-r", "--name-only", branch).split())

    def show(self, path, branch="main"):
        return run(["git", "-C", self.remote, "show", f"{branch}:{path}"], check=False).stdout

    def pushes(self, branch="main"):
        """The remote's reflog of `branch`, oldest first: [(unix seconds, new sha, message)]."""
        out = run(["git", "-C", self.remote, "reflog", "show", "--date=unix", "--format=%H %gd %gs",
                   f"refs/heads/{branch}"], check=False).stdout
        entries = []
        for line in out.splitlines():
            sha, selector, message = (line.split(" ", 2) + [""])[:3]
            # %gd with --date=unix renders as refs/heads/<branch>@{<seconds>}
            entries.append((int(selector.rsplit("@{", 1)[1].rstrip("}")), sha, message))
        return list(reversed(entries))

    def log_lines(self, fmt="%an <%ae> | %s"):
        return self.git("log", f"--format={fmt}", "main").splitlines()

    def data_values(self, prefix, key="v", branch="main"):
        """name -> `data.<key>` of every document directly under `prefix` (a Git folder such as
        clusters/x/demo/configmaps/), as the YAML in Git has it; None when it has no such key."""
        values = {}
        for f in self.files(branch):
            if not f.startswith(prefix) or "/" in f[len(prefix):]:
                continue
            found = [l.split(":", 1)[1].strip().strip('"').strip("'")
                     for l in self.show(f, branch).splitlines() if l.strip().startswith(f"{key}:")]
            values[f[len(prefix):].rsplit(".", 1)[0]] = found[0] if found else None
        return values

    def cluster_data_values(self, resource="configmaps", namespace="demo", key="v"):
        """name -> `data.<key>` of every object of `resource` in `namespace`, as the API server has it."""
        items = json.loads(self.kubectl("get", resource, "-n", namespace, "-o", "json").stdout)["items"]
        return {i["metadata"]["name"]: i.get("data", {}).get(key) for i in items}

    def wait_for_file(self, path, predicate=lambda content: True, timeout=30):
        wait_until(lambda: path in self.files() and predicate(self.show(path)), timeout, f"{path} in Git")

    def wait_for_absent(self, path, timeout=30):
        wait_until(lambda: path not in self.files(), timeout, f"{path} removed from Git")

    def metrics(self, name):
        import urllib.request
        try:
            with urllib.request.urlopen(self.http(name) + "/metrics", timeout=5) as r:
                return r.read().decode()
        except OSError:
            return ""

    def wait_for_streams(self, count, timeout=60):
        """Until the splicer has sent the initial resync of `count` (target, type) streams."""
        def ready():
            lines = [l for l in self.metrics("splicer").splitlines()
                     if l.startswith("reverser_splicer_resyncs_total{")]
            return len(lines) >= count
        wait_until(ready, timeout, f"{count} splice streams to send their initial resync", poll=0.1)

    def apply_mirror(self, path="clusters/local", rules=None, branch="main", age_recipients=None,
                     cluster_rules=None, signing=None):
        """GitProvider + GitTarget + WatchRule in namespace demo, mirroring into `path` on
        `branch`. age_recipients: turn on SOPS/age encryption of Secrets with these public keys;
        cluster_rules: also a ClusterWatchRule (e.g. cluster-scoped types) for the same target;
        signing: the GitProvider's spec.commit.signing (SSH commit signing)."""
        rules = rules or [{"operations": ["*"], "apiGroups": ["", "apps", "example.com"],
                           "resources": ["configmaps", "deployments", "widgets"]}]
        target_spec = {"providerRef": {"name": "local"}, "branch": branch, "path": path}
        if age_recipients:
            target_spec["encryption"] = {"age": {"enabled": True,
                                                 "recipients": {"publicKeys": list(age_recipients)}}}
        manifest = {
            "apiVersion": "v1", "kind": "List", "items": [
                {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider",
                 "metadata": {"name": "local", "namespace": "demo"},
                 "spec": {"url": self.remote_url, "allowedBranches": [branch],
                          "push": {"commitWindow": self.commit_window},
                          **({"commit": {"signing": signing}} if signing else {})}},
                {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
                 "metadata": {"name": "mirror", "namespace": "demo"}, "spec": target_spec},
                {"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
                 "metadata": {"name": "demo-objects", "namespace": "demo"},
                 "spec": {"targetRef": {"name": "mirror"}, "rules": rules}},
            ]}
        if cluster_rules:
            manifest["items"].append(
                {"apiVersion": "configbutler.ai/v1alpha3", "kind": "ClusterWatchRule",
                 "metadata": {"name": "demo-cluster-objects"},
                 "spec": {"targetRef": {"name": "mirror", "namespace": "demo"}, "rules": cluster_rules}})
        # kubectl validates a List's items through /openapi/v2, which kube-sim serves only in its
        # legacy profile; the server still prunes, defaults and validates the custom resources.
        self.kubectl("apply", "--validate=false", "-f", "-", input=json.dumps(manifest))


DEMO_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


def demo(stack):
    """A short story with kubectl as two users; prints the resulting git log and the latency."""
    path = "clusters/local"
    stack.apply_mirror(path)
    stack.kubectl("apply", "-f", "-", input=DEMO_CRD)
    stack.log("==> waiting for the mirror to come up (one initial resync per followed type)")
    stack.wait_for_streams(3)
    config_map = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "app-config", "namespace": "demo"},
                             "data": {"color": "blue"}})
    deployment = json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                             "metadata": {"name": "web", "namespace": "demo"},
                             "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                                      "template": {"metadata": {"labels": {"app": "web"}},
                                                   "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}})
    widget = json.dumps({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": "blue", "namespace": "demo"}, "spec": {"size": 3}})
    story = [
        ("alice", ["apply", "-f", "-"], config_map, "create ConfigMap app-config"),
        ("bob", ["patch", "configmap", "app-config", "-n", "demo", "--type=merge", "-p",
                 '{"data":{"color":"green"}}'], None, "edit ConfigMap app-config"),
        ("alice", ["apply", "-f", "-"], deployment, "create Deployment web"),
        ("bob", ["scale", "deployment", "web", "-n", "demo", "--replicas=3"], None, "scale Deployment web to 3"),
        ("alice", ["apply", "--validate=false", "-f", "-"], widget, "create Widget blue (a custom resource)"),
        ("bob", ["delete", "configmap", "app-config", "-n", "demo"], None, "delete ConfigMap app-config"),
    ]
    latencies = []
    for user, args, body, what in story:
        before = stack.head()
        started = time.monotonic()
        stack.kubectl(*args, user=user, input=body)
        wait_until(lambda: stack.head() != before, 60, f"a commit for: {what}", poll=0.005)
        latencies.append(time.monotonic() - started)
        stack.log(f"    {user:<6} {what:<42} -> pushed commit in {latencies[-1]*1000:.0f} ms")
    print("\n==> git log (author | subject):")
    for line in stack.log_lines("%h %an <%ae> | %s"):
        print("    " + line)
    print("\n==> files under the target path:")
    for f in stack.files():
        print("    " + f)
    print("\n==> the services over mutual TLS, as reverserctl (certificate reverser-admin) sees them:")
    health = run(stack.reverserctl_argv("health"), check=False)
    for line in (health.stdout + health.stderr).splitlines():
        print("    " + line)
    if health.returncode != 0:
        raise RuntimeError("reverserctl health failed")
    lat = sorted(latencies)
    print(f"\n==> change -> pushed commit latency: median {lat[len(lat)//2]*1000:.0f} ms, "
          f"max {lat[-1]*1000:.0f} ms over {len(lat)} changes (commit window {stack.commit_window}, "
          f"push cooldown {stack.push_cooldown})")


def main():
    parser = argparse.ArgumentParser(description="Run the local reverser stack and a short demo story.")
    parser.add_argument("--bin-dir", required=True, help="Bazel's bazel-bin for this workspace")
    parser.add_argument("--keep", action="store_true", help="keep the stack running until Ctrl-C")
    parser.add_argument("--commit-window", default="0s")
    parser.add_argument("--push-cooldown", default="0s")
    parser.add_argument("--profile", default="modern", choices=["modern", "legacy"],
                        help="kube-sim's profile (legacy: no WatchList, the LIST fallback)")
    parser.add_argument("--attribution", default="audit", choices=["audit", "admission", "both"],
                        help="where authors come from: the API server's audit log, admission (no "
                             "audit webhook, as on a managed control plane), or both")
    parser.add_argument("--replicas", default="",
                        help="replicas per service, e.g. gitworker=3,splicer=2,materializer=2 "
                             "(they share the work through Leases)")
    args = parser.parse_args()
    try:
        replicas = {k: int(v) for k, v in (item.split("=", 1) for item in args.replicas.split(",") if item)}
    except ValueError:
        parser.error(f"--replicas {args.replicas!r}: expected service=N[,service=N...]")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    stack = Stack(args.bin_dir, root, commit_window=args.commit_window, push_cooldown=args.push_cooldown,
                  profile=args.profile, attribution=args.attribution, replicas=replicas)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        stack.start()
        demo(stack)
        if args.keep:
            print(f"\n==> the stack keeps running. Try:\n"
                  f"    {stack.kubectl_bin} --server={stack.server} --certificate-authority={stack.pki}/ca.crt --token=alice-token get configmaps -A\n"
                  f"    git -C {stack.remote} log --format='%an | %s'\n"
                  f"    {' '.join(stack.reverserctl_argv('status', 'splicer'))}\n"
                  f"    logs: {stack.dir}/*.log      Ctrl-C stops everything.")
            while True:
                time.sleep(3600)
        return 0
    except KeyboardInterrupt:
        return 0
    except Exception as e:  # show the logs that explain it
        print(f"\ndemo failed: {e}", file=sys.stderr)
        for name in stack.procs:
            tail = stack.logs(name).splitlines()[-15:]
            print(f"--- {name} (last lines) ---", file=sys.stderr)
            print("\n".join(tail), file=sys.stderr)
        return 1
    finally:
        stack.cleanup()


if __name__ == "__main__":
    sys.exit(main())
