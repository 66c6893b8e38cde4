#!/usr/bin/env python3
"""Horizontal scaling of the gitworker (issue #17 "Performance"): failover time and throughput.

--failover-kills N: one stack with 3 gitworkers (one splicer, one materializer) and 30
GitTargets on 30 branches (replicas_test's layout). A writer patches one ConfigMap per namespace
in a loop (--write-rate changes/s per branch); a probe writer patches the branch under test every
100 ms. N times: a branch is picked, its owner found (the gitworkers' "branch ownership changed"
log lines since each one's start), the owner SIGKILLed, and the clock runs from just before the
kill to the moment the branch's ref on the remote first moves again (polled every 10 ms; the ref
is read once right after the kill so a push that landed before it is not counted, and the new
commit's committer time must not be before the kill's second). The killed replica is restarted
and the next kill waits until every branch has exactly one owner among the 3 and every branch was
pushed again. Reported: p50, min, max of kill → first push, and the branch's no-push gap (its last
push before the kill → its first after), against the configured lease duration; the goal is
"≤ lease duration + 2 s", judged on both p50 and max (a constant is not an anchor: the lease is
printed as the reference it is). Where the time goes is printed per kill: kill → the new owner's
"gained" log line (the Lease running out: lease + grace after the last renewal it saw) → push.

--throughput: for 1, 2 and 3 gitworker replicas (a fresh stack each; --repeats rounds, the three
sizes interleaved in each), 30 closed-loop writers, one per branch, each patching its ConfigMap
and waiting for its branch's ref to move before the next patch (30 changes always in flight:
more than this machine's cores commit at once, so the pipeline is saturated without a backlog
growing; the cores' use over the window is printed to show it). After a
warm-up, for --seconds: commits pushed (git rev-list --count over every branch), and CPU seconds
(/proc/<pid>/stat utime+stime) of the gitworker processes and of every service; CPU ms per
commit is what scales with more cores. Every size runs with --membership (Leases) on, the
1-replica one too, so the sizes differ only in the number of gitworkers. No goal: reported.

    bazel build -c opt //services/... //tools/kube-sim:kube-sim
    python3 bench/replicas_bench.py --bin-dir "$(bazel info -c opt bazel-bin)" --failover-kills 20
    python3 bench/replicas_bench.py --bin-dir "$(bazel info -c opt bazel-bin)" --throughput --seconds 30
"""
import argparse
import http.client
import json
import os
import queue
import random
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
sys.path.insert(0, HERE)
import stack as local_stack  # noqa: E402
from branch_fleet import (branch, log_entry, log_time, mirror_manifest, namespace,  # noqa: E402
                          ownership_change, resyncs_sent, unit)
import bench_result  # noqa: E402

percentile = bench_result.percentile
TARGETS = 30
BENCH = "replicas"


def duration_flag(name):
    """A --membership_* value of the stack's timing, in seconds."""
    for arg in local_stack.Stack.MEMBERSHIP_TIMING:
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
            m = re.fullmatch(r"([0-9.]+)(ms|s)", value)
            return float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    raise KeyError(name)


