#!/usr/bin/env python3
"""Share of commits that name the right author on a mixed workload, from admission facts alone
(no audit webhook, as on a managed control plane), against the audit path on the same workload
in the same run.

The workload, per round, through the API server as three users (alice, bob, the ci service
account): creates, merge patches, concurrent patches of one object by two users, scale of a
Deployment, deletes and a deletecollection. Every change's content says who made it (a patch
writes `<user>-<n>`, a scale a replica count owned by one user), so each commit on the remote is
classified on its own: right user, committer, or wrong user. Goal: no wrong user ever; the share
named is reported beside the audit path's.

    bazel build -c opt //services/... //tools/kube-sim:kube-sim
    python3 bench/attribution_share.py --bin-dir "$(bazel info -c opt bazel-bin)"
"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "deploy", "local"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_result  # noqa: E402
import stack as local_stack  # noqa: E402

USERS = {"alice": "alice@example.com", "bob": "bob@example.com", "ci": "system:serviceaccount:ci:deployer"}
COMMITTER = "GitOps Reverser"
PATH = "clusters/share"
# Replica counts by user: a scale's result says who scaled.
REPLICAS = {"alice": 2, "bob": 3, "ci": 4}


def configmap(name, value, labels=None):
    meta = {"name": name, "namespace": "demo", **({"labels": labels} if labels else {})}
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": value}})


def deployment(name):
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "demo"},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name}},
                                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})


class Workload:
    """Runs the changes and remembers who made what, by path and by content."""

    def __init__(self, stack, rounds):
        self.stack = stack
        self.rounds = rounds
        self.creator = {}  # path -> user
        self.remover = {}  # path -> user
        self.changes = 0

    def kubectl(self, user, *args, **kw):
        self.changes += 1
        return self.stack.kubectl(*args, user=user, **kw)

    def patch(self, user, name, value):
        self.kubectl(user, "patch", "configmap", name, "-n", "demo", "--type=merge", "-p",
                     json.dumps({"data": {"k": value}}))

    def run(self):
        users = list(USERS)
        for r in range(self.rounds):
            names = [f"r{r}-{i}" for i in range(6)]
            for i, name in enumerate(names):
                user = users[i % 3]
                labels = {"batch": f"r{r}"} if i >= 4 else None
                self.kubectl(user, "apply", "-f", "-", input=configmap(name, f"{user}-create", labels))
                self.creator[f"{PATH}/demo/configmaps/{name}.yaml"] = user
            for i, name in enumerate(names[:4]):
                self.patch(users[(i + 1) % 3], name, f"{users[(i + 1) % 3]}-p{r}")
            # Two users patch one object at the same time.
            racers = [threading.Thread(target=self.patch, args=(user, names[0], f"{user}-race{r}-{n}"))
                      for n in range(3) for user in ("alice", "bob")]
            for t in racers:
                t.start()
            for t in racers:
                t.join()
            dep = f"d{r}"
            self.kubectl("alice", "apply", "-f", "-", input=deployment(dep))
            self.creator[f"{PATH}/demo/apps/deployments/{dep}.yaml"] = "alice"
            scaler = users[r % 3]
            self.kubectl(scaler, "scale", "deployment", dep, "-n", "demo", f"--replicas={REPLICAS[scaler]}")
            remover = users[(r + 2) % 3]
            self.kubectl(remover, "delete", "configmap", names[3], "-n", "demo")
            self.remover[f"{PATH}/demo/configmaps/{names[3]}.yaml"] = remover
            local_stack.run(["curl", "-sf", "--cacert", f"{self.stack.pki}/ca.crt", "-H", "Authorization: Bearer bob-token",
                             "-X", "DELETE",
                             f"{self.stack.server}/api/v1/namespaces/demo/configmaps?labelSelector=batch%3Dr{r}"])
            self.changes += len(names[4:])  # one request, one removal per object
            for name in names[4:]:
                self.remover[f"{PATH}/demo/configmaps/{name}.yaml"] = "bob"

    def writer_of(self, sha, path, subject):
        """Who made the change this commit records, from the workload's own bookkeeping."""
        if subject.startswith("[CREATE]"):
            return self.creator.get(path)
        if subject.startswith("[DELETE]"):
            return self.remover.get(path)
        content = self.stack.git("show", f"{sha}:{path}")
        if "/deployments/" in path:
            for user, replicas in REPLICAS.items():
                if f"replicas: {replicas}\n" in content:
                    return user
            return None
        for user in USERS:
            if f"k: {user}-" in content:
                return user
        return None


