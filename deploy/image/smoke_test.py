#!/usr/bin/env python3
"""Smoke test of the images deploy/image/build.sh made: each starts locked down and answers.

Run through deploy/image/smoke_test.sh (it selects the private podman store). Every container runs
with --read-only, --user 65534:65534, --cap-drop=ALL, no-new-privileges and host networking on
loopback; writable state only in bind-mounted folders. Each service gets what it needs to become
ready, so /readyz and gRPC health (SERVING) are checked, not only /healthz:
  - the test API server (tools/kube-sim) on the host over HTTPS with the CRDs installed, reached
    through a mounted kubeconfig (CA and bearer token),
  - Redis from the reverser-redis image (password, no persistence), checked with its own
    redis-cli (`podman exec ... redis-cli PING`, REDISCLI_AUTH as a probe would use it),
  - the catalog, gitworker, materializer (audit webhook over TLS) and splicer wired to each other
    with --grpc_insecure (mesh TLS is the chart's business).
gRPC health is asked with the reverserctl image (`reverserctl --grpc_insecure --addr=... health`),
which is the reverserctl image's own test. One result per image; nothing is left behind (every
container carries a label and is removed on exit, also on failure or SIGTERM).

Usage: smoke_test.py --version V --kube-sim BIN [--junit FILE] [--timeout S] [--expect-ids FILE] [image...]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVICES = ["catalog", "gitworker", "materializer", "splicer"]
ALL = ["redis"] + SERVICES + ["reverserctl"]
TOKEN = "smoke-admin-token"
LOCKDOWN = ["--read-only", "--user", "65534:65534", "--cap-drop=ALL",
            "--security-opt=no-new-privileges", "--network=host", "--pids-limit=512", "--pull=never",
            # As Kubernetes' readOnlyRootFilesystem: no tmpfs on /tmp, /run, /var/tmp either.
            "--read-only-tmpfs=false"]


def run(argv, check=True, timeout=60, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(predicate, timeout, what):
    """predicate() until it returns something true, or TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def give_to_nobody(path, mode):
    """A folder the containers' user 65534 writes: its own (as root), else open to all."""
    try:
        os.chown(path, 65534, 65534)
        os.chmod(path, mode)
    except PermissionError:
        os.chmod(path, 0o777)


def http_get(url, timeout=2):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return None, str(e)