def load_configmap(i):
    """The ConfigMap the writers patch, one per target's namespace."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "load", "namespace": namespace(i)},
            "data": {"v": "0"}}


# ---- the remote's refs ----------------------------------------------------------------------

def read_ref(remote, i):
    try:
        with open(os.path.join(remote, "refs", "heads", branch(i))) as f:
            return f.read().strip()
    except OSError:
        pass
    try:
        with open(os.path.join(remote, "packed-refs")) as f:
            for line in f:
                if line.rstrip().endswith(f" refs/heads/{branch(i)}"):
                    return line.split()[0]
    except OSError:
        pass
    return ""


class RefWatch:
    """Polls the 30 branch refs of the remote (loose ref files: cheap; packed-refs as fallback)
    and records when each one was seen to move: pushes[i] = [(monotonic, sha)]."""

    def __init__(self, remote, poll=0.02):
        self.remote = remote
        self.poll = poll
        self.lock = threading.Lock()
        self.current = [self.read(i) for i in range(TARGETS)]
        self.pushes = [[] for _ in range(TARGETS)]
        self.listeners = []  # f(i, sha, t) called from the poller thread on each move
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def read(self, i):
        return read_ref(self.remote, i)

    def _run(self):
        while not self.stop.is_set():
            for i in range(TARGETS):
                sha = self.read(i)
                if sha and sha != self.current[i]:
                    now = time.monotonic()
                    with self.lock:
                        self.current[i] = sha
                        self.pushes[i].append((now, sha))
                    for f in list(self.listeners):
                        f(i, sha, now)
            time.sleep(self.poll)

    def pushes_since(self, i, t):
        with self.lock:
            return [p for p in self.pushes[i] if p[0] > t]

    def last_push(self, i):
        with self.lock:
            return self.pushes[i][-1] if self.pushes[i] else None

    def close(self):
        self.stop.set()
        self.thread.join()


def commit_count(remote, old, new):
    if not new or old == new:
        return 0
    spec = f"{old}..{new}" if old else new
    return int(local_stack.run(["git", "-C", remote, "rev-list", "--count", spec]).stdout.strip() or 0)


def committer_time(remote, sha):
    return int(local_stack.run(["git", "-C", remote, "log", "-1", "--format=%ct", sha]).stdout.strip())


# ---- who owns what ----------------------------------------------------------------------------

class Ownership:
    """Each gitworker replica's owned branch units, replayed from its "branch ownership changed"
    log lines since its last start (a restart appends to the same log)."""

    def __init__(self, stack):
        self.stack = stack
        self.offset = {}  # replica -> byte offset of its current run in its log
        self.owned = {}
        self.gained_at = {}  # (replica, unit) -> wall time of the last "gained" line
        for name in stack.replica_names("gitworker"):
            self.offset[name] = 0
            self.owned[name] = set()

    def restarted(self, name, offset):
        self.offset[name] = offset
        self.owned[name] = set()

    def refresh(self):
        for name in self.offset:
            path = os.path.join(self.stack.dir, f"{name}.log")
            try:
                with open(path, "rb") as f:
                    f.seek(self.offset[name])
                    data = f.read()
            except OSError:
                continue
            end = data.rfind(b"\n")
            if end < 0:
                continue
            self.offset[name] += end + 1
            for raw in data[:end].split(b"\n"):
                if b"branch ownership changed" not in raw:
                    continue
                line = log_entry(raw)
                if line is None:
                    continue
                gained, lost = ownership_change(line)
                self.owned[name] = (self.owned[name] | gained) - lost
                ts = log_time(line.get("ts"))
                for u in gained:
                    self.gained_at[(name, u)] = ts
        return self.owned

    def owners(self, i):
        """The running replicas that say they own branch i (a killed one never logged its loss)."""
        self.refresh()
        return [name for name, units in self.owned.items()
                if unit(i) in units and self.stack.procs[name].poll() is None]

    def balanced(self, alive):
        """Every branch has exactly one owner, and every alive replica owns at least one."""
        self.refresh()
        if any(not self.owned[name] for name in alive):
            return False
        return all(len([n for n in alive if unit(i) in self.owned[n]]) == 1 for i in range(TARGETS))


def first_log_after(stack, name, offset, msg, field, contains, after_wall):
    """Wall time of the first line of `name`'s log past `offset` with message `msg` whose
    `field` contains `contains`, stamped at or after `after_wall` (None: no such line)."""
    try:
        with open(os.path.join(stack.dir, f"{name}.log"), "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return None
    for raw in data.split(b"\n"):
        if msg.encode() not in raw:
            continue
        line = log_entry(raw)
        if line is None:
            continue
        ts = log_time(line.get("ts"))
        if contains in str(line.get(field, "")) and ts is not None and ts >= after_wall - 0.001:
            return ts
    return None


# ---- CPU --------------------------------------------------------------------------------------

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime (+ waited-for children) of a process, all its threads."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / CLK_TCK
    except (OSError, IndexError):
        return None


def machine_busy_jiffies():
    """Jiffies every core spent not idle (all processes on the machine, ours or not)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / CLK_TCK


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def cpu_snapshot(stack):
    return {name: cpu_seconds(proc.pid) for name, proc in stack.procs.items() if proc.poll() is None}


# ---- the remote as a Git server keeps it ------------------------------------------------------