def measure(args, attribution):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    workdir = tempfile.mkdtemp(prefix="reverser-share.", dir=args.tmpdir)
    stack = local_stack.Stack(args.bin_dir, root, workdir=workdir, commit_window="0s", push_cooldown="0s",
                              attribution_grace=args.attribution_grace, log=lambda *_: None,
                              attribution=attribution)
    try:
        stack.start()
        stack.apply_mirror(PATH, rules=[{"operations": ["*"], "apiGroups": ["", "apps"],
                                         "resources": ["configmaps", "deployments"]}])
        stack.wait_for_streams(2)
        if attribution != "audit":
            stack.wait_attribution_rules(("", "configmaps"), ("apps", "deployments"))
        start = stack.head()
        workload = Workload(stack, args.rounds)
        began = time.monotonic()
        workload.run()
        # A marker written last: once it is on the remote, every earlier change is too.
        stack.kubectl("apply", "-f", "-", user="alice", input=configmap("zz-marker", "alice-marker"))
        stack.wait_for_file(f"{PATH}/demo/configmaps/zz-marker.yaml", timeout=120)
        elapsed = time.monotonic() - began
        counts = {"right": 0, "committer": 0, "wrong": 0, "unknown": 0}
        wrong = []
        log = stack.git("log", "--reverse", "--format=@@%H|%an|%s", "--name-only", f"{start}..main")
        commits = []  # (sha, author, subject, path of the object the subject names)
        for line in log.splitlines():
            if line.startswith("@@"):
                commits.append(line[2:].split("|", 2) + [None])
            elif line.strip() and commits:
                # "[OP] v1/configmaps/NAME": its file (a first commit also adds bootstrap files).
                obj = "/".join(commits[-1][2].split(" ", 1)[-1].split("/")[-2:])
                if line.strip().endswith(f"/{obj}.yaml"):
                    commits[-1][3] = line.strip()
        commits = [c for c in commits if c[3] is not None]
        for sha, author, subject, path in commits:
            if path.endswith("zz-marker.yaml"):
                continue
            writer = workload.writer_of(sha, path, subject)
            if author == COMMITTER:
                counts["committer"] += 1
            elif writer is None:
                counts["unknown"] += 1
                wrong.append(f"{sha[:10]} {subject}: {author}, maker unknown")
            elif author == USERS[writer]:
                counts["right"] += 1
            else:
                counts["wrong"] += 1
                wrong.append(f"{sha[:10]} {subject}: {author}, made by {writer}")
        return {"mode": attribution, "changes": workload.changes, "commits": sum(counts.values()),
                "seconds": round(elapsed, 1), **counts, "examples": wrong[:5]}
    finally:
        stack.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", required=True, help="Bazel's bazel-bin (an opt build)")
    parser.add_argument("--rounds", type=int, default=5, help="workload rounds (each ~22 changes)")
    parser.add_argument("--attribution-grace", default="3s")
    parser.add_argument("--tmpdir", default=None)
    args = parser.parse_args()
    results = [measure(args, mode) for mode in ("admission", "audit")]
    for r in results:
        share = r["right"] / r["commits"] if r["commits"] else 0.0
        r["share_named"] = round(share, 4)
        print(f"{r['mode']:>9}: {r['commits']} commits for {r['changes']} changes in {r['seconds']} s: "
              f"{r['right']} right user ({share:.1%}), {r['committer']} committer, {r['wrong']} wrong user, "
              f"{r['unknown']} unclassified", flush=True)
        for example in r["examples"]:
            print(f"           {example}")
    admission, audit = results
    ratio = admission["share_named"] / audit["share_named"] if audit["share_named"] else 0.0
    verdict = "met" if admission["wrong"] == 0 else "NOT met"
    print(f"goal: no commit names a wrong user — {verdict}; admission names {ratio:.1%} of what the audit "
          f"path names on the same workload")
    timing = ("one mixed workload per mode in the same run; every commit on the remote checked against "
              "who made its change (its content says whose it is)")
    bench_result.emit(bench_result.figure(
        "attribution_share", "share_named", "share of commits naming the right user, admission facts only",
        "fraction", [admission["share_named"]],
        anchor={"name": "audit", "label": "the audit path on the same workload", "samples": [audit["share_named"]]},
        timing=timing, extra={"modes": results}))
    bench_result.emit(bench_result.figure(
        "attribution_share", "wrong_user", "commits naming a wrong user, admission facts only", "commits",
        [admission["wrong"]], better="lower", goal={"text": "no commit names a wrong user", "on": "value",
                                                     "op": "<=", "value": 0}, timing=timing))
    return 0 if admission["wrong"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