class Smoke:
    def __init__(self, version, kube_sim, timeout):
        self.version, self.kube_sim_bin, self.timeout = version, kube_sim, timeout
        self.run_id = f"{os.getpid()}-{int(time.time())}"
        self.label = f"reverser-smoke={self.run_id}"
        self.dir = tempfile.mkdtemp(prefix="reverser-image-smoke.")
        os.chmod(self.dir, 0o755)
        self.kube_sim = None
        self.containers = {}  # image name -> container name
        self.endpoints = {}

    def image(self, name):
        return f"localhost/reverserctl:{self.version}" if name == "reverserctl" else \
            f"localhost/reverser-{name}:{self.version}"

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    # ---- what the services need ------------------------------------------------------------
    def pki(self):
        d = self.path("conf")
        os.makedirs(d)

        def ossl(*args):
            run(["openssl", *args], cwd=d)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj",
             "/CN=reverser-smoke-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        for name, cn, eku in [("kube", "localhost", "serverAuth"), ("webhook", "localhost", "serverAuth"),
                              ("apiserver", "kube-apiserver", "clientAuth")]:
            with open(os.path.join(d, f"{name}.ext"), "w") as f:
                f.write(f"subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage={eku}\n")
            ossl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
            ossl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext")
        with open(os.path.join(d, "redis-password"), "w") as f:
            f.write("smoke-redis-password\n")
        # Readable by the containers' nobody (a mounted Secret is, to its pod's user).
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o644)
        return d

    def start_kube_sim(self):
        conf = self.path("conf")
        with open(self.path("tokens.csv"), "w") as f:
            f.write(f'{TOKEN},admin,uid-0,"system:masters"\n')
        port_file = self.path("kube-sim.port")
        log = open(self.path("kube-sim.log"), "w")
        self.kube_sim = subprocess.Popen(
            [self.kube_sim_bin, "--port=0", f"--port_file={port_file}", f"--tokens_file={self.path('tokens.csv')}",
             f"--tls_cert_file={conf}/kube.crt", f"--tls_key_file={conf}/kube.key"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def port():
            if self.kube_sim.poll() is not None:
                raise RuntimeError(f"kube-sim exited:\n{open(self.path('kube-sim.log')).read()[-2000:]}")
            return os.path.exists(port_file) and open(port_file).read().strip()
        self.kube_port = int(poll(port, 20, "kube-sim's port"))
        server = f"https://127.0.0.1:{self.kube_port}"
        with open(os.path.join(conf, "kubeconfig"), "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: smoke
  cluster: {{server: "{server}", certificate-authority: /etc/reverser/conf/ca.crt}}
users:
- name: smoke
  user: {{token: {TOKEN}}}
contexts:
- name: smoke
  context: {{cluster: smoke, user: smoke}}
current-context: smoke
""")
        os.chmod(os.path.join(conf, "kubeconfig"), 0o644)
        # The CRDs, as `kubectl apply -f deploy/crds` would create them.
        ctx = ssl.create_default_context(cafile=os.path.join(conf, "ca.crt"))
        crds = os.path.join(ROOT, "deploy", "crds")
        for name in sorted(os.listdir(crds)):
            if not name.endswith(".yaml"):
                continue
            with open(os.path.join(crds, name)) as f:
                body = json.dumps(yaml.safe_load(f)).encode()
            req = urllib.request.Request(f"{server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                         data=body, method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                if r.status not in (200, 201):
                    raise RuntimeError(f"creating CRD {name}: HTTP {r.status}")

    # ---- containers --------------------------------------------------------------------------
    def podman_run(self, name, args, mounts, env=()):
        cname = f"reverser-smoke-{self.run_id}-{name}"
        argv = ["podman", "run", "-d", "--name", cname, "--label", self.label, *LOCKDOWN]
        for host, inside, mode in mounts:
            argv += ["-v", f"{host}:{inside}:{mode}"]
        for e in env:
            argv += ["-e", e]
        self.containers[name] = cname
        run(argv + [self.image(name), *args])
        return cname

    def running(self, name):
        p = run(["podman", "inspect", "--format", "{{.State.Running}}", self.containers[name]], check=False)
        return p.stdout.strip() == "true"

    def logs(self, name):
        if name not in self.containers:
            return ""
        p = run(["podman", "logs", self.containers[name]], check=False)
        return (p.stdout + p.stderr)[-4000:]

    def start_redis(self):
        data = self.path("redis-data")
        os.makedirs(data)
        give_to_nobody(data, 0o700)
        self.redis_port = free_port()
        self.podman_run("redis", ["--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no", "--requirepass", "smoke-redis-password"],
                        [(data, "/data", "rw")], env=["REDISCLI_AUTH=smoke-redis-password"])

    def redis_ping(self):
        if not self.running("redis"):
            raise RuntimeError("the redis container exited")
        p = run(["podman", "exec", self.containers["redis"], "redis-cli", "-p", str(self.redis_port), "PING"],
                check=False)
        return p.stdout.strip() == "PONG"

    def start_service(self, name):
        ep = self.path("endpoints")
        if not os.path.isdir(ep):
            os.makedirs(ep)
            give_to_nobody(ep, 0o755)
        conf = "/etc/reverser/conf"
        mounts = [(self.path("conf"), conf, "ro"), (ep, "/run/reverser", "rw")]
        args = ["--listen_address=127.0.0.1", "--grpc_port=0", "--http_port=0",
                f"--endpoints_file=/run/reverser/{name}.json", "--grpc_insecure",
                f"--kubeconfig={conf}/kubeconfig"]
        redis = [f"--redis_address=127.0.0.1:{self.redis_port}", f"--redis_password_file={conf}/redis-password"]
        grpc = lambda peer: f"127.0.0.1:{self.endpoints[peer]['grpc_port']}"
        if name == "catalog":
            args += ["--discovery_refresh_period=2s"]
        elif name == "gitworker":
            work = self.path("gitworker")  # mounted at /var/lib/reverser: the default --work_dir's parent
            os.makedirs(work)
            give_to_nobody(work, 0o700)
            mounts.append((work, "/var/lib/reverser", "rw"))
            args += ["--secrets_source=api", f"--catalog_address={grpc('catalog')}"]
        elif name == "materializer":
            args += redis + [f"--catalog_address={grpc('catalog')}", f"--audit_port={free_port()}",
                             f"--audit_tls_cert={conf}/webhook.crt", f"--audit_tls_key={conf}/webhook.key",
                             f"--audit_client_ca={conf}/ca.crt"]
        elif name == "splicer":
            args += redis + [f"--catalog_address={grpc('catalog')}", f"--gitworker_address={grpc('gitworker')}"]
        self.podman_run(name, args, mounts)

        def listening():
            if not self.running(name):
                raise RuntimeError(f"the {name} container exited")
            path = os.path.join(ep, f"{name}.json")
            try:
                with open(path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
        self.endpoints[name] = poll(listening, self.timeout, f"{name} to listen (its endpoints file)")

    def check_service(self, name, deadline):
        http = f"http://127.0.0.1:{self.endpoints[name]['http_port']}"
        status, body = http_get(f"{http}/healthz")
        if status != 200:
            raise RuntimeError(f"/healthz: {status} {body}")
        last = {}

        def ready():
            if not self.running(name):
                raise RuntimeError(f"the {name} container exited")
            last["readyz"] = http_get(f"{http}/readyz")
            return last["readyz"][0] == 200
        try:
            poll(ready, max(1, deadline - time.monotonic()), f"{name}'s /readyz")
        except TimeoutError as e:
            raise RuntimeError(f"{e}; last /readyz: {last.get('readyz')}")
        health = self.grpc_health(name)
        if health != "SERVING":
            raise RuntimeError(f"gRPC health: {health}")

    def grpc_health(self, name):
        """grpc.health.v1.Health/Check through the reverserctl image."""
        addr = f"127.0.0.1:{self.endpoints[name]['grpc_port']}"
        cname = f"reverser-smoke-{self.run_id}-reverserctl-{name}"
        self.containers[f"reverserctl-{name}"] = cname
        p = run(["podman", "run", "--rm", "--name", cname, "--label", self.label, *LOCKDOWN,
                 self.image("reverserctl"), "--grpc_insecure", f"--addr={addr}", "health"], check=False)
        return (p.stdout.strip() or p.stderr.strip()) if p.returncode == 0 else \
            f"exit {p.returncode}: {p.stdout.strip()} {p.stderr.strip()}"

    # ---- cleanup -----------------------------------------------------------------------------
    def cleanup(self):
        ids = run(["podman", "ps", "-aq", "--filter", f"label={self.label}"], check=False).stdout.split()
        if ids:
            run(["podman", "rm", "-f", "-t", "2", *ids], check=False)
        if self.kube_sim and self.kube_sim.poll() is None:
            self.kube_sim.terminate()
            try:
                self.kube_sim.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kube_sim.kill()
                self.kube_sim.wait()
        left = run(["podman", "ps", "-aq", "--filter", f"label={self.label}"], check=False).stdout.split()
        shutil.rmtree(self.dir, ignore_errors=True)
        return left


def write_junit(path, results):
    rows = []
    for name, (ok, why, log, seconds) in results.items():
        rows += [name, "PASS" if ok else "FAIL", why, log]
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "ci", "junit.py"), path, "image-smoke", *rows],
                   check=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", required=True)
    p.add_argument("--kube-sim", required=True)
    p.add_argument("--junit")
    p.add_argument("--timeout", type=float, default=60, help="seconds each step may take")
    p.add_argument("--expect-ids", help="images.txt of build.sh: each image must have that ID")
    p.add_argument("images", nargs="*", default=ALL)
    args = p.parse_args()

    smoke = Smoke(args.version, args.kube_sim, args.timeout)
    interrupted = []

    def stop(signum, _frame):
        interrupted.append(signum)
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    results = {}  # image -> (ok, why, log file, seconds)
    logdir = tempfile.mkdtemp(prefix="reverser-image-smoke-logs.")

    def record(name, ok, why, started):
        log = os.path.join(logdir, f"{name}.log")
        with open(log, "w") as f:
            f.write(smoke.logs(name))
        results[name] = (ok, why, log, time.monotonic() - started)
        print(f"image-smoke: {'PASS' if ok else 'FAIL'} {name} ({time.monotonic() - started:.1f} s)"
              + ("" if ok else f": {why}"), flush=True)

    t0 = time.monotonic()
    try:
        wanted = [n for n in ALL if n in args.images]
        missing = [n for n in wanted if run(["podman", "image", "exists", smoke.image(n)], check=False).returncode]
        for n in missing:
            record(n, False, f"no image {smoke.image(n)} (run deploy/image/build.sh)", time.monotonic())
        if args.expect_ids:
            with open(args.expect_ids) as f:
                expected = dict(line.split()[:2] for line in f if line.strip())
            for n in wanted:
                if n in results:
                    continue
                have = run(["podman", "image", "inspect", "--format", "{{.Id}}", smoke.image(n)]).stdout.strip()
                if expected.get(smoke.image(n)) != have:
                    record(n, False, f"image ID {have[:12]}, but images.txt says "
                           f"{expected.get(smoke.image(n), 'nothing')[:12]}", time.monotonic())
        try:
            smoke.pki()
            smoke.start_kube_sim()
            setup_error = None
        except Exception as e:  # noqa: BLE001 - every image fails with the reason
            setup_error = f"setup failed: {e}"
        # Redis first (PING), then the services in dependency order; each waits only to listen,
        # readiness of all is then polled against one deadline.
        started = {}
        for name in ["redis"] + SERVICES:
            if name in missing or name in results:
                continue
            started[name] = time.monotonic()
            try:
                if setup_error:
                    raise RuntimeError(setup_error)
                if name == "redis":
                    smoke.start_redis()
                    poll(smoke.redis_ping, args.timeout, "redis-cli PING to answer PONG")
                    record("redis", True, "", started[name])
                    continue
                if "redis" not in smoke.containers and name in ("materializer", "splicer"):
                    raise RuntimeError("needs Redis, which did not start")
                smoke.start_service(name)
            except Exception as e:  # noqa: BLE001
                record(name, False, str(e), started[name])
        deadline = time.monotonic() + args.timeout
        ctl_ok, ctl_why = "reverserctl" not in missing and "reverserctl" in wanted, ""
        for name in SERVICES:
            if name not in started or name in results:
                continue
            try:
                smoke.check_service(name, deadline)
                record(name, True, "", started[name])
            except Exception as e:  # noqa: BLE001
                record(name, False, str(e), started[name])
                if str(e).startswith("gRPC health: exit"):
                    ctl_ok, ctl_why = False, str(e)
        if "reverserctl" in wanted and "reverserctl" not in results:
            t = time.monotonic()
            if ctl_ok and not any(results[s][0] for s in SERVICES if s in results):
                ctl_ok, ctl_why = False, "no service answered to check reverserctl against"
            if ctl_ok:
                h = run(["podman", "run", "--rm", "--label", smoke.label, *LOCKDOWN, smoke.image("reverserctl"),
                         "--help"], check=False)
                if h.returncode != 0 or "health" not in h.stdout + h.stderr:
                    ctl_ok, ctl_why = False, f"--help: exit {h.returncode}: {h.stderr[-500:]}"
            record("reverserctl", ctl_ok, ctl_why, t)
    finally:
        left = smoke.cleanup()
        if interrupted:  # stopped from outside: nothing to look at, nothing left behind
            shutil.rmtree(logdir, ignore_errors=True)
        if left:
            print(f"image-smoke: FAIL cleanup: containers left behind: {left}", flush=True)
            results["cleanup"] = (False, f"containers left behind: {left}", "", 0)
        if args.junit:
            write_junit(args.junit, results)
    failed = [n for n, r in results.items() if not r[0]]
    if not failed:
        shutil.rmtree(logdir, ignore_errors=True)
    print(f"image-smoke: {len(results) - len(failed)} passed, {len(failed)} failed in "
          f"{time.monotonic() - t0:.1f} s" + (f" (container logs: {logdir})" if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