class RemoteGc:
    """`git gc --auto` on the remote every `interval` s: what a Git server does after pushes
    (receive-pack's receive.autogc; hosting services repack on their own). The gitworker's pushes
    to a local-path remote write one pack each and never trigger it, so without this the remote
    holds one pack per push (thousands within minutes), which a bench's remote would not."""

    def __init__(self, remote, interval):
        self.remote = remote
        self.interval = interval
        self.runs = 0
        self.seconds = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        if interval > 0:
            self.thread.start()

    def _run(self):
        while not self.stop.wait(self.interval):
            t = time.monotonic()
            subprocess.run(["git", "-C", self.remote, "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet"], capture_output=True)
            self.runs += 1
            self.seconds += time.monotonic() - t

    def close(self):
        self.stop.set()
        if self.interval > 0:
            self.thread.join()


def pack_count(remote):
    try:
        return len([n for n in os.listdir(os.path.join(remote, "objects", "pack")) if n.endswith(".pack")])
    except OSError:
        return 0


# ---- writers ----------------------------------------------------------------------------------

class Patcher:
    """Merge-patches namespace i's ConfigMap "load" over one keep-alive HTTPS connection (what
    kubectl patch sends, without kubectl's process start)."""

    def __init__(self, stack):
        self.host, self.port = "127.0.0.1", stack.ports["kube"]
        self.context = ssl.create_default_context(cafile=f"{stack.pki}/ca.crt")
        self.conn = None
        self.count = 0
        self.failures = 0

    def patch(self, i, value):
        body = json.dumps({"data": {"v": str(value)}})
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=10)
                self.conn.request("PATCH", f"/api/v1/namespaces/{namespace(i)}/configmaps/load", body=body,
                                  headers={"Content-Type": "application/merge-patch+json",
                                           "Authorization": "Bearer alice-token"})
                response = self.conn.getresponse()
                response.read()
                self.count += 1
                if response.status != 200:
                    self.failures += 1
                return response.status == 200
            except (OSError, http.client.HTTPException):
                self.conn = None
        self.failures += 1
        return False


class RateWriter:
    """Patches each branch's ConfigMap `rate` times a second (round robin over the 30), and the
    probe branch (when set) every `probe_interval` s on top, until stopped."""

    def __init__(self, stack, rate, probe_interval=0.1):
        self.stack = stack
        self.rate = rate
        self.probe = None
        self.probe_interval = probe_interval
        self.stop = threading.Event()
        self.value = [0]
        self.lock = threading.Lock()
        self.patchers = []
        self.threads = [threading.Thread(target=self._round_robin, daemon=True),
                        threading.Thread(target=self._probe, daemon=True)]
        for t in self.threads:
            t.start()

    def _next(self):
        with self.lock:
            self.value[0] += 1
            return self.value[0]

    def _round_robin(self):
        patcher = Patcher(self.stack)
        self.patchers.append(patcher)
        interval = 1.0 / (self.rate * TARGETS)
        due = time.monotonic()
        i = 0
        while not self.stop.is_set():
            patcher.patch(i, self._next())
            i = (i + 1) % TARGETS
            due += interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                due = time.monotonic()  # fell behind (the API server was slow): do not burst

    def _probe(self):
        patcher = Patcher(self.stack)
        self.patchers.append(patcher)
        while not self.stop.is_set():
            i = self.probe
            if i is not None:
                patcher.patch(i, self._next())
            time.sleep(self.probe_interval)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def totals(self):
        return sum(p.count for p in self.patchers), sum(p.failures for p in self.patchers)


class ClosedLoopWriters:
    """One change in flight per branch: branch i's ConfigMap is patched, and patched again once
    its ref moved (or after `stale` s without a move). `senders` threads share the work."""

    def __init__(self, stack, refs, senders=6, stale=5.0):
        self.stack = stack
        self.refs = refs
        self.stale = stale
        self.ready = queue.Queue()
        self.inflight = {}  # i -> monotonic time of its patch
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.value = 0
        self.patchers = []
        refs.listeners.append(self._moved)
        for i in range(TARGETS):
            self.ready.put(i)
        self.threads = [threading.Thread(target=self._send, daemon=True) for _ in range(senders)]
        self.threads.append(threading.Thread(target=self._reaper, daemon=True))
        for t in self.threads:
            t.start()

    def _moved(self, i, sha, t):
        with self.lock:
            if self.inflight.pop(i, None) is not None:
                self.ready.put(i)

    def _reaper(self):
        while not self.stop.is_set():
            now = time.monotonic()
            with self.lock:
                for i, t in list(self.inflight.items()):
                    if now - t > self.stale:
                        del self.inflight[i]
                        self.ready.put(i)
            time.sleep(0.5)

    def _send(self):
        patcher = Patcher(self.stack)
        with self.lock:
            self.patchers.append(patcher)
        while not self.stop.is_set():
            try:
                i = self.ready.get(timeout=0.2)
            except queue.Empty:
                continue
            with self.lock:
                self.value += 1
                value = self.value
                self.inflight[i] = time.monotonic()
            if not patcher.patch(i, value):
                with self.lock:
                    self.inflight.pop(i, None)
                self.ready.put(i)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        self.refs.listeners.remove(self._moved)

    def totals(self):
        return sum(p.count for p in self.patchers), sum(p.failures for p in self.patchers)


