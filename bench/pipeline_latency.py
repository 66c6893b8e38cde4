#!/usr/bin/env python3
"""Change -> pushed-commit latency through the whole local stack.

Drives `--rate` changes per second for `--seconds` seconds straight at the API server (HTTPS,
a token user, as kubectl would but without kubectl's process start), with commit window 0 and
push cooldown 0, and records when each change's commit first appears on the remote branch.
Prints p50/p90/p99/max and the ratios against the goals (p50 <= 50 ms, p99 <= 250 ms) and against
the reference anchor (gitops-reverser: 5 s commit window + 5 s push cooldown).

    bazel build -c opt //services/... //tools/kube-sim:kube-sim
    python3 bench/pipeline_latency.py --bin-dir "$(bazel info -c opt bazel-bin)"
"""
import argparse
import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy", "local"))
import stack as local_stack  # noqa: E402

ANCHOR_MS = 5000.0  # the reference's default commit window alone


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def measure(args, grpc_tls):
    """One stack, one run of the schedule: (latencies in ms, achieved rate, fs type, authors)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    workdir = tempfile.mkdtemp(prefix="reverser-bench.", dir=args.tmpdir)
    fs_type = subprocess.run(["stat", "-f", "-c", "%T", workdir], capture_output=True, text=True).stdout.strip()
    stack = local_stack.Stack(args.bin_dir, root, workdir=workdir, commit_window="0s", push_cooldown="0s",
                              attribution_grace=args.attribution_grace, log=lambda *_: None,
                              grpc_tls=grpc_tls)
    try:
        stack.start()
        stack.apply_mirror("clusters/bench", rules=[{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}])
        stack.wait_for_streams(1)
        host, port = "127.0.0.1", stack.ports["kube"]
        context = ssl.create_default_context(cafile=f"{stack.pki}/ca.crt")

        seen = {}  # name -> time its commit was first seen on the remote
        stop = threading.Event()

        ref_file = os.path.join(stack.remote, "refs", "heads", "main")

        def remote_head():
            # Reading the loose ref is cheap; spawning `git rev-parse` every few milliseconds
            # would load the two cores the pipeline itself runs on.
            try:
                with open(ref_file) as f:
                    return f.read().strip()
            except OSError:
                return stack.head()

        def watch_remote():
            last = remote_head()
            while not stop.is_set():
                head = remote_head()
                if head != last:
                    now = time.monotonic()
                    out = subprocess.run(["git", "-C", stack.remote, "log", "--format=%s", f"{last}..{head}"],
                                         capture_output=True, text=True).stdout.split("\n")
                    for subject in out:
                        name = subject.rsplit("/", 1)[-1]
                        if name.startswith("bench-"):
                            seen.setdefault(name, now)
                    last = head
                time.sleep(0.001)

        watcher = threading.Thread(target=watch_remote, daemon=True)
        watcher.start()
        sent = {}
        total = int(args.rate * args.seconds)
        interval = 1.0 / args.rate
        senders = 8  # each with its own connection, so one slow response never holds the schedule
        failures = []
        start = time.monotonic() + 0.2

        def send(k):
            conn = http.client.HTTPSConnection(host, port, context=context)
            for i in range(k, total, senders):
                delay = start + i * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                name = f"bench-{i:06d}"
                body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name, "namespace": "demo"}, "data": {"i": str(i)}})
                conn.request("POST", "/api/v1/namespaces/demo/configmaps", body=body,
                             headers={"Content-Type": "application/json", "Authorization": "Bearer alice-token"})
                response = conn.getresponse()
                response.read()
                sent[name] = time.monotonic()
                if response.status != 201:
                    failures.append(f"create {name}: HTTP {response.status}")

        threads = [threading.Thread(target=send, args=(k,)) for k in range(senders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            raise RuntimeError(failures[0])
        achieved = total / (time.monotonic() - start)
        local_stack.wait_until(lambda: len(seen) >= total, 120, "every change to be pushed", poll=0.1)
        stop.set()
        latencies = [(seen[n] - sent[n]) * 1000 for n in sent]
        p50, p90, p99 = percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99)
        authors = set(stack.git("log", "--format=%an", "-n", "20", "main").split("\n")) - {""}
        return latencies, achieved, fs_type, authors
    finally:
        stack.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--attribution-grace", default="3s",
                        help="splicer's wait for an author fact (0s: no waiting)")
    parser.add_argument("--tmpdir", default=None,
                        help="where the stack's files live (Git clones, remote, Redis); e.g. /dev/shm "
                             "for a memory-backed volume as the chart's emptyDir.medium=Memory gives")
    parser.add_argument("--compare-plaintext", action="store_true",
                        help="also run the same schedule with the gRPC mesh and Redis in plaintext "
                             "(--grpc_insecure, no Redis TLS) on a fresh stack, and print the "
                             "TLS/plaintext ratios")
    args = parser.parse_args()
    modes = [True, False] if args.compare_plaintext else [True]
    results = {}
    for grpc_tls in modes:
        latencies, achieved, fs_type, authors = measure(args, grpc_tls)
        total = len(latencies)
        p50, p90, p99 = percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99)
        results[grpc_tls] = (p50, p90, p99)
        mesh = "mutual TLS (gRPC mesh and Redis)" if grpc_tls else "plaintext (--grpc_insecure, Redis without TLS)"
        print(f"pipeline latency, gRPC mesh {mesh}: {total} creates at {achieved:.1f}/s (target {args.rate}/s), "
              f"commit window 0, push cooldown 0, attribution grace {args.attribution_grace}, files on {fs_type}")
        print(f"  change -> pushed commit: p50 {p50:.0f} ms, p90 {p90:.0f} ms, p99 {p99:.0f} ms, max {max(latencies):.0f} ms")
        print(f"  goal ratios: p50/50ms = {p50/50:.2f}, p99/250ms = {p99/250:.2f}  (<= 1.00 meets the goal)")
        print(f"  vs reference anchor (5 s window alone): p50 is {ANCHOR_MS/p50:.0f}x faster")
        print(f"  authors on the last commits: {', '.join(sorted(authors))}")
    if args.compare_plaintext:
        (t50, t90, t99), (c50, c90, c99) = results[True], results[False]
        print(f"TLS / plaintext: p50 {t50/c50:.2f}x, p90 {t90/c90:.2f}x, p99 {t99/c99:.2f}x  "
              f"(goal: p50 within 1.20x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
