#!/usr/bin/env python3
"""Lost Redis state: while kubectl changes flow, Redis loses acknowledged writes — redis-server is
killed and a fresh, empty one is started on the same port (no persistence, as a rescheduled pod),
or (behind Sentinel) the primary dies and a replica that missed the last writes is promoted.
Without a restart of any reverser service the mirror converges to exactly the cluster state
(every object's file with its current content, no file of a deleted object), and no commit pushed
during the run deletes the file of an object that existed the whole time."""
import json
import os
import sys
import threading
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

PATH = "clusters/redisloss"
PREFIX = f"{PATH}/demo/configmaps/"
SERVICES = ("catalog", "materializer", "splicer", "gitworker")
STABLE = [f"s-{i}" for i in range(4)]  # exist the whole run and are only modified
CHURN = [f"c-{i}" for i in range(6)]   # created and deleted over and over


def configmap(name, value):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "demo"}, "data": {"v": str(value)}})


class RedisLossCase(unittest.TestCase):
    """A stack mirroring configmaps, and the loss scenario (no tests of its own)."""

    stack_options = {}

    def setUp(self):
        self.stack = local_stack.Stack(ROOT, ROOT, commit_window="0s", push_cooldown="0s",
                                       attribution_grace="1s", log=lambda *_: None, **self.stack_options)
        self.stack.start()
        self.stack.apply_mirror(PATH, rules=[{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}])
        self.stack.wait_for_streams(1)

    def tearDown(self):
        self.stack.cleanup()

    def cluster_state(self):
        return {k: v for k, v in self.stack.cluster_data_values().items() if k[:2] in ("s-", "c-")}

    def git_state(self):
        """name -> data.v of every ConfigMap document under the target path."""
        return self.stack.data_values(PREFIX)

    def newest_stable_in_git(self):
        values = [v for k, v in self.git_state().items() if k in STABLE and v and v.isdigit()]
        return max((int(v) for v in values), default=-1)

    def metric(self, service, name):
        total = 0.0
        for line in self.stack.metrics(service).splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def loses_writes_while_changes_flow(self, lose):
        """Runs writers, calls `lose()` (which returns once Redis lost acknowledged writes) while
        they run, and checks the mirror converges without deleting a stable object's file."""
        for name in STABLE:
            self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(name, 0))
        local_stack.wait_until(lambda: all(n in self.git_state() for n in STABLE), 30, "the stable objects in Git")
        start = self.stack.head()
        pids = {name: self.stack.procs[name].pid for name in SERVICES}

        stop = threading.Event()
        progress = {"written": 0}
        errors = []

        def writer():
            i = 1
            while not stop.is_set():
                try:
                    self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(STABLE[i % len(STABLE)], i))
                    churn = CHURN[i % len(CHURN)]
                    if i % 3 == 2:
                        self.stack.kubectl("delete", "configmap", churn, "-n", "demo", "--ignore-not-found", user="bob")
                    else:
                        self.stack.kubectl("apply", "-f", "-", user="bob", input=configmap(churn, i))
                except Exception as e:  # the API server never goes down; record and go on
                    errors.append(str(e))
                progress["written"] = i
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            # Changes flow into Git before the loss...
            local_stack.wait_until(lambda: self.newest_stable_in_git() >= 3, 30, "changes to reach Git")
            lose(progress)
            written_before_loss = progress["written"]
            # ...the loss is noticed by the services themselves...
            local_stack.wait_until(lambda: self.metric("materializer", "reverser_materializer_state_lost_total") >= 1,
                                   30, "the materializer to notice the lost state", poll=0.1)
            # ...and changes made after it reach Git again.
            local_stack.wait_until(lambda: self.newest_stable_in_git() > written_before_loss + 4, 60,
                                   "changes made after the loss to reach Git", poll=0.1)
        finally:
            stop.set()
            thread.join()
        self.assertEqual(errors, [])

        # The mirror converges to exactly the cluster state: every object's file with its current
        # content, no file of a deleted object.
        expected = self.cluster_state()
        try:
            local_stack.wait_until(lambda: self.git_state() == expected, 60, "Git to converge to the cluster", poll=0.2)
        except TimeoutError:
            self.fail(f"not converged:\ncluster {expected}\ngit     {self.git_state()}\n"
                      f"materializer log tail:\n{self.stack.logs('materializer')[-3000:]}\n"
                      f"splicer log tail:\n{self.stack.logs('splicer')[-3000:]}")

        # No reverser service was restarted.
        for name in SERVICES:
            self.assertIsNone(self.stack.procs[name].poll(), f"{name} exited")
            self.assertEqual(self.stack.procs[name].pid, pids[name], f"{name} was restarted")

        # No commit pushed during the run deleted the file of an object that existed throughout.
        deleted = self.stack.git("log", "--diff-filter=D", "--name-only", "--format=", f"{start}..main").split()
        for name in STABLE:
            self.assertNotIn(f"{PREFIX}{name}.yaml", deleted, f"the file of {name} was deleted on the way")
        # Every commit of the run, one by one (a delete and a re-add in two commits would not show
        # in the final tree): the stable files are present after each of them.
        for sha in self.stack.git("rev-list", f"{start}..main").split():
            tree = self.stack.git("ls-tree", "-r", "--name-only", sha).split()
            for name in STABLE:
                self.assertIn(f"{PREFIX}{name}.yaml", tree, f"commit {sha} lacks {name}")

        # Both services say what happened.
        self.assertGreaterEqual(self.metric("materializer", "reverser_materializer_state_lost_total"), 1)
        self.assertIn("Redis state lost", self.stack.logs("materializer"))
        self.assertIn("rebuilt after Redis state loss", self.stack.logs("materializer"))
        resyncs = self.metric("splicer", "reverser_splicer_resyncs_total")
        self.assertGreaterEqual(resyncs, 2, "the splicer resynced from the rebuilt checkpoint")



class RedisLoss(RedisLossCase):
    def test_redis_restarted_empty_while_changes_flow(self):
        self.loses_writes_while_changes_flow(lambda progress: self.stack.restart_redis())


class RedisSentinelFailover(RedisLossCase):
    """Redis behind Sentinel: the primary dies while the replica lags (cut off from it, so it
    missed the last acknowledged writes), and the Sentinel promotes that replica."""

    stack_options = {"redis_sentinel": True}

    def test_failover_to_a_replica_that_missed_writes(self):
        def lose(progress):
            self.stack.cut_off_replica()
            # Writes acknowledged by the primary alone (the Sentinel promotes only a replica that
            # lost its primary less than ~10 s ago: a few writes, not a long wait).
            mark = progress["written"]
            local_stack.wait_until(lambda: progress["written"] >= mark + 3, 30, "writes the replica misses")
            self.stack.kill("redis")  # the primary dies
            local_stack.wait_until(lambda: self.stack.redis_primary_port() == self.stack.ports["redis_replica"],
                                   60, "the Sentinel to promote the replica", poll=0.2)

        self.loses_writes_while_changes_flow(lose)
        self.assertEqual(self.stack.redis_primary_port(), self.stack.ports["redis_replica"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