# ---- the stack --------------------------------------------------------------------------------

def new_stack(args, gitworkers):
    workdir = tempfile.mkdtemp(prefix="reverser-replicas-bench.", dir=args.tmpdir)
    stack = local_stack.Stack(args.bin_dir, ROOT, workdir=workdir, commit_window="0s", push_cooldown="0s",
                              attribution_grace=args.attribution_grace, log=lambda *_: None,
                              replicas={"gitworker": gitworkers}, git_server=args.git_server)
    # Leases on at every size (the 1-replica stack too), so the sizes differ only in replicas.
    stack.membership = True
    return stack


def prepare(stack):
    """Starts the stack, applies the 30 targets and waits until each sent its first resync,
    every branch has one owner and every branch exists on the remote."""
    stack.start()
    manifest = {"apiVersion": "v1", "kind": "List",
                "items": [item for i in range(TARGETS)
                          for item in mirror_manifest(stack, i)["items"] + [load_configmap(i)]]}
    stack.kubectl("apply", "--validate=false", "-f", "-", input=json.dumps(manifest))
    local_stack.wait_until(lambda: resyncs_sent(stack) >= TARGETS, 180,
                           f"{TARGETS} targets to send their first resync", poll=0.2)
    ownership = Ownership(stack)
    local_stack.wait_until(lambda: ownership.balanced(stack.replica_names("gitworker")), 120,
                           "every branch to have one owner", poll=0.2)
    local_stack.wait_until(lambda: all(read_ref(stack.remote, i) for i in range(TARGETS)), 120, "every branch on the remote", poll=0.2)
    return ownership


def print_tails(stack):
    stack.print_log_tails(lines=20)


def finish(stack, args, failed):
    """Stops the stack; its files are kept after a failure with --keep-on-failure."""
    if failed and args.keep_on_failure:
        stack.stop()
        print(f"stack files kept in {stack.dir}", file=sys.stderr)
    else:
        stack.cleanup()


# ---- failover ---------------------------------------------------------------------------------

