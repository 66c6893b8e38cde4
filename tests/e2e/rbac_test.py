#!/usr/bin/env python3
"""Behaviour 1 under least privilege, and the status a forbidden watch produces.

The materializer runs as its own user whose RBAC allows ConfigMaps in namespace demo only. One
GitTarget ("mirror") follows ConfigMaps of demo through a namespaced WatchRule; another
("everything") follows them in every namespace through a ClusterWatchRule. The namespaced rule
must keep its own namespaced watch and mirror, while the cluster-wide watch the other target
needs is forbidden and reported on that target and its rule as WatchNotPermitted. Statuses are
read as a user reads them: `kubectl get ... -o json`.
"""
import calendar
import json
import os
import sys
import time
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

NS_PATH = "clusters/ns-only"
ALL_PATH = "clusters/all"
CONFIGMAPS = [{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}]


def configmap(name, ns="demo", value="v"):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": ns}, "data": {"k": value}})


def condition(obj, kind):
    for c in obj.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return c
    return {}


class NamespaceOnlyRbac(unittest.TestCase):
    stack = None

    @classmethod
    def setUpClass(cls):
        cls.stack = local_stack.Stack(
            ROOT, ROOT, commit_window="0s", push_cooldown="0s", log=lambda *_: None,
            materializer_rbac=[{"verbs": ["get", "list", "watch"], "apiGroups": [""],
                                "resources": ["configmaps"], "namespaces": ["demo"]}])
        try:
            cls.stack.start()
            cls.stack.kubectl("apply", "-f", "-", input=json.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
            cls.stack.kubectl("apply", "-f", "-", input=configmap("before"))
            cls.stack.kubectl("apply", "-f", "-", input=configmap("elsewhere", ns="other"))
            cls.stack.apply_mirror(NS_PATH, rules=CONFIGMAPS)
            cls.stack.kubectl("apply", "--validate=false", "-f", "-", input=json.dumps({
                "apiVersion": "v1", "kind": "List", "items": [
                    {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
                     "metadata": {"name": "everything", "namespace": "demo"},
                     "spec": {"providerRef": {"name": "local"}, "branch": "main", "path": ALL_PATH}},
                    {"apiVersion": "configbutler.ai/v1alpha3", "kind": "ClusterWatchRule",
                     "metadata": {"name": "all-configmaps"},
                     "spec": {"targetRef": {"name": "everything", "namespace": "demo"},
                              "rules": [{**CONFIGMAPS[0], "scope": "Namespaced"}]}}]}))
            cls.stack.wait_for_streams(1)  # the namespaced stream: the cluster-wide one never replays
        except Exception:
            cls.stack.print_log_tails()
            cls.stack.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.stack:
            cls.stack.cleanup()

    def get(self, *args):
        return json.loads(self.stack.kubectl("get", *args, "-o", "json").stdout)

    def wait_for(self, predicate, what, timeout=60):
        last = {}

        def check():
            last["value"] = predicate()
            return last["value"]
        try:
            local_stack.wait_until(check, timeout, what, poll=0.2)
        except Exception:
            for name in ("materializer", "splicer", "catalog"):
                print(f"--- {name} ---\n" + "\n".join(self.stack.logs(name).splitlines()[-20:]), file=sys.stderr)
            raise
        return last["value"]

    def test_01_namespaced_rule_keeps_its_namespaced_watch_beside_a_forbidden_cluster_watch(self):
        # The namespaced rule mirrors, through its own namespaced materialization.
        self.stack.wait_for_file(f"{NS_PATH}/demo/configmaps/before.yaml")
        self.stack.kubectl("apply", "-f", "-", input=configmap("live", value="1"))
        self.stack.wait_for_file(f"{NS_PATH}/demo/configmaps/live.yaml")
        keys = self.stack.redis_cli("--scan", "--pattern", "reverser:mat:v1:{configmaps:*}:ckpt:rv").stdout.split()
        self.assertEqual(keys, ["reverser:mat:v1:{configmaps:ns:demo}:ckpt:rv"])
        requests = self.stack.sim("GET", "/_sim/requests")["requests"]
        self.assertTrue(any(r.startswith("GET /api/v1/namespaces/demo/configmaps?") for r in requests), requests)
        # The cluster-wide materialization is what the ClusterWatchRule needs: forbidden.
        state = self.wait_for(lambda: json.loads(self.stack.redis_cli(
            "GET", "reverser:mat:v1:{configmaps:cluster}:state").stdout or "{}"), "the cluster-wide state record")
        self.assertEqual((state["phase"], state["reason"]), ("Blocked", "WatchNotPermitted"), state)
        self.assertIn("forbidden", state["message"])
        self.assertFalse([f for f in self.stack.files() if f.startswith(ALL_PATH + "/")])
        self.assertNotIn(f"{NS_PATH}/other/configmaps/elsewhere.yaml", self.stack.files())

    def test_02_a_forbidden_watch_reaches_its_gittarget_and_rule_as_watch_not_permitted(self):
        target = self.wait_for(
            lambda: (lambda t: t if condition(t, "StreamsRunning").get("reason") == "WatchNotPermitted" else None)(
                self.get("gittarget", "everything", "-n", "demo")), "GitTarget everything to show WatchNotPermitted")
        self.assertEqual(condition(target, "StreamsRunning")["status"], "False")
        self.assertEqual(condition(target, "StreamsRunning")["message"], "0/1 streams running; 1 blocked (configmaps)")
        self.assertEqual((condition(target, "Stalled")["status"], condition(target, "Stalled")["reason"]),
                         ("True", "WatchNotPermitted"))
        self.assertEqual(condition(target, "Ready")["status"], "False")
        self.assertEqual(target["status"]["streams"]["blocked"], 1)
        self.assertEqual(target["status"]["streams"]["summary"], "0/1")

        rule = self.wait_for(
            lambda: (lambda r: r if condition(r, "StreamsRunning").get("reason") == "WatchNotPermitted" else None)(
                self.get("clusterwatchrule", "all-configmaps")), "ClusterWatchRule to show WatchNotPermitted")
        self.assertEqual(condition(rule, "StreamsRunning")["status"], "False")
        self.assertEqual(condition(rule, "Stalled")["reason"], "WatchNotPermitted")
        self.assertEqual(condition(rule, "GitTargetReady")["status"], "False")
        self.assertEqual(condition(rule, "GitTargetReady")["reason"], "WatchNotPermitted")
        streams = rule["status"]["streams"]
        self.assertEqual({k: streams[k] for k in ("summary", "total", "ready", "replaying", "blocked", "pendingSample")},
                         {"summary": "0/1", "total": 1, "ready": 0, "replaying": 0, "blocked": 1,
                          "pendingSample": ["configmaps"]})
        self.assertIn("observedTime", streams)

    def test_03_the_namespaced_target_and_rule_are_ready_with_streams_and_push_times(self):
        def seconds(text):
            return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))

        def ready_with_latest_push(t):
            # Only mirror pushes here: its lastPushTime is the remote's latest push (to the second).
            pushed = t.get("status", {}).get("lastPushTime")
            if condition(t, "Ready").get("status") != "True" or not pushed:
                return None
            return t if abs(seconds(pushed) - self.stack.pushes()[-1][0]) <= 1 else None
        target = self.wait_for(lambda: ready_with_latest_push(self.get("gittarget", "mirror", "-n", "demo")),
                               "GitTarget mirror to be Ready with the latest push time")
        self.assertEqual(condition(target, "StreamsRunning")["reason"], "AllStreamsReady")
        self.assertEqual(condition(target, "StreamsRunning")["message"], "1/1 streams running")
        self.assertEqual(target["status"]["streams"]["summary"], "1/1")
        self.assertLessEqual(abs(seconds(target["status"]["lastReconcileTime"]) - time.time()), 600)

        rule = self.wait_for(
            lambda: (lambda r: r if condition(r, "Ready").get("status") == "True" else None)(
                self.get("watchrule", "demo-objects", "-n", "demo")), "WatchRule to be Ready")
        self.assertEqual((condition(rule, "StreamsRunning")["status"], condition(rule, "StreamsRunning")["reason"]),
                         ("True", "AllStreamsReady"))
        self.assertEqual((condition(rule, "GitTargetReady")["status"], condition(rule, "GitTargetReady")["reason"]),
                         ("True", "OK"))
        streams = rule["status"]["streams"]
        self.assertEqual({k: streams[k] for k in ("summary", "total", "ready", "replaying", "blocked", "pendingSample")},
                         {"summary": "1/1", "total": 1, "ready": 1, "replaying": 0, "blocked": 0, "pendingSample": []})


if __name__ == "__main__":
    unittest.main(verbosity=2)
