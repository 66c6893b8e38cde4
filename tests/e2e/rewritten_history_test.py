#!/usr/bin/env python3
"""History rewritten under reverser: someone force-pushes the mirrored branch back to before
reverser's commits (files of live objects are gone from the new history, a foreign file is in
it). The gitworker notices at its next push (its last pushed commit is no longer an ancestor of
the remote tip), says so in a metric and its log, and has every type of the branch's targets
resynced on top of the new tip: the tree is exact again, the foreign file is left alone."""
import json
import os
import sys
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

PATH = "clusters/rewritten"
HUMAN = {"GIT_AUTHOR_NAME": "Human", "GIT_AUTHOR_EMAIL": "h@example.com",
         "GIT_COMMITTER_NAME": "Human", "GIT_COMMITTER_EMAIL": "h@example.com"}


def configmap(name):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": "demo"}, "data": {"k": name}})


def deployment(name):
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "demo"},
                       "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name}},
                                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})


class RewrittenHistory(unittest.TestCase):
    def setUp(self):
        self.stack = local_stack.Stack(ROOT, ROOT, commit_window="0s", push_cooldown="0s",
                                       attribution_grace="1s", log=lambda *_: None)
        self.stack.start()
        self.stack.apply_mirror(PATH, rules=[{"operations": ["*"], "apiGroups": ["", "apps"],
                                              "resources": ["configmaps", "deployments"]}])
        self.stack.wait_for_streams(2)

    def tearDown(self):
        self.stack.cleanup()

    def test_a_force_push_is_noticed_and_every_type_resynced(self):
        live = [f"{PATH}/demo/configmaps/a.yaml", f"{PATH}/demo/configmaps/b.yaml",
                f"{PATH}/demo/apps/deployments/d.yaml"]
        for name in ("a", "b"):
            self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(name))
        self.stack.kubectl("apply", "-f", "-", user="alice", input=deployment("d"))
        for path in live:
            self.stack.wait_for_file(path)

        # A person resets the branch to its first commit and force-pushes a foreign file.
        clone = os.path.join(self.stack.dir, "rewriter")
        local_stack.run(["git", "clone", "-q", self.stack.remote, clone])
        root = local_stack.run(["git", "-C", clone, "rev-list", "--max-parents=0", "HEAD"]).stdout.split()[0]
        local_stack.run(["git", "-C", clone, "reset", "-q", "--hard", root])
        with open(os.path.join(clone, "foreign.txt"), "w") as f:
            f.write("kept\n")
        local_stack.run(["git", "-C", clone, "add", "foreign.txt"])
        local_stack.run(["git", "-C", clone, "commit", "-q", "-m", "rewrite"], env={**os.environ, **HUMAN})
        local_stack.run(["git", "-C", clone, "push", "-q", "--force", "origin", "HEAD:main"])
        self.assertNotIn(live[0], self.stack.files())

        # The next change is pushed onto the rewritten history, and every type comes back.
        self.stack.kubectl("apply", "-f", "-", user="bob", input=configmap("c"))
        expected = live + [f"{PATH}/demo/configmaps/c.yaml", "foreign.txt"]
        local_stack.wait_until(lambda: all(p in self.stack.files() for p in expected), 60,
                               "every live object's file back on the rewritten branch", poll=0.2)
        self.assertIn("rewrite", self.stack.git("log", "--format=%s", "main").splitlines())
        self.assertGreaterEqual(local_stack.metric_sum(self.stack.metrics("gitworker"),
                                                       "reverser_gitworker_history_rewritten_total"), 1)
        self.assertIn("history rewritten under the branch", self.stack.logs("gitworker"))
        self.assertIn("HistoryRewritten", self.stack.logs("splicer"))
        # Each type's resync is a reconcile commit on top of the new history.
        subjects = self.stack.git("log", "--format=%s", "main").splitlines()
        self.assertTrue(any(s.startswith("reconciled 2 configmaps") or s.startswith("reconciled 3 configmaps")
                            for s in subjects), subjects)
        self.assertTrue(any(s.startswith("reconciled 1 deployments") for s in subjects), subjects)


if __name__ == "__main__":
    unittest.main(verbosity=2)