def failover(args):
    lease = duration_flag("membership_lease_duration")
    grace = duration_flag("membership_grace")
    renew = duration_flag("membership_renew_period")
    goal = lease + 2.0
    stack = new_stack(args, 3)
    results = []
    failed = True
    try:
        ownership = prepare(stack)
        replicas = stack.replica_names("gitworker")
        refs = RefWatch(stack.remote, poll=0.01)
        writer = RateWriter(stack, args.write_rate)
        gc = RemoteGc(stack.remote, args.remote_gc)
        rng = random.Random(args.seed)
        load_start = loadavg()
        print(f"failover: 3 gitworkers, 1 splicer, 1 materializer, {TARGETS} branches; writer {args.write_rate:g} "
              f"changes/s per branch + the branch under test every 100 ms; membership lease {lease:g} s, "
              f"renew deadline {duration_flag('membership_renew_deadline'):g} s, renew period {renew:g} s, "
              f"grace {grace:g} s; remote: {args.git_server}, git gc --auto every {args.remote_gc:g} s (0: never); build {args.build}",
              flush=True)
        try:
            order = list(range(TARGETS))
            rng.shuffle(order)
            for k in range(args.failover_kills):
                i = order[k % TARGETS]
                writer.probe = i
                t_probe = time.monotonic()
                # The branch's owner is pushing: three pushes seen since the probe started.
                local_stack.wait_until(lambda: len(refs.pushes_since(i, t_probe)) >= 3, 60,
                                       f"pushes on {branch(i)} before kill {k + 1}")
                owners = ownership.owners(i)
                if len(owners) != 1:
                    raise RuntimeError(f"{branch(i)}: owners {owners} before kill {k + 1}")
                victim = owners[0]
                last_before = refs.last_push(i)[0]
                log_offset = os.path.getsize(os.path.join(stack.dir, f"{victim}.log"))
                splicer_offset = os.path.getsize(os.path.join(stack.dir, "splicer.log"))
                t_kill_wall = time.time()
                t_kill = time.monotonic()
                stack.kill(victim)
                t_dead = time.monotonic()
                sha_after_kill = refs.read(i)
                # First move of the ref after the kill whose commit is not older than the kill.
                first = None
                deadline = t_kill + 120
                while first is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no push on {branch(i)} within 120 s of killing {victim}")
                    for t, sha in refs.pushes_since(i, t_kill):
                        if sha != sha_after_kill and committer_time(stack.remote, sha) >= int(t_kill_wall):
                            first = (t, sha)
                            break
                    time.sleep(0.01)
                failover_s = first[0] - t_kill
                gap_s = first[0] - last_before
                new_owners = ownership.owners(i)
                gained = None
                if len(new_owners) == 1:
                    g = ownership.gained_at.get((new_owners[0], unit(i)))
                    if g is not None:
                        gained = g - t_kill_wall
                ready = None
                if len(new_owners) == 1:
                    ready = first_log_after(stack, new_owners[0], 0, "branch clone ready", "branch",
                                            f"{namespace(i)}/local@{branch(i)}", t_kill_wall)
                    if ready is not None:
                        ready -= t_kill_wall
                rerouted = first_log_after(stack, "splicer", splicer_offset, "GitTarget re-routed", "target",
                                           namespace(i), t_kill_wall)
                if rerouted is not None:
                    rerouted -= t_kill_wall
                results.append({"kill": k + 1, "branch": branch(i), "victim": victim,
                                "new_owner": ",".join(new_owners), "failover_s": failover_s, "gap_s": gap_s,
                                "gained_s": gained, "rerouted_s": rerouted, "clone_ready_s": ready,
                                "remote_packs": pack_count(stack.remote), "kill_wait_s": t_dead - t_kill})
                fmt = lambda x: "%.2f" % x if x is not None else "?"
                print(f"  kill {k + 1:2d}: {branch(i)} owner {victim:<12} -> {','.join(new_owners) or '?':<12} "
                      f"kill -> first push {failover_s:6.2f} s (new owner's 'gained' at {fmt(gained)} s, "
                      f"splicer's re-route at {fmt(rerouted)} s, its clone fetched at {fmt(ready)} s), "
                      f"no pushes for {gap_s:6.2f} s; remote packs {pack_count(stack.remote)}", flush=True)
                # Restart the killed replica; wait until every branch has one owner among the 3
                # and every branch was pushed since then.
                writer.probe = None
                ownership.restarted(victim, log_offset)
                stack.start_service(victim)
                local_stack.wait_until(lambda: ownership.balanced(replicas), 120,
                                       f"ownership balanced after restarting {victim}", poll=0.2)
                t_balanced = time.monotonic()
                local_stack.wait_until(lambda: all(refs.pushes_since(j, t_balanced) for j in range(TARGETS)), 120,
                                       "every branch pushed after the rebalance", poll=0.2)
        finally:
            writer.close()
            gc.close()
            refs.close()
        patches, failures = writer.totals()
        load_end = loadavg()
        failed = False
    except Exception:
        print_tails(stack)
        raise
    finally:
        finish(stack, args, failed)

    times = [r["failover_s"] for r in results]
    gaps = [r["gap_s"] for r in results]
    gained = [r["gained_s"] for r in results if r["gained_s"] is not None]
    rerouted = [r["rerouted_s"] for r in results if r["rerouted_s"] is not None]
    median = lambda values: bench_result.stats(values)["median"]
    p50, mx, mn = median(times), max(times), min(times)
    print(f"failover over {len(times)} SIGKILLs of a branch's owner (kill -> first push of the new owner): "
          f"p50 {p50:.2f} s, min {mn:.2f} s, max {mx:.2f} s")
    print(f"  the branch had no pushes (last push before the kill -> first after): p50 {median(gaps):.2f} s, "
          f"min {min(gaps):.2f} s, max {max(gaps):.2f} s")
    if gained:
        print(f"  kill -> the new owner's 'gained' log line: p50 {median(gained):.2f} s, "
              f"min {min(gained):.2f} s, max {max(gained):.2f} s (the Lease running out: up to lease "
              f"{lease:g} s + grace {grace:g} s after the last renewal the others saw, which is up to "
              f"renew period {renew:g} s before the kill)")
    if rerouted:
        print(f"  kill -> the splicer's 're-routed' log line: p50 {median(rerouted):.2f} s, "
              f"min {min(rerouted):.2f} s, max {max(rerouted):.2f} s")
    fetch = [r["clone_ready_s"] - r["gained_s"] for r in results
             if r["gained_s"] is not None and r["clone_ready_s"] is not None]
    if fetch:
        print(f"  the new owner's 'gained' -> its clone of the branch fetched ('branch clone ready'): "
              f"p50 {median(fetch):.2f} s, min {min(fetch):.2f} s, max {max(fetch):.2f} s")
    after = [r["failover_s"] - max(r["gained_s"], r["rerouted_s"]) for r in results
             if r["gained_s"] is not None and r["rerouted_s"] is not None]
    if after:
        print(f"  the later of those two -> first push: p50 {median(after):.2f} s, "
              f"min {min(after):.2f} s, max {max(after):.2f} s")
    print(f"  reference: configured lease duration {lease:g} s; goal <= lease + 2 s = {goal:g} s: "
          f"p50 {'met' if p50 <= goal else 'NOT MET'}, max {'met' if mx <= goal else 'NOT MET'}")
    print(f"  writes: {patches} patches, {failures} failed; load average {load_start:.1f} at the first kill, "
          f"{load_end:.1f} at the end ({os.cpu_count()} cores)")
    timing = ("from just before the SIGKILL of the branch's owner to the first move of the branch's ref on "
              "the remote (polled every 10 ms) to a commit not older than the kill; the branch is patched "
              "every 100 ms meanwhile")
    extra = {"lease_duration_s": lease, "grace_s": grace, "renew_period_s": renew, "kills": results,
             "loadavg": [load_start, load_end],
             "write_rate_per_branch": args.write_rate, "build": args.build}
    bench_result.emit_figure(BENCH, "failover_p50", f"kill → new owner's first push, p50 of {len(times)} kills "
                             f"(lease {lease:g} s)", "s", times, better="lower",
                             goal={"text": f"p50 ≤ lease + 2 s = {goal:g} s", "on": "value", "op": "<=", "value": goal},
                             timing=timing, extra=extra)
    bench_result.emit_figure(BENCH, "failover_max", f"kill → new owner's first push, max of {len(times)} kills "
                             f"(lease {lease:g} s)", "s", [mx], better="lower",
                             goal={"text": f"max ≤ lease + 2 s = {goal:g} s", "on": "value", "op": "<=", "value": goal},
                             timing=timing, extra={"min": mn, "p50": p50})
    bench_result.emit_figure(BENCH, "no_push_gap", f"the branch without pushes around a kill, {len(gaps)} kills",
                             "s", gaps, better="lower", timing="last push seen before the kill → first push after",
                             context=True)
    if gained:
        bench_result.emit_figure(BENCH, "failover_detect", "kill → the new owner's 'gained' log line", "s", gained,
                                 better="lower", timing="the new owner's log timestamp minus the kill's wall time",
                                 context=True)
    return 0


