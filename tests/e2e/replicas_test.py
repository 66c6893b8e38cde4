#!/usr/bin/env python3
"""Replicas sharing the work (issue #17's acceptance): 3 gitworkers, 2 splicers and 2
materializers over 30 GitTargets on 30 branches, joined by Leases in kube-sim. Writes flow through
kubectl while replicas are SIGKILLed one at a time and restarted, and one gitworker is paused past
its Lease and resumed. At the end every branch's tree equals the cluster state, no change is lost
and no pushed commit is empty (a change committed twice would be); the branches were shared with
no gitworker owning more than 14 of 30."""
import json
import os
import sys
import threading
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

TARGETS = 30
OBJECTS = 3  # ConfigMaps per namespace
REPLICAS = {"gitworker": 3, "splicer": 2, "materializer": 2}
CONVERGE = 240  # seconds: a bound for a failing run, not a speed assertion


def namespace(i):
    return f"team-{i:02d}"


def branch(i):
    return f"b-{i:02d}"


def path(i):
    return f"clusters/{namespace(i)}"


def mirror_manifest(stack, i):
    """A GitProvider, GitTarget and WatchRule in their own namespace, on their own branch."""
    ns = namespace(i)
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider",
         "metadata": {"name": "local", "namespace": ns},
         "spec": {"url": f"file://{stack.remote}", "allowedBranches": [branch(i)],
                  "push": {"commitWindow": "0s"}}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
         "metadata": {"name": "mirror", "namespace": ns},
         "spec": {"providerRef": {"name": "local"}, "branch": branch(i), "path": path(i)}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
         "metadata": {"name": "configmaps", "namespace": ns},
         "spec": {"targetRef": {"name": "mirror"},
                  "rules": [{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}]}},
    ]}


def configmaps(round_number, names):
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
         "data": {"v": str(round_number)}} for ns, name in names]})


class ReplicasTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = local_stack.Stack(ROOT, ROOT, commit_window="0s", push_cooldown="0s",
                                      attribution_grace="1s", log=lambda *_: None, replicas=REPLICAS)

        def prepare():
            for i in range(TARGETS):
                cls.stack.kubectl("apply", "--validate=false", "-f", "-",
                                  input=json.dumps(mirror_manifest(cls.stack, i)))
            local_stack.wait_until(lambda: cls.resyncs_sent() >= TARGETS, 120,
                                   f"{TARGETS} targets to send their first resync", poll=0.2)
        cls.stack.start_then(prepare)

    @classmethod
    def tearDownClass(cls):
        cls.stack.cleanup()

    @classmethod
    def metric_total(cls, service, name):
        return sum(local_stack.metric_sum(cls.stack.metrics(replica), name)
                   for replica in cls.stack.replica_names(service))

    @classmethod
    def resyncs_sent(cls):
        return sum(len([l for l in cls.stack.metrics(replica).splitlines()
                        if l.startswith("reverser_splicer_resyncs_total{")])
                   for replica in cls.stack.replica_names("splicer"))

    def owned_branches(self):
        return {replica: local_stack.metric_sum(self.stack.metrics(replica), "reverser_gitworker_owned_branches")
                for replica in self.stack.replica_names("gitworker")}

    def git_state(self, i):
        return self.stack.data_values(f"{path(i)}/{namespace(i)}/configmaps/", branch=branch(i))

    def cluster_state(self, i):
        return self.stack.cluster_data_values(namespace=namespace(i))

    def converged(self):
        return all(self.git_state(i) == self.cluster_state(i) for i in range(TARGETS))

    def empty_commits(self, i):
        """Commits on the branch (after the seed) whose tree equals their parent's."""
        out = self.stack.git("log", "--format=%H %T %P", branch(i))
        trees = {}
        rows = [line.split() for line in out.splitlines()]
        for row in rows:
            trees[row[0]] = row[1]
        return [row[0] for row in rows if len(row) == 3 and trees.get(row[2]) == row[1]]

    def test_writes_survive_kills_and_a_pause_and_every_branch_converges(self):
        # Balanced: bounded rendezvous keeps every gitworker at or under 14 of 30 branches.
        local_stack.wait_until(lambda: sum(self.owned_branches().values()) == TARGETS, 60,
                               "the gitworkers to own every branch once")
        for replica, owned in self.owned_branches().items():
            self.assertLessEqual(owned, 14, f"{replica} owns {owned} of {TARGETS} branches")

        names = [(namespace(i), f"cm-{k}") for i in range(TARGETS) for k in range(OBJECTS)]
        stop = threading.Event()
        rounds = [0]
        errors = []

        def writer():
            while not stop.is_set():
                rounds[0] += 1
                result = self.stack.kubectl("apply", "--validate=false", "-f", "-", input=configmaps(rounds[0], names), check=False)
                if result.returncode != 0:
                    errors.append(result.stderr)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            def after_rounds(n):
                start = rounds[0]
                local_stack.wait_until(lambda: rounds[0] >= start + n, 60, f"{n} more rounds of writes")

            after_rounds(2)
            # One replica at a time: killed, then restarted once the writes went on without it.
            for name in ("gitworker-1", "splicer", "materializer-1", "gitworker"):
                self.stack.kill(name)
                after_rounds(2)
                self.stack.start_service(name)
                after_rounds(2)
            # A gitworker paused past its Lease: the others take its branches; resumed, it learns
            # it lost them (its pushes are refused by compare-and-swap, its view moves on).
            self.stack.pause("gitworker-2")
            try:
                local_stack.wait_until(
                    lambda: sum(v for k, v in self.owned_branches().items() if k != "gitworker-2") == TARGETS,
                    60, "the other gitworkers to own every branch while gitworker-2 is paused")
                after_rounds(2)
            finally:
                self.stack.resume("gitworker-2")
            after_rounds(2)
        finally:
            stop.set()
            thread.join()
        self.assertEqual(errors, [])

        try:
            local_stack.wait_until(self.converged, CONVERGE, "every branch to equal the cluster state", poll=0.5)
        except TimeoutError:
            for i in range(TARGETS):
                if self.git_state(i) != self.cluster_state(i):
                    print(f"{branch(i)}: git {self.git_state(i)} cluster {self.cluster_state(i)}", file=sys.stderr)
            self.stack.print_log_tails(lines=15)
            raise
        for i in range(TARGETS):
            values = self.git_state(i)
            self.assertEqual(sorted(values), [f"cm-{k}" for k in range(OBJECTS)], branch(i))
            self.assertEqual(set(values.values()), {str(rounds[0])}, branch(i))  # the last round's
            self.assertEqual(self.empty_commits(i), [], f"empty commits on {branch(i)}")
        # The stale owner was fenced: it pushed nothing over another owner's commits (every branch
        # converged), and the membership counted it out and back in.
        self.assertEqual(sum(self.owned_branches().values()), TARGETS)


if __name__ == "__main__":
    unittest.main()
