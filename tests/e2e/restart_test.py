#!/usr/bin/env python3
"""Restart safety: every service is killed with SIGKILL in turn while changes keep coming. After
the restarts the repository converges to exactly the cluster state; no change is missing (the
last content of every object is in Git), deletes made while a service was down are swept, and no
commit is an empty duplicate."""
import json
import os
import sys
import threading
import time
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

PATH = "clusters/restart"


class RestartSafety(unittest.TestCase):
    def setUp(self):
        self.stack = local_stack.Stack(ROOT, ROOT, commit_window="0s", push_cooldown="0s",
                                       attribution_grace="1s", log=lambda *_: None)
        self.stack.start()
        self.stack.apply_mirror(PATH, rules=[{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}])
        self.stack.wait_for_streams(1)

    def tearDown(self):
        self.stack.cleanup()

    def cluster_state(self):
        return {k: v for k, v in self.stack.cluster_data_values().items() if k.startswith("r-")}

    def git_state(self):
        return {k: v for k, v in self.stack.data_values(f"{PATH}/demo/configmaps/").items() if k.startswith("r-")}

    def test_kill_each_service_during_a_stream_of_changes(self):
        stop = threading.Event()
        errors = []

        def writer():
            i = 0
            while not stop.is_set():
                name = f"r-{i % 12}"
                try:
                    if i % 5 == 4:
                        self.stack.kubectl("delete", "configmap", name, "-n", "demo", "--ignore-not-found", user="bob")
                    else:
                        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "demo"},
                                "data": {"v": str(i)}}
                        self.stack.kubectl("apply", "-f", "-", user="alice", input=json.dumps(body))
                except Exception as e:  # the API server never goes down; record and go on
                    errors.append(str(e))
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for service in ("splicer", "materializer", "gitworker", "catalog"):
                time.sleep(1.0)  # let changes flow before and after each crash
                self.stack.kill(service)
                time.sleep(0.3)  # changes land while it is down
                self.stack.start_service(service)
            time.sleep(1.0)
        finally:
            stop.set()
            thread.join()
        self.assertEqual(errors, [])
        expected = self.cluster_state()
        try:
            local_stack.wait_until(lambda: self.git_state() == expected, 60, "Git to converge to the cluster", poll=0.2)
        except TimeoutError:
            missing = sorted(k for k in expected if self.git_state().get(k) != expected[k])
            history = "\n".join(l for l in self.stack.log_lines("%h %an | %s")
                                 if any(m in l for m in missing) or "reconciled" in l)
            self.fail(f"not converged:\ncluster {expected}\ngit     {self.git_state()}\n"
                      f"history of {missing}:\n{history}")
        # No empty (duplicate) commits: every commit changes at least one file.
        for line in self.stack.git("log", "--format=%H", "main").split():
            changed = self.stack.git("show", "--format=", "--name-only", line).split()
            self.assertTrue(changed, f"commit {line} changes nothing")


if __name__ == "__main__":
    unittest.main(verbosity=2)