# ---- throughput -------------------------------------------------------------------------------

def throughput_once(args, gitworkers):
    stack = new_stack(args, gitworkers)
    failed = True
    try:
        prepare(stack)
        refs = RefWatch(stack.remote, poll=0.02)
        writers = ClosedLoopWriters(stack, refs, senders=args.senders)
        def snapshot():
            """Everything the window is measured by, read at one moment (its start or end)."""
            patches, failures = writers.totals()
            return {"heads": [refs.read(i) for i in range(TARGETS)], "cpu": cpu_snapshot(stack),
                    "self": sum(os.times()[:2]), "machine": machine_busy_jiffies(), "load": loadavg(),
                    "t": time.monotonic(), "patches": patches, "failures": failures}
        try:
            time.sleep(args.warmup)
            start = snapshot()
            time.sleep(args.seconds)
            end = snapshot()
        finally:
            writers.close()
            refs.close()
        heads0, heads1, cpu0, cpu1 = start["heads"], end["heads"], start["cpu"], end["cpu"]
        self0, self1, machine0, machine1 = start["self"], end["self"], start["machine"], end["machine"]
        load0, load1, patches0, patches1 = start["load"], end["load"], start["patches"], end["patches"]
        failures = end["failures"]
        commits = sum(commit_count(stack.remote, a, b) for a, b in zip(heads0, heads1))
        elapsed = end["t"] - start["t"]
        cpu = {name: cpu1[name] - cpu0[name] for name in cpu1 if name in cpu0
               and cpu0[name] is not None and cpu1[name] is not None}
        gitworker_cpu = sum(v for k, v in cpu.items() if stack.service_of(k) == "gitworker")
        services_cpu = sum(v for k, v in cpu.items()
                           if stack.service_of(k) in ("catalog", "materializer", "splicer", "gitworker"))
        infra_cpu = sum(v for k, v in cpu.items() if k in ("kube-sim", "redis"))
        result = {"replicas": gitworkers, "commits": commits, "seconds": elapsed, "commits_per_s": commits / elapsed,
                "patches": patches1 - patches0, "failures": failures,
                "gitworker_cpu_s": gitworker_cpu, "services_cpu_s": services_cpu, "infra_cpu_s": infra_cpu,
                "bench_cpu_s": self1 - self0, "cpu": cpu,
                "cores_busy": (services_cpu + infra_cpu + self1 - self0) / elapsed,
                "machine_cores_busy": (machine1 - machine0) / elapsed, "loadavg": [load0, load1],
                "gitworker_ms_per_commit": 1000 * gitworker_cpu / commits if commits else None,
                "services_ms_per_commit": 1000 * services_cpu / commits if commits else None,
                "all_ms_per_commit": 1000 * (services_cpu + infra_cpu) / commits if commits else None}
        failed = False
        return result
    except Exception:
        print_tails(stack)
        raise
    finally:
        finish(stack, args, failed)


