#!/usr/bin/env python3
"""Who is named as a change's author when the audit log is out of reach, and when a namespace
takes its contents with it (docs/behaviour.md, "Attribution from admission" and "Removal
crediting").

E2EAdmissionAttribution runs the stack as a managed control plane allows: the API server has no
audit webhook; the attribution ValidatingWebhookConfiguration (its rules written by the catalog)
sends the followed types' writes to the materializer's admission webhook. Authors must be the
right user or the committer, never a wrong user. E2ENamespaceCascadeFromAudit checks the
namespace cascade on the audit path. Real kubectl against kube-sim, checked on the remote with
the git CLI.
"""
import json
import os
import sys
import threading
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

COMMITTER = "GitOps Reverser"
ALICE, BOB = "alice@example.com", "bob@example.com"
EMAILS = {"alice": ALICE, "bob": BOB}
# configmaps in every namespace (so a namespace of its own can be deleted), deployments of demo.
CLUSTER_RULES = [{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"], "scope": "Namespaced"}]
DEMO_RULES = [{"operations": ["*"], "apiGroups": ["apps"], "resources": ["deployments"]}]


def configmap(name, ns="demo", data=None, labels=None):
    meta = {"name": name, "namespace": ns, **({"labels": labels} if labels else {})}
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}})


def deployment(name, replicas=1):
    return json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "demo"},
                       "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name}},
                                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})


def namespace(name):
    return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


class AttributionStack(unittest.TestCase):
    stack = None
    stack_options = {}
    path = ""

    @classmethod
    def setUpClass(cls):
        cls.stack = local_stack.Stack(ROOT, ROOT, log=lambda *_: None, commit_window="0s", push_cooldown="0s",
                                      attribution_grace="3s", **cls.stack_options)
        cls.stack.start_then(cls.mirror_then_prepare)

    @classmethod
    def mirror_then_prepare(cls):
        cls.stack.apply_mirror(cls.path, rules=DEMO_RULES, cluster_rules=CLUSTER_RULES)
        cls.stack.wait_for_streams(2)
        cls.prepare()

    @classmethod
    def prepare(cls):
        pass

    @classmethod
    def tearDownClass(cls):
        if cls.stack:
            cls.stack.cleanup()

    def file_path(self, name, ns="demo", kind="configmaps"):
        return f"{self.path}/{ns}/{kind}/{name}.yaml"

    def authors_since(self, head, path):
        """(author name, subject) of each commit touching `path` after `head`, oldest first."""
        lines = self.stack.git("log", "--reverse", "--format=%an|%s", f"{head}..main", "--", path).splitlines()
        return [tuple(line.split("|", 1)) for line in lines]

    def apply(self, user, manifest):
        self.stack.kubectl("apply", "-f", "-", user=user, input=manifest)

    def cascade_goes_to_the_namespace_deleter(self):
        """alice creates objects in a namespace of their own; bob deletes the namespace: the
        namespace controller removes them, and bob is named (never alice)."""
        self.stack.kubectl("apply", "-f", "-", input=namespace("doomed"))
        for name in ("first", "second"):
            self.apply("alice", configmap(name, ns="doomed"))
            self.stack.wait_for_file(self.file_path(name, ns="doomed"))
        head = self.stack.head()
        self.stack.kubectl("delete", "namespace", "doomed", "--wait=false", user="bob")
        for name in ("first", "second"):
            self.stack.wait_for_absent(self.file_path(name, ns="doomed"))
            self.assertEqual(self.authors_since(head, self.file_path(name, ns="doomed")),
                             [(BOB, f"[DELETE] v1/configmaps/{name}")])


