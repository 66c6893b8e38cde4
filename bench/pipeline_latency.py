#!/usr/bin/env python3
"""Change -> pushed-commit latency through the whole local stack.

Drives `--rate` changes per second for `--seconds` seconds straight at the API server (HTTPS,
a token user: the POST kubectl would send, without kubectl's process start), with commit window 0
and push cooldown 0, and records when each change's commit first appears on the remote branch.
Each change's clock starts just before its request is sent (so the API server's own answer,
audit and admission included, is inside the latency) and stops when the remote's branch ref is
seen to hold its commit (the ref is polled every millisecond). Prints p50/p90/p99/max against the
goals (p50 <= 50 ms, p99 <= 250 ms); there is no anchor: nothing else was measured doing the same
work on this machine, and a constant is not one.

--rates R1,R2,... repeats the schedule at other rates, each on a fresh stack (latency vs rate).
--first-mirror N first creates N ConfigMaps, then applies the mirror and follows every service's
RSS (/proc/<pid>/status, every 100 ms) until all N files are pushed (one large first mirror).
--compare-plaintext runs TLS and plaintext stacks alternately (--repeats each) and reports the
TLS / plaintext ratio of the p50 medians (goal <= 1.20).

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "deploy", "local"))
sys.path.insert(0, HERE)
import stack as local_stack  # noqa: E402
import bench_result  # noqa: E402

percentile = bench_result.percentile
GOALS = {"p50": 50.0, "p99": 250.0}
SERVICES = ("catalog", "materializer", "splicer", "gitworker")


def new_stack(args, grpc_tls):
    root = os.path.dirname(HERE)
    workdir = tempfile.mkdtemp(prefix="reverser-bench.", dir=args.tmpdir)
    fs_type = subprocess.run(["stat", "-f", "-c", "%T", workdir], capture_output=True, text=True).stdout.strip()
    stack = local_stack.Stack(args.bin_dir, root, workdir=workdir, commit_window="0s", push_cooldown="0s",
                              attribution_grace=args.attribution_grace, log=lambda *_: None,
                              grpc_tls=grpc_tls)
    return stack, fs_type


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def create_many(stack, names, senders=8, on_sent=None, schedule=None):
    """POSTs one ConfigMap per name over `senders` HTTPS connections; schedule(i) is the monotonic
    time request i is due (None: as fast as possible). on_sent(name, t_before, t_answered)."""
    host, port = "127.0.0.1", stack.ports["kube"]
    context = ssl.create_default_context(cafile=f"{stack.pki}/ca.crt")
    failures = []

    def send(k):
        conn = http.client.HTTPSConnection(host, port, context=context)
        for i in range(k, len(names), senders):
            if schedule is not None:
                delay = schedule(i) - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            name = names[i]
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": name, "namespace": "demo"}, "data": {"i": str(i)}})
            before = time.monotonic()  # the clock starts before the request leaves
            conn.request("POST", "/api/v1/namespaces/demo/configmaps", body=body,
                         headers={"Content-Type": "application/json", "Authorization": "Bearer alice-token"})
            response = conn.getresponse()
            response.read()
            answered = time.monotonic()
            if on_sent:
                on_sent(name, before, answered)
            if response.status != 201:
                failures.append(f"create {name}: HTTP {response.status}")

    threads = [threading.Thread(target=send, args=(k,)) for k in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(failures[0])


def measure(args, grpc_tls, rate, seconds):
    """One stack, one run of the schedule: a dict of latencies (ms), send offsets (s), API
    answer times (ms), achieved rate, fs type and authors."""
    stack, fs_type = new_stack(args, grpc_tls)
    try:
        stack.start()
        stack.apply_mirror("clusters/bench", rules=[{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}])
        stack.wait_for_streams(1)

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
        sent, answered = {}, {}
        total = int(rate * seconds)
        interval = 1.0 / rate
        start = time.monotonic() + 0.2

        def on_sent(name, before, after):
            sent[name] = before
            answered[name] = after

        names = [f"bench-{i:06d}" for i in range(total)]
        create_many(stack, names, senders=8, on_sent=on_sent, schedule=lambda i: start + i * interval)
        achieved = total / (time.monotonic() - start)
        local_stack.wait_until(lambda: len(seen) >= total, 120, "every change to be pushed", poll=0.1)
        stop.set()
        order = sorted(sent, key=sent.get)
        authors = set(stack.git("log", "--format=%an", "-n", "20", "main").split("\n")) - {""}
        return {"latencies": [(seen[n] - sent[n]) * 1000 for n in order],
                "offsets": [sent[n] - start for n in order],
                "api_ms": [(answered[n] - sent[n]) * 1000 for n in order],
                "achieved": achieved, "fs_type": fs_type, "authors": authors}
    finally:
        stack.cleanup()


def first_mirror(args, n):
    """Creates n ConfigMaps, then applies the mirror; follows each service's RSS until the n
    files are pushed. Returns (seconds from apply to pushed, {service: [(t, MiB)]})."""
    stack, _ = new_stack(args, True)
    try:
        stack.start()
        create_many(stack, [f"fm-{i:06d}" for i in range(n)], senders=8)
        timeline = {name: [] for name in SERVICES + ("redis", "kube-sim") if name in stack.procs}
        stop = threading.Event()
        t0 = time.monotonic()

        def sample():
            while not stop.is_set():
                t = time.monotonic() - t0
                for name in timeline:
                    value = rss_mib(stack.procs[name].pid)
                    if value is not None:
                        timeline[name].append((round(t, 3), round(value, 1)))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        stack.apply_mirror("clusters/bench", rules=[{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}])

        def pushed():
            if not stack.head():
                return False
            count = run_count(stack)
            return count >= n

        local_stack.wait_until(pushed, 600, f"{n} files to be pushed", poll=0.5)
        elapsed = time.monotonic() - t0
        time.sleep(1.0)  # a second of the settled state after the push
        stop.set()
        sampler.join()
        return elapsed, timeline
    finally:
        stack.cleanup()


def run_count(stack):
    out = subprocess.run(["git", "-C", stack.remote, "ls-tree", "-r", "--name-only", "main"],
                         capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.rsplit("/", 1)[-1].startswith("fm-"))


def report(result, rate, grace, mesh):
    lat = result["latencies"]
    p50, p90, p99 = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99)
    print(f"pipeline latency, gRPC mesh {mesh}: {len(lat)} creates at {result['achieved']:.1f}/s (target {rate}/s), "
          f"commit window 0, push cooldown 0, attribution grace {grace}, files on {result['fs_type']}")
    print(f"  change -> pushed commit (clock starts before the request is sent): p50 {p50:.0f} ms, "
          f"p90 {p90:.0f} ms, p99 {p99:.0f} ms, max {max(lat):.0f} ms")
    print(f"  goals: p50 {p50:.0f} ms <= {GOALS['p50']:.0f} ms {'met' if p50 <= GOALS['p50'] else 'NOT MET'}, "
          f"p99 {p99:.0f} ms <= {GOALS['p99']:.0f} ms {'met' if p99 <= GOALS['p99'] else 'NOT MET'}")
    api = result["api_ms"]
    print(f"  of which the API server's answer to the create: p50 {percentile(api, 50):.1f} ms, "
          f"p99 {percentile(api, 99):.1f} ms")
    print(f"  authors on the last commits: {', '.join(sorted(result['authors']))}")
    return p50, p90, p99


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rates", default="",
                        help="comma-separated further rates, each on a fresh stack (latency vs rate)")
    parser.add_argument("--rate-seconds", type=float, default=15.0, help="seconds of each --rates run")
    parser.add_argument("--first-mirror", type=int, default=0,
                        help="also: N ConfigMaps created first, then one first mirror with every service's RSS followed")
    parser.add_argument("--attribution-grace", default="3s",
                        help="splicer's wait for an author fact (0s: no waiting)")
    parser.add_argument("--tmpdir", default=None,
                        help="where the stack's files live (Git clones, remote, Redis); e.g. /dev/shm "
                             "for a memory-backed volume as the chart's emptyDir.medium=Memory gives")
    parser.add_argument("--compare-plaintext", action="store_true",
                        help="run TLS and plaintext (--grpc_insecure, no Redis TLS) stacks alternately, "
                             "--repeats each, and report the TLS/plaintext ratio of the p50 medians")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each mode for --compare-plaintext")
    args = parser.parse_args()
    grace = args.attribution_grace
    timing = ("each change from just before its HTTPS create is sent to the moment the remote's "
              "branch ref holds its commit (polled every 1 ms)")

    if not args.compare_plaintext:
        result = measure(args, True, args.rate, args.seconds)
        p50, p90, p99 = report(result, args.rate, grace, "mutual TLS (gRPC mesh and Redis)")
        lat = result["latencies"]
        size = f"{len(lat)} creates at {args.rate:g}/s, window 0, cooldown 0, grace {grace}, mTLS"
        for name, p in (("p50", 50), ("p90", 90), ("p99", 99)):
            goal = ({"text": f"{name} ≤ {GOALS[name]:.0f} ms", "on": "value", "op": "<=", "value": GOALS[name]}
                    if name in GOALS else None)
            bench_result.emit_figure("pipeline", f"latency_{name}", f"change → pushed commit {name}, {size}", "ms",
                                     [percentile(lat, p)], better="lower", goal=goal, timing=timing,
                                     extra={"rate": args.rate, "seconds": args.seconds})
        bench_result.emit_series("pipeline", "latency", {
            "rate": args.rate, "latencies_ms": [round(x, 2) for x in lat],
            "offsets_s": [round(x, 4) for x in result["offsets"]],
            "api_ms": [round(x, 2) for x in result["api_ms"]]})
        sweep = [(args.rate, p50, p90, p99, max(lat))]
        for rate in [float(r) for r in args.rates.split(",") if r.strip()]:
            r = measure(args, True, rate, args.rate_seconds)
            q50, q90, q99 = report(r, rate, grace, "mutual TLS (gRPC mesh and Redis)")
            sweep.append((rate, q50, q90, q99, max(r["latencies"])))
            bench_result.emit_figure("pipeline", f"latency_p50_at_{rate:g}",
                                     f"change → pushed commit p50 at {rate:g} creates/s for {args.rate_seconds:g} s",
                                     "ms", [q50], better="lower", timing=timing, context=True,
                                     extra={"rate": rate, "p90": q90, "p99": q99, "achieved": r["achieved"]})
        if len(sweep) > 1:
            sweep.sort()
            bench_result.emit_series("pipeline", "latency_vs_rate",
                                     [{"rate": a, "p50": b, "p90": c, "p99": d, "max": e} for a, b, c, d, e in sweep])
            print("latency vs rate: " + "; ".join(f"{a:g}/s p50 {b:.0f} p99 {d:.0f} ms" for a, b, c, d, e in sweep))
    else:
        p50s = {True: [], False: []}
        for _ in range(max(1, args.repeats)):
            for grpc_tls in (True, False):  # interleaved: TLS, plaintext, TLS, plaintext, ...
                r = measure(args, grpc_tls, args.rate, args.seconds)
                mesh = "mutual TLS (gRPC mesh and Redis)" if grpc_tls else "plaintext (--grpc_insecure, Redis without TLS)"
                p50s[grpc_tls].append(report(r, args.rate, grace, mesh)[0])
        f = bench_result.emit_figure(
            "pipeline", "tls_p50", "change → pushed commit p50 with mutual TLS", "ms", p50s[True], better="lower",
            anchor={"name": "plaintext_p50", "label": "the same schedule in plaintext", "samples": p50s[False]},
            goal={"text": "TLS p50 ≤ 1.20× plaintext p50", "on": "ratio", "op": "<=", "value": 1.2},
            timing=timing + f"; {args.repeats} runs each, alternating")
        print(f"TLS / plaintext p50 (medians of {args.repeats} alternating runs each): {f['ratio']:.2f}x "
              f"(goal <= 1.20x: {f['verdict']})")

    if args.first_mirror > 0:
        n = args.first_mirror
        elapsed, timeline = first_mirror(args, n)
        peaks = {name: max((v for _, v in points), default=0) for name, points in timeline.items()}
        print(f"first mirror of {n} ConfigMaps through the stack: {elapsed:.1f} s from applying the mirror to "
              f"every file pushed; peak RSS " + ", ".join(f"{k} {v:.0f} MiB" for k, v in peaks.items()))
        goal = ({"text": "≤ 300 MiB per service at 100,000 objects", "on": "value", "op": "<=", "value": 300}
                if n >= 100000 else None)
        for name in SERVICES:
            if name in peaks:
                bench_result.emit_figure("pipeline", f"first_mirror_rss_{name}",
                                         f"{name} peak RSS during a first mirror of {n} ConfigMaps", "MiB",
                                         [peaks[name]], better="lower", goal=goal,
                                         timing="VmRSS sampled every 100 ms", extra={"objects": n})
        bench_result.emit_figure("pipeline", "first_mirror_s", f"first mirror of {n} ConfigMaps through the stack",
                                 "s", [elapsed], better="lower",
                                 timing="from applying the GitTarget to every file on the remote (polled every 0.5 s)",
                                 extra={"objects": n})
        bench_result.emit_series("pipeline", "first_mirror_rss", {"objects": n, "seconds": elapsed, "timeline": timeline})
    return 0


if __name__ == "__main__":
    sys.exit(main())