def throughput(args):
    sizes = [1, 2, 3]
    runs = {n: [] for n in sizes}
    print(f"throughput: 1, 2, 3 gitworkers (1 splicer, 1 materializer, Leases on at every size), {TARGETS} branches, "
          f"{TARGETS} closed-loop writers (one change in flight per branch), warm-up {args.warmup:g} s, "
          f"measured {args.seconds:g} s, {args.repeats} round(s) interleaved; {os.cpu_count()} cores; "
          f"build {args.build}", flush=True)
    for r in range(args.repeats):
        order = sizes if r % 2 == 0 else list(reversed(sizes))
        for n in order:
            res = throughput_once(args, n)
            runs[n].append(res)
            print(f"  round {r + 1}, {n} gitworker(s): {res['commits']} commits in {res['seconds']:.1f} s = "
                  f"{res['commits_per_s']:.1f}/s; CPU ms/commit: gitworkers {res['gitworker_ms_per_commit']:.2f}, "
                  f"reverser services {res['services_ms_per_commit']:.2f}, with kube-sim+redis "
                  f"{res['all_ms_per_commit']:.2f}; patches {res['patches']} ({res['failures']} failed), "
                  f"bench's own CPU {res['bench_cpu_s']:.1f} s; cores busy: this stack and bench "
                  f"{res['cores_busy']:.2f}, the whole machine {res['machine_cores_busy']:.2f} of {os.cpu_count()} "
                  f"(load average {res['loadavg'][0]:.1f} -> {res['loadavg'][1]:.1f})", flush=True)

    def med(values):
        return bench_result.stats(values)["median"]

    base = {key: med([x[key] for x in runs[1]]) for key in
            ("commits_per_s", "gitworker_ms_per_commit", "services_ms_per_commit", "all_ms_per_commit")}
    print(f"\n| gitworkers | commits/s | gitworker CPU ms/commit | reverser services CPU ms/commit | "
          f"all (+kube-sim, redis) CPU ms/commit | vs 1 replica (commits/s, gitworker ms, services ms) |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        xs = runs[n]

        def cell(key, fmt="%.2f"):
            values = [x[key] for x in xs]
            m = med(values)
            return (fmt % m) + (f" ({fmt % min(values)}–{fmt % max(values)})" if len(values) > 1 else "")

        ratios = ", ".join(f"{med([x[k] for x in xs]) / base[k]:.2f}×" for k in
                           ("commits_per_s", "gitworker_ms_per_commit", "services_ms_per_commit"))
        print(f"| {n} | {cell('commits_per_s', '%.1f')} | {cell('gitworker_ms_per_commit')} | "
              f"{cell('services_ms_per_commit')} | {cell('all_ms_per_commit')} | {ratios} |")
    print(f"(median of {args.repeats} round(s); the machine has {os.cpu_count()} cores, shared by every process "
          f"of the stack and the writers: more gitworkers cannot add cores here, CPU per commit is what "
          f"scales on a larger machine)")

    timing = (f"commits pushed to the remote's {TARGETS} branches (git rev-list --count) over {args.seconds:g} s of "
              f"saturating closed-loop writes after a {args.warmup:g} s warm-up; CPU from /proc/<pid>/stat "
              f"utime+stime over the same window; a fresh stack per size, sizes interleaved")
    anchor_of = lambda key, label: {"name": f"1_replica_{key}", "label": f"1 gitworker: {label}",
                                   "samples": [x[key] for x in runs[1]]}
    for n in sizes:
        xs = runs[n]
        extra = {"replicas": n, "runs": [{k: v for k, v in x.items()} for x in xs], "build": args.build}
        for key, name, label, unit, better in (
                ("commits_per_s", "commits_per_s", "commits pushed per second", "commits/s", "higher"),
                ("gitworker_ms_per_commit", "gitworker_cpu_ms_per_commit", "gitworker CPU per commit", "ms", "lower"),
                ("services_ms_per_commit", "services_cpu_ms_per_commit",
                 "reverser services' CPU per commit", "ms", "lower"),
                ("all_ms_per_commit", "all_cpu_ms_per_commit", "all processes' CPU per commit (with kube-sim, redis)",
                 "ms", "lower")):
            bench_result.emit_figure(BENCH, f"{name}_{n}", f"{label}, {n} gitworker(s), {TARGETS} branches", unit,
                                     [x[key] for x in xs], better=better,
                                     anchor=anchor_of(key, label) if n > 1 else None,
                                     timing=timing, extra=extra if key == "commits_per_s" else {"replicas": n})
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", required=True, help="bazel-bin holding services/* and tools/kube-sim")
    parser.add_argument("--build", default="opt", help="what the binaries were built with (printed): opt, fastbuild")
    parser.add_argument("--failover-kills", type=int, default=0, help="SIGKILLs of a branch's owner (0: none)")
    parser.add_argument("--write-rate", type=float, default=1.0,
                        help="failover: background changes per second per branch")
    parser.add_argument("--remote-gc", type=float, default=5.0,
                        help="failover: run git gc --auto on the remote every N s, as a Git server does "
                             "after pushes (0: never; the remote then keeps one pack per push)")
    parser.add_argument("--git-server", choices=("file", "http"), default="file",
                        help="the remote as a file:// path (libgit2's local transport packs every "
                             "fetch itself) or served over smart HTTP by deploy/local/git_http_server.py "
                             "(git's upload-pack and receive-pack; a process per request: on 2 cores "
                             "it takes most of the machine at this bench's push rate)")
    parser.add_argument("--seed", type=int, default=17, help="failover: the order branches are picked in")
    parser.add_argument("--throughput", action="store_true", help="1, 2 and 3 gitworkers, commits/s and CPU/commit")
    parser.add_argument("--seconds", type=float, default=30.0, help="throughput: measured seconds per size")
    parser.add_argument("--warmup", type=float, default=5.0, help="throughput: seconds of load before measuring")
    parser.add_argument("--repeats", type=int, default=1, help="throughput: rounds (the sizes interleaved)")
    parser.add_argument("--senders", type=int, default=6, help="throughput: HTTPS connections the writers share")
    parser.add_argument("--attribution-grace", default="1s", help="the splicer's wait for an author fact")
    parser.add_argument("--keep-on-failure", action="store_true", help="keep a failed stack's files (logs)")
    parser.add_argument("--tmpdir", default=None, help="where the stacks' files live")
    args = parser.parse_args()
    if not args.failover_kills and not args.throughput:
        parser.error("nothing to do: --failover-kills N and/or --throughput")
    if args.failover_kills:
        failover(args)
    if args.throughput:
        throughput(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
