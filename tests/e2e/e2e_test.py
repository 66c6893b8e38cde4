#!/usr/bin/env python3
"""End-to-end behaviours of reverser (gitops-reverser v0.36.0 §6) with the real processes wired as
in production: kube-sim (HTTPS, token users, audit over mTLS), redis-server, the four services,
a bare Git remote, driven by the real kubectl 1.33 and verified with the git CLI.

Each test is named after the behaviour it checks (number from the reference's §6 list).
"""
import json
import os
import sys
import time
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

PATH = "clusters/e2e"


def configmap(name, ns="demo", data=None, labels=None, annotations=None, finalizers=None):
    meta = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if finalizers:
        meta["finalizers"] = finalizers
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}})


class E2E(unittest.TestCase):
    """One stack for the class; each test uses its own objects."""

    stack = None

    @classmethod
    def setUpClass(cls):
        cls.stack = local_stack.Stack(ROOT, ROOT, commit_window="0s", push_cooldown="0s",
                                      attribution_grace="3s", log=lambda *_: None)
        try:
            cls.stack.start()
            # An object that exists before the rule: it arrives through the initial resync.
            cls.stack.kubectl("apply", "-f", "-", input=configmap("preexisting", data={"born": "before-rule"}))
            cls.stack.kubectl("apply", "-f", "-", input=json.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
            cls.stack.kubectl("apply", "-f", "-", input=configmap("elsewhere", ns="other"))
            cls.stack.apply_mirror(PATH)
            cls.stack.wait_for_streams(2)
        except Exception:
            cls.dump_logs()
            cls.stack.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.stack:
            cls.stack.cleanup()

    @classmethod
    def dump_logs(cls):
        for name in cls.stack.procs:
            print(f"--- {name} ---\n" + "\n".join(cls.stack.logs(name).splitlines()[-30:]), file=sys.stderr)

    def run(self, result=None):
        outcome = super().run(result)
        if result is not None and (result.failures or result.errors):
            pass
        return outcome

    # helpers ---------------------------------------------------------------------------------

    def commit_after(self, action, timeout=30):
        """Runs `action`, waits for the branch to move, returns the new commits (newest first)."""
        before = self.stack.head()
        action()
        local_stack.wait_until(lambda: self.stack.head() != before, timeout, "a new commit", poll=0.02)
        # Let a same-window follower land, then read what arrived after `before`.
        return self.stack.git("log", "--format=%H%x09%an%x09%ae%x09%cn%x09%ce%x09%s", f"{before}..main").splitlines()

    def file(self, rel):
        return self.stack.show(f"{PATH}/{rel}")

    # behaviours ------------------------------------------------------------------------------

    def test_01_namespaced_rule_opens_namespaced_materialization_only(self):
        keys = local_stack.run(["redis-cli", "-p", str(self.stack.ports["redis"]), "--scan", "--pattern",
                                "reverser:mat:v1:configmaps:*:ckpt:rv"]).stdout.split()
        self.assertIn("reverser:mat:v1:configmaps:ns:demo:ckpt:rv", keys)
        self.assertNotIn("reverser:mat:v1:configmaps:cluster:ckpt:rv", keys)

    def test_02_initial_replay_is_one_resync_with_the_existing_objects(self):
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/preexisting.yaml")
        subjects = self.stack.log_lines("%s")
        self.assertTrue(any(s.startswith("reconciled 1 configmaps (last resourceVersion: ") for s in subjects), subjects)
        self.assertNotIn(f"{PATH}/other/configmaps/elsewhere.yaml", self.stack.files())

    def test_10_sanitized_output_keeps_only_the_allowed_fields(self):
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("sanitized", data={"a": "1"}))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/sanitized.yaml")
        text = self.file("demo/configmaps/sanitized.yaml")
        for forbidden in ("uid:", "resourceVersion:", "creationTimestamp:", "managedFields", "status:", "generation:"):
            self.assertNotIn(forbidden, text)
        self.assertTrue(text.startswith("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sanitized\n  namespace: demo\n"), text)

    def test_11_operational_annotations_are_stripped_sync_wave_kept(self):
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(
            "annotated", annotations={"argocd.argoproj.io/sync-wave": "2", "argocd.argoproj.io/tracking-id": "x",
                                      "deployment.kubernetes.io/revision": "3"}))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/annotated.yaml")
        text = self.file("demo/configmaps/annotated.yaml")
        self.assertIn("argocd.argoproj.io/sync-wave", text)
        self.assertNotIn("tracking-id", text)
        self.assertNotIn("deployment.kubernetes.io", text)
        self.assertNotIn("kubectl.kubernetes.io/last-applied-configuration", text)

    def test_12_canonical_layout_core_and_grouped_types(self):
        deployment = json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "layout", "namespace": "demo"},
                                 "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "l"}},
                                          "template": {"metadata": {"labels": {"app": "l"}},
                                                       "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        self.stack.kubectl("apply", "-f", "-", user="alice", input=deployment)
        self.stack.wait_for_file(f"{PATH}/demo/apps/deployments/layout.yaml")
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("layout"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/layout.yaml")

    def test_08_deletion_timestamp_removes_the_file_at_once(self):
        self.stack.kubectl("apply", "-f", "-", user="alice",
                           input=configmap("finalized", finalizers=["example.com/hold"]))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/finalized.yaml")
        commits = self.commit_after(lambda: self.stack.kubectl("delete", "configmap", "finalized", "-n", "demo",
                                                               "--wait=false", user="bob"))
        self.assertIn("[DELETE] v1/configmaps/finalized", commits[0])
        self.stack.wait_for_absent(f"{PATH}/demo/configmaps/finalized.yaml")
        # Removing the finalizer deletes the object for real: no further commit.
        head = self.stack.head()
        self.stack.kubectl("patch", "configmap", "finalized", "-n", "demo", "--type=merge",
                           "-p", '{"metadata":{"finalizers":null}}', user="bob")
        local_stack.wait_until(lambda: self.stack.kubectl("get", "configmap", "finalized", "-n", "demo",
                                                          check=False).returncode != 0, 10, "the object to go")
        # A marker change proves the pipeline moved past the final DELETED event.
        self.stack.kubectl("apply", "-f", "-", user="bob", input=configmap("marker-08"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/marker-08.yaml")
        new = self.stack.git("log", "--format=%s", f"{head}..main").splitlines()
        self.assertEqual(new, ["[CREATE] v1/configmaps/marker-08"], new)

    def test_09_unchanged_content_never_commits(self):
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("steady", data={"x": "1"}))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/steady.yaml")
        head = self.stack.head()
        # Only a label kubectl-style managers strip, and a no-op apply: nothing to commit.
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("steady", data={"x": "1"}))
        self.stack.kubectl("annotate", "configmap", "steady", "-n", "demo", "kubectl.kubernetes.io/restartedAt=now", user="alice")
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("marker-09"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/marker-09.yaml")
        new = self.stack.git("log", "--format=%s", f"{head}..main").splitlines()
        self.assertEqual(new, ["[CREATE] v1/configmaps/marker-09"], new)

    def test_17_window_zero_commits_per_event_with_the_event_template(self):
        commits = self.commit_after(lambda: self.stack.kubectl("apply", "-f", "-", user="alice",
                                                               input=configmap("per-event")))
        self.assertTrue(commits[0].endswith("\t[CREATE] v1/configmaps/per-event"), commits)

    def test_19_committer_is_always_the_configured_identity(self):
        commits = self.commit_after(lambda: self.stack.kubectl("apply", "-f", "-", user="bob",
                                                               input=configmap("committer-check")))
        sha, an, ae, cn, ce, subject = commits[0].split("\t")
        self.assertEqual((cn, ce), ("GitOps Reverser", "noreply@configbutler.ai"))
        self.assertEqual((an, ae), ("bob@example.com", "bob@example.com"))

    def test_23_author_facts_are_stored_under_the_reference_keys(self):
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("facts"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/facts.yaml")
        uid = json.loads(self.stack.kubectl("get", "configmap", "facts", "-n", "demo", "-o", "json").stdout)["metadata"]["uid"]
        keys = local_stack.run(["redis-cli", "-p", str(self.stack.ports["redis"]), "--scan", "--pattern",
                                f"reverser:author:v1:audit:configmaps:object:{uid}:*"]).stdout.split()
        self.assertIn(f"reverser:author:v1:audit:configmaps:object:{uid}:last", keys)
        self.assertTrue(any(k != f"reverser:author:v1:audit:configmaps:object:{uid}:last" for k in keys), keys)
        ttl = int(local_stack.run(["redis-cli", "-p", str(self.stack.ports["redis"]), "TTL", keys[0]]).stdout)
        self.assertGreater(ttl, 0)

    def test_22_dry_run_and_failed_requests_record_no_facts(self):
        self.stack.kubectl("apply", "--dry-run=server", "-f", "-", user="bob", input=configmap("dry"))
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("marker-22"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/marker-22.yaml")
        self.assertNotIn(f"{PATH}/demo/configmaps/dry.yaml", self.stack.files())
        metrics = self.stack.metrics("materializer")
        self.assertIn('outcome="dry_run"', metrics)

    def test_16_and_24_authors_from_audit_split_commits(self):
        a = self.commit_after(lambda: self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("by-alice")))
        b = self.commit_after(lambda: self.stack.kubectl("patch", "configmap", "by-alice", "-n", "demo", "--type=merge",
                                                         "-p", '{"data":{"k":"changed"}}', user="bob"))
        self.assertEqual(a[0].split("\t")[1], "alice@example.com")
        self.assertEqual(b[0].split("\t")[1], "bob@example.com")

    def test_26_deletecollection_credits_each_removal_to_its_actor(self):
        for name in ("coll-a", "coll-b"):
            self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(name, labels={"batch": "coll"}))
            self.stack.wait_for_file(f"{PATH}/demo/configmaps/{name}.yaml")
        head = self.stack.head()
        # kubectl deletes one by one; the collection endpoint is what deletecollection means.
        local_stack.run(["curl", "-sf", "--cacert", f"{self.stack.pki}/ca.crt", "-H", "Authorization: Bearer bob-token",
                         "-X", "DELETE", f"{self.stack.server}/api/v1/namespaces/demo/configmaps?labelSelector=batch%3Dcoll"])
        self.stack.wait_for_absent(f"{PATH}/demo/configmaps/coll-a.yaml")
        self.stack.wait_for_absent(f"{PATH}/demo/configmaps/coll-b.yaml")
        authors = self.stack.git("log", "--format=%an", f"{head}..main").split()
        self.assertTrue(authors and all(a == "bob@example.com" for a in authors), authors)

    def test_27_service_account_email_fallback(self):
        commits = self.commit_after(lambda: self.stack.kubectl("apply", "-f", "-", user="ci", input=configmap("from-ci")))
        sha, an, ae, *_ = commits[0].split("\t")
        self.assertEqual(an, "system:serviceaccount:ci:deployer")
        self.assertEqual(ae, "systemserviceaccountcideployer@noreply.cluster.local")

    def test_21_remote_moved_is_fetched_and_replayed(self):
        # Someone else pushes to the branch; the next change still lands on top of it.
        clone = os.path.join(self.stack.dir, "other-clone")
        local_stack.run(["git", "clone", "-q", self.stack.remote, clone])
        with open(os.path.join(clone, "NOTES.md"), "w") as f:
            f.write("hand-written\n")
        env = {**os.environ, "GIT_AUTHOR_NAME": "Human", "GIT_AUTHOR_EMAIL": "h@example.com",
               "GIT_COMMITTER_NAME": "Human", "GIT_COMMITTER_EMAIL": "h@example.com"}
        local_stack.run(["git", "-C", clone, "add", "-A"])
        local_stack.run(["git", "-C", clone, "commit", "-q", "-m", "hand edit"], env=env)
        local_stack.run(["git", "-C", clone, "push", "-q", "origin", "main"])
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("after-race"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/after-race.yaml")
        self.assertIn("NOTES.md", self.stack.files())
        self.assertIn("hand edit", self.stack.log_lines("%s"))

    def test_06_expired_resume_replays_and_sweeps_what_was_deleted_meanwhile(self):
        for name in ("doomed", "survivor"):
            self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(name, data={"v": "1"}))
            self.stack.wait_for_file(f"{PATH}/demo/configmaps/{name}.yaml")
        head = self.stack.head()
        # The watch side goes down hard; meanwhile one object is deleted, one changed, and the
        # API server compacts its history so the materializer's cursor expires (410).
        self.stack.kill("materializer")
        self.stack.kill("splicer")
        try:
            self.stack.kubectl("delete", "configmap", "doomed", "-n", "demo", user="bob")
            self.stack.kubectl("apply", "-f", "-", user="bob", input=configmap("survivor", data={"v": "2"}))
            local_stack.run(["curl", "-sf", "--cacert", f"{self.stack.pki}/ca.crt", "-H",
                             "Authorization: Bearer admin-token", "-X", "POST", "-d", "",
                             f"{self.stack.server}/_sim/compact"])
        finally:
            self.stack.start_service("materializer")
            self.stack.start_service("splicer")
        self.stack.wait_for_absent(f"{PATH}/demo/configmaps/doomed.yaml")
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/survivor.yaml", lambda text: "v: \"2\"" in text or "v: '2'" in text)
        new = self.stack.git("log", "--format=%cn|%an|%s", f"{head}..main").splitlines()
        reconciles = [c for c in new if "|reconciled " in c]
        self.assertTrue(reconciles, new)
        # The sweep never witnessed the delete: committer-authored.
        self.assertTrue(all(c.startswith("GitOps Reverser|GitOps Reverser|reconciled") for c in reconciles), new)
        # Other types' documents are untouched by a configmaps resync.
        if f"{PATH}/demo/apps/deployments/layout.yaml" in self.stack.files():
            self.assertIn(f"{PATH}/demo/apps/deployments/layout.yaml", self.stack.files())

    def test_zz_every_service_exposes_the_reference_metrics(self):
        expected = {
            "catalog": ["gitopsreverser_api_catalog_resources", "gitopsreverser_api_catalog_group_versions",
                        "gitopsreverser_api_catalog_generation", "gitopsreverser_api_catalog_refresh_total",
                        "gitopsreverser_api_catalog_refresh_duration_seconds"],
            "materializer": ["gitopsreverser_audit_events_total", "gitopsreverser_audit_eventlists_total",
                             "gitopsreverser_audit_eventlist_duration_seconds",
                             "gitopsreverser_attribution_fact_events_total",
                             "reverser_materializer_stream_appends_total"],
            "splicer": ["gitopsreverser_attribution_resolutions_total",
                        "gitopsreverser_attribution_resolution_wait_seconds", "gitopsreverser_watched_types"],
            "gitworker": ["gitopsreverser_commits_total", "gitopsreverser_objects_written_total",
                          "gitopsreverser_git_operations_total", "gitopsreverser_branch_worker_queue_depth"],
        }
        for service, names in expected.items():
            text = self.stack.metrics(service)
            for name in names:
                self.assertIn(f"# TYPE {name} ", text, f"{service} /metrics lacks {name}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