class E2EAdmissionAttribution(AttributionStack):
    """No audit webhook: authors come from admission facts only."""

    stack_options = {"attribution": "admission"}
    path = "clusters/admission"

    @classmethod
    def prepare(cls):
        # The catalog wrote the followed types (and namespace deletes) into the configuration.
        cls.stack.wait_attribution_rules(("", "configmaps"), ("apps", "deployments"), ("", "namespaces"))

    def test_01_there_is_no_audit_and_facts_come_from_admission(self):
        self.apply("alice", configmap("marker-01"))
        self.stack.wait_for_file(self.file_path("marker-01"))
        audit = local_stack.run(self.stack.redis_cli_argv("--scan", "--pattern", "reverser:author:v1:audit:*")).stdout.split()
        self.assertEqual(audit, [])
        admission = local_stack.run(self.stack.redis_cli_argv(
            "--scan", "--pattern", "reverser:author:v1:admission:configmaps:create:*")).stdout.split()
        self.assertTrue(admission)
        rules = self.stack.attribution_rules()
        self.assertIn(("apps", "deployments/scale"), rules)

    def test_02_creates_and_patches_name_their_users(self):
        head = self.stack.head()
        self.apply("alice", configmap("edited", data={"k": "1"}))
        self.stack.wait_for_file(self.file_path("edited"))
        self.stack.kubectl("patch", "configmap", "edited", "-n", "demo", "--type=merge", "-p", '{"data":{"k":"2"}}', user="bob")
        self.stack.wait_for_file(self.file_path("edited"), lambda text: "'2'" in text or '"2"' in text)
        self.apply("alice", configmap("edited", data={"k": "3"}))
        self.stack.wait_for_file(self.file_path("edited"), lambda text: "'3'" in text or '"3"' in text)
        self.assertEqual(self.authors_since(head, self.file_path("edited")),
                         [(ALICE, "[CREATE] v1/configmaps/edited"), (BOB, "[UPDATE] v1/configmaps/edited"),
                          (ALICE, "[UPDATE] v1/configmaps/edited")])

    def test_03_scale_names_who_scaled(self):
        path = self.file_path("scaled", kind="apps/deployments")
        head = self.stack.head()
        self.apply("alice", deployment("scaled"))
        self.stack.wait_for_file(path)
        self.stack.kubectl("scale", "deployment", "scaled", "-n", "demo", "--replicas=3", user="bob")
        self.stack.wait_for_file(path, lambda text: "replicas: 3" in text)
        self.assertEqual([a for a, _ in self.authors_since(head, path)], [ALICE, BOB])

    def test_04_deletes_and_deletecollection_name_who_removed(self):
        for name in ("gone", "coll-a", "coll-b"):
            self.apply("alice", configmap(name, labels={"batch": "coll"} if name != "gone" else None))
            self.stack.wait_for_file(self.file_path(name))
        head = self.stack.head()
        self.stack.kubectl("delete", "configmap", "gone", "-n", "demo", user="bob")
        local_stack.run(["curl", "-sf", "--cacert", f"{self.stack.pki}/ca.crt", "-H", "Authorization: Bearer ci-token",
                         "-X", "DELETE", f"{self.stack.server}/api/v1/namespaces/demo/configmaps?labelSelector=batch%3Dcoll"])
        for name in ("gone", "coll-a", "coll-b"):
            self.stack.wait_for_absent(self.file_path(name))
        self.assertEqual(self.authors_since(head, self.file_path("gone")), [(BOB, "[DELETE] v1/configmaps/gone")])
        for name in ("coll-a", "coll-b"):
            self.assertEqual(self.authors_since(head, self.file_path(name)),
                             [("system:serviceaccount:ci:deployer", f"[DELETE] v1/configmaps/{name}")])

    def test_05_a_change_two_users_were_admitted_for_is_the_committers(self):
        self.apply("alice", configmap("contested", data={"k": "same"}))
        self.stack.wait_for_file(self.file_path("contested"))
        head = self.stack.head()
        # bob's patch changes nothing (admitted, never stored); alice's, against the same
        # version, is stored: two users were admitted for that one change.
        self.stack.kubectl("patch", "configmap", "contested", "-n", "demo", "--type=merge",
                           "-p", '{"data":{"k":"same"}}', user="bob")
        self.stack.kubectl("patch", "configmap", "contested", "-n", "demo", "--type=merge",
                           "-p", '{"data":{"k":"new"}}', user="alice")
        self.stack.wait_for_file(self.file_path("contested"), lambda text: "new" in text)
        self.assertEqual(self.authors_since(head, self.file_path("contested")),
                         [(COMMITTER, "[UPDATE] v1/configmaps/contested")])
        self.assertGreaterEqual(local_stack.metric_sum(self.stack.metrics("splicer"),
                                                         "gitopsreverser_attribution_resolutions_total",
                                                         result="ambiguous"), 1)

    def test_06_users_racing_on_one_object_are_never_misnamed(self):
        path = self.file_path("raced")
        self.apply("alice", configmap("raced", data={"k": "start"}))
        self.stack.wait_for_file(path)
        head = self.stack.head()

        def patches(user):
            for i in range(8):
                self.stack.kubectl("patch", "configmap", "raced", "-n", "demo", "--type=merge",
                                   "-p", json.dumps({"data": {"k": f"{user}-{i}"}}), user=user)

        threads = [threading.Thread(target=patches, args=(user,)) for user in ("alice", "bob")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        final = json.loads(self.stack.kubectl("get", "configmap", "raced", "-n", "demo", "-o", "json").stdout)["data"]["k"]
        self.stack.wait_for_file(path, lambda text: final in text)
        commits = self.stack.git("log", "--reverse", "--format=%H|%an", f"{head}..main", "--", path).splitlines()
        self.assertTrue(commits)
        named = 0
        for line in commits:
            sha, author = line.split("|", 1)
            value = self.stack.git("show", f"{sha}:{path}")
            writer = next(user for user in ("alice", "bob") if f"{user}-" in value)
            # The content says whose patch it is: that user, or the committer, never the other.
            self.assertIn(author, (EMAILS[writer], COMMITTER), f"{sha}: {value}")
            named += author != COMMITTER
        print(f"\n    racing patches: {named} of {len(commits)} commits named their user, "
              f"the rest the committer", file=sys.stderr)

    def test_07_a_dry_run_records_nothing(self):
        before = local_stack.metric_sum(self.stack.metrics("materializer"),
                                          "reverser_materializer_admission_reviews_total", outcome="dry_run")
        self.stack.kubectl("apply", "--dry-run=server", "-f", "-", user="bob", input=configmap("dry"))
        after = local_stack.metric_sum(self.stack.metrics("materializer"),
                                         "reverser_materializer_admission_reviews_total", outcome="dry_run")
        self.assertEqual(after, before + 1)
        self.apply("alice", configmap("dry"))
        self.stack.wait_for_file(self.file_path("dry"))
        self.assertEqual(self.stack.git("log", "-1", "--format=%an", "main", "--", self.file_path("dry")).strip(), ALICE)

    def test_08_a_namespace_cascade_goes_to_the_namespace_deleter(self):
        self.cascade_goes_to_the_namespace_deleter()


class E2ENamespaceCascadeFromAudit(AttributionStack):
    """The audit path: the namespace controller's deletecollections are credited to whoever
    deleted the namespace."""

    stack_options = {"attribution": "audit"}
    path = "clusters/audited"

    def test_namespace_cascade_goes_to_the_namespace_deleter(self):
        self.cascade_goes_to_the_namespace_deleter()


if __name__ == "__main__":
    unittest.main(verbosity=2)
