#!/usr/bin/env python3
"""End-to-end behaviours of reverser (docs/behaviour.md, Compatibility checklist) with the real
processes wired as in production: kube-sim (HTTPS, token users, audit over mTLS), redis-server,
the four services, a bare Git remote, driven by the real kubectl 1.33 and verified with the git
CLI.

Each test is named after the behaviour it checks (its number in that checklist). Three
stacks, one per class: E2E (commit window 0, no cooldown, Secrets encrypted with age, a
ClusterWatchRule for clusterroles), E2ECommitWindowAndCooldown (a 90 s window and a 3 s push
cooldown) and E2ELegacyServer (kube-sim's legacy profile: no WatchList). Late audit delivery,
replays cut short and compaction are kube-sim's admin knobs (tools/kube-sim/README.md).
"""
import base64
import json
import os
import re
import signal
import sys
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

PATH = "clusters/e2e"
# What the main stack mirrors: namespaced types of namespace demo (Secrets encrypted with age)
# and, through a ClusterWatchRule, one cluster-scoped type.
RULES = [{"operations": ["*"], "apiGroups": ["", "apps", "example.com"],
          "resources": ["configmaps", "deployments", "widgets", "secrets"]}]
CLUSTER_RULES = [{"operations": ["*"], "apiGroups": ["rbac.authorization.k8s.io"],
                  "resources": ["clusterroles"], "scope": "Cluster"}]
HUMAN = {"GIT_AUTHOR_NAME": "Human", "GIT_AUTHOR_EMAIL": "h@example.com",
         "GIT_COMMITTER_NAME": "Human", "GIT_COMMITTER_EMAIL": "h@example.com"}


def configmap(name, ns="demo", data=None, labels=None, annotations=None, finalizers=None):
    meta = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    if finalizers:
        meta["finalizers"] = finalizers
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"k": "v"}})


def hand_commit(stack, files, message, branch="main"):
    """A person commits to the remote: `files` maps path -> content (None removes the file)."""
    clone = os.path.join(stack.dir, f"hand-{len(os.listdir(stack.dir))}")
    local_stack.run(["git", "clone", "-q", "-b", branch, stack.remote, clone])
    for path, content in files.items():
        full = os.path.join(clone, path)
        if content is None:
            local_stack.run(["git", "-C", clone, "rm", "-q", path])
            continue
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(content)
        local_stack.run(["git", "-C", clone, "add", path])
    env = {**os.environ, **HUMAN}
    local_stack.run(["git", "-C", clone, "commit", "-q", "-m", message], env=env)
    local_stack.run(["git", "-C", clone, "push", "-q", "origin", branch])


def ghost_document(name, ns="demo"):
    """A managed-looking ConfigMap document of an object that does not exist in the cluster: any
    sweep of configmaps would delete it."""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\ndata:\n  k: ghost\n"


metric_sum = local_stack.metric_sum


def deleted_paths(stack, since, branch="main"):
    """Every file deleted by a commit in since..branch."""
    out = stack.git("log", "--format=", "--name-status", "--no-renames", f"{since}..{branch}")
    return [line.split("\t", 1)[1] for line in out.splitlines() if line.startswith("D\t")]


class E2E(unittest.TestCase):
    """One stack for the class; each test uses its own objects."""

    stack = None

    @classmethod
    def setUpClass(cls):
        cls.stack = local_stack.Stack(ROOT, ROOT, commit_window="0s", push_cooldown="0s",
                                      attribution_grace="3s", log=lambda *_: None)
        try:
            cls.stack.start()
            # An age key pair: Secrets are encrypted to its recipient; the test decrypts with it.
            cls.age_key = os.path.join(cls.stack.dir, "e2e.agekey")
            local_stack.run(["age-keygen", "-o", cls.age_key])
            cls.age_recipient = local_stack.run(["age-keygen", "-y", cls.age_key]).stdout.strip()
            # An object that exists before the rule: it arrives through the initial resync.
            cls.stack.kubectl("apply", "-f", "-", input=configmap("preexisting", data={"born": "before-rule"}))
            cls.stack.kubectl("apply", "-f", "-", input=json.dumps(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
            cls.stack.kubectl("apply", "-f", "-", input=configmap("elsewhere", ns="other"))
            cls.stack.apply_mirror(PATH, rules=RULES, age_recipients=[cls.age_recipient],
                                   cluster_rules=CLUSTER_RULES)
            # configmaps, deployments, secrets and clusterroles (no Widget CRD here).
            cls.stack.wait_for_streams(4)
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
        cls.stack.print_log_tails()

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
        keys = local_stack.run(self.stack.redis_cli_argv("--scan", "--pattern",
                                "reverser:mat:v1:{configmaps:*}:ckpt:rv")).stdout.split()
        self.assertIn("reverser:mat:v1:{configmaps:ns:demo}:ckpt:rv", keys)
        self.assertNotIn("reverser:mat:v1:{configmaps:cluster}:ckpt:rv", keys)

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
        keys = local_stack.run(self.stack.redis_cli_argv("--scan", "--pattern",
                                f"reverser:author:v1:audit:configmaps:object:{uid}:*")).stdout.split()
        self.assertIn(f"reverser:author:v1:audit:configmaps:object:{uid}:last", keys)
        self.assertTrue(any(k != f"reverser:author:v1:audit:configmaps:object:{uid}:last" for k in keys), keys)
        ttl = int(local_stack.run(self.stack.redis_cli_argv("TTL", keys[0])).stdout)
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

    def test_04_no_sweep_on_a_timer_or_on_a_partial_replay(self):
        # A managed-looking document of an object the cluster does not have: any sweep of
        # configmaps deletes it, so while it stays no sweep ran.
        ghost = f"{PATH}/demo/configmaps/ghost-04.yaml"
        hand_commit(self.stack, {ghost: ghost_document("ghost-04")}, "hand-written ghost-04")
        head = self.stack.head()
        # Timers: the catalog re-reads discovery every 2 s and the splicer reports stream
        # summaries every 2 s. Wait for two discovery refreshes and one live change.
        refreshes = metric_sum(self.stack.metrics("catalog"), "gitopsreverser_api_catalog_refresh_total")
        local_stack.wait_until(lambda: metric_sum(self.stack.metrics("catalog"),
                                                  "gitopsreverser_api_catalog_refresh_total") >= refreshes + 2,
                               30, "two discovery refreshes", poll=0.2)
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("marker-04"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/marker-04.yaml")
        self.assertIn(ghost, self.stack.files())
        self.assertEqual(self.stack.git("log", "--format=%s", f"{head}..main").splitlines(),
                         ["[CREATE] v1/configmaps/marker-04"])

        # A replay cut short: the materializer's cursor expires (compaction while it is down), so
        # it replays; that replay's connection drops after one object, before initial-events-end.
        for name in ("replayed-a", "replayed-b", "replayed-c"):
            self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(name))
            self.stack.wait_for_file(f"{PATH}/demo/configmaps/{name}.yaml")
        live = sorted(i["metadata"]["name"] for i in json.loads(self.stack.kubectl(
            "get", "configmaps", "-n", "demo", "-o", "json").stdout)["items"])
        self.assertGreater(len(live), 3)
        head = self.stack.head()
        self.stack.kill("materializer")
        self.stack.kill("splicer")
        try:
            # A change while it is down, then compaction: its cursor is now older than history.
            self.stack.kubectl("apply", "-f", "-", user="bob", input=configmap("replayed-a", data={"k": "v2"}))
            self.stack.sim("POST", "/_sim/compact", {})
            self.stack.sim("POST", "/_sim/faults", {"action": "cut-watch", "resource": "configmaps",
                                                    "afterEvents": 1, "times": 1})
        finally:
            self.stack.start_service("materializer")
            self.stack.start_service("splicer")
        # Only the completed replay sweeps: the ghost goes, nothing that exists is ever deleted.
        try:
            self.stack.wait_for_absent(ghost)
        finally:
            self.stack.sim("DELETE", "/_sim/faults")
        self.assertIn("k: v2", self.file("demo/configmaps/replayed-a.yaml"))
        requests = self.stack.sim("GET", "/_sim/requests")["requests"]
        replays = [r for r in requests if r.startswith("GET /api/v1/namespaces/demo/configmaps?")
                   and "sendInitialEvents=true" in r]
        self.assertTrue(replays, "the materializer never replayed configmaps")
        removed = deleted_paths(self.stack, head)
        self.assertEqual(removed, [ghost], removed)
        for name in live:
            self.assertIn(f"{PATH}/demo/configmaps/{name}.yaml", self.stack.files())
        subjects = self.stack.git("log", "--format=%an|%s", f"{head}..main").splitlines()
        reconciles = [s for s in subjects if "|reconciled " in s]
        self.assertEqual(len(reconciles), 1, subjects)
        self.assertRegex(reconciles[0], r"^GitOps Reverser\|reconciled \d+ configmaps \(last resourceVersion: \d+\)$")
        # bob's change may also arrive as a live event (its audit fact is retried until the
        # materializer is back); nothing else may.
        others = set(subjects) - set(reconciles)
        self.assertLessEqual(others, {"bob@example.com|[UPDATE] v1/configmaps/replayed-a"}, subjects)

    def test_05_restart_resumes_from_the_cursor_without_replay_or_sweep(self):
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("before-restart-05"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/before-restart-05.yaml")
        ghost = f"{PATH}/demo/configmaps/ghost-05.yaml"
        hand_commit(self.stack, {ghost: ghost_document("ghost-05")}, "hand-written ghost-05")
        head = self.stack.head()
        cursors = local_stack.run(self.stack.redis_cli_argv("--scan", "--pattern",
                                   "reverser:splice:v1:*:configmaps:ns:demo:acked")).stdout.split()
        self.assertEqual(len(cursors), 1, cursors)
        # Every service stops (as in a rolling restart) and starts again; nothing changed meanwhile.
        for name in ("splicer", "materializer", "catalog", "gitworker"):
            self.stack.kill(name, signal.SIGTERM)
        for name in ("gitworker", "catalog", "materializer", "splicer"):
            self.stack.start_service(name)
        # One change after the restart proves the pipeline runs again.
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("after-restart-05"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/after-restart-05.yaml")
        self.assertEqual(self.stack.git("log", "--format=%s", f"{head}..main").splitlines(),
                         ["[CREATE] v1/configmaps/after-restart-05"])
        self.assertIn(ghost, self.stack.files())  # no sweep
        self.assertEqual(metric_sum(self.stack.metrics("splicer"), "reverser_splicer_resyncs_total"), 0)
        self.assertEqual(metric_sum(self.stack.metrics("materializer"), "reverser_materializer_replays_total"), 0)
        # Leave the tree as the cluster has it.
        hand_commit(self.stack, {ghost: None}, "remove ghost-05")

    def test_12_cluster_scoped_objects_use_the_cluster_segment(self):
        role = json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": "e2e-reader"},
                           "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
        self.stack.kubectl("apply", "-f", "-", user="alice", input=role)
        path = f"{PATH}/_cluster/rbac.authorization.k8s.io/clusterroles/e2e-reader.yaml"
        self.stack.wait_for_file(path)
        text = self.stack.show(path)
        self.assertIn("kind: ClusterRole\n", text)
        self.assertNotIn("namespace:", text)
        self.assertEqual(self.stack.git("log", "--format=%an|%s", "main", "--", path).splitlines(),
                         ["alice@example.com|[CREATE] rbac.authorization.k8s.io/v1/clusterroles/e2e-reader"])

    def test_12_secrets_use_sops_yaml_and_decrypt_with_the_age_key(self):
        plaintext = "s3cr3t-e2e-plaintext"
        encoded = base64.b64encode(plaintext.encode()).decode()
        secret = json.dumps({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                             "metadata": {"name": "db-credentials", "namespace": "demo"},
                             "data": {"password": encoded}})
        self.stack.kubectl("apply", "-f", "-", user="alice", input=secret)
        path = f"{PATH}/demo/secrets/db-credentials.sops.yaml"
        self.stack.wait_for_file(path)
        self.assertNotIn(f"{PATH}/demo/secrets/db-credentials.yaml", self.stack.files())
        # Never in plaintext, in any version of any file.
        history = self.stack.git("log", "-p", "--all")
        self.assertNotIn(plaintext, history)
        self.assertNotIn(encoded, history)
        # The bootstrap .sops.yaml names the recipient and the reference's rules.
        rules = self.stack.show(f"{PATH}/.sops.yaml")
        self.assertIn(self.age_recipient, rules)
        self.assertIn("encrypted_regex", rules)
        self.assertIn("^(data|stringData)$", rules)
        # The file is SOPS: the age CLI unwraps its data key with our identity, and that key
        # opens data.password (AES-256-GCM, AAD "data:password:") when `cryptography` is here.
        import yaml
        document = yaml.safe_load(self.stack.show(path))
        self.assertEqual(document["metadata"]["name"], "db-credentials")
        stanza = document["sops"]["age"][0]
        self.assertEqual(stanza["recipient"], self.age_recipient)
        data_key = local_stack.subprocess.run(["age", "-d", "-i", self.age_key], input=stanza["enc"].encode(),
                                              capture_output=True, check=True).stdout
        self.assertEqual(len(data_key), 32)
        value = document["data"]["password"]
        match = re.fullmatch(r"ENC\[AES256_GCM,data:([^,]*),iv:([^,]*),tag:([^,]*),type:str\]", value)
        self.assertIsNotNone(match, value)
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:
            return
        data, iv, tag = (base64.b64decode(g) for g in match.groups())
        opened = AESGCM(data_key).decrypt(iv, data + tag, b"data:password:")
        self.assertEqual(opened.decode(), encoded)

    def test_25_a_fact_arriving_after_the_grace_never_rewrites_the_commit(self):
        path = f"{PATH}/demo/configmaps/late-fact.yaml"
        # The audit pipeline runs late: alice's fact is held until her change shipped.
        self.stack.sim("POST", "/_sim/audit", {"hold": True})
        try:
            self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("late-fact"))
            self.stack.wait_for_file(path)
        finally:
            self.stack.sim("POST", "/_sim/audit", {"hold": False})
        shipped = self.stack.git("log", "--format=%H|%an|%cn|%s", "main", "--", path).splitlines()
        self.assertEqual(len(shipped), 1, shipped)
        self.assertEqual(shipped[0].split("|")[1:], ["GitOps Reverser", "GitOps Reverser",
                                                     "[CREATE] v1/configmaps/late-fact"])
        # The late fact arrives and is stored ...
        uid = json.loads(self.stack.kubectl("get", "configmap", "late-fact", "-n", "demo", "-o", "json").stdout)["metadata"]["uid"]
        fact = f"reverser:author:v1:audit:configmaps:object:{uid}:last"
        local_stack.wait_until(lambda: local_stack.run(self.stack.redis_cli_argv("EXISTS",
                                                        fact)).stdout.strip() == "1", 30, "the late author fact")
        # ... and changes nothing: the next change lands on top of the same history.
        head = self.stack.head()
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("marker-25"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/marker-25.yaml")
        self.assertEqual(self.stack.git("log", "--format=%an|%s", f"{head}..main").splitlines(),
                         ["alice@example.com|[CREATE] v1/configmaps/marker-25"])
        self.assertEqual(self.stack.git("log", "--format=%H|%an|%cn|%s", "main", "--", path).splitlines(), shipped)

    def test_26b_a_removal_without_its_own_fact_is_never_credited_to_the_last_writer(self):
        # alice created the object (her fact is its last writer's); bob's delete reaches Redis
        # only after the grace: the removal is the committer's, not alice's.
        path = f"{PATH}/demo/configmaps/orphaned.yaml"
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("orphaned"))
        self.stack.wait_for_file(path)
        self.assertEqual(self.stack.git("log", "-1", "--format=%an", "main", "--", path).strip(), "alice@example.com")
        self.stack.sim("POST", "/_sim/audit", {"hold": True})
        try:
            self.stack.kubectl("delete", "configmap", "orphaned", "-n", "demo", user="bob")
            self.stack.wait_for_absent(path)
        finally:
            self.stack.sim("POST", "/_sim/audit", {"hold": False})
        removal = self.stack.git("log", "-1", "--format=%an|%s", "main", "--", path).strip()
        self.assertEqual(removal, "GitOps Reverser|[DELETE] v1/configmaps/orphaned")

    def target_condition(self, name, kind):
        """The condition `kind` of GitTarget demo/`name` ({} until it is written)."""
        out = self.stack.kubectl("get", "gittarget", name, "-n", "demo", "-o", "json", check=False)
        if out.returncode != 0:
            return {}
        for condition in json.loads(out.stdout).get("status", {}).get("conditions", []):
            if condition.get("type") == kind:
                return condition
        return {}

    def test_28_every_accepted_name_is_mirrored_and_unwritable_objects_are_reported(self):
        import hashlib
        import yaml
        # RBAC names may hold any character but "/" and "%", at any length: a backslash, a control
        # character, a name that would pass for an encrypted file, one longer than a file name.
        base = f"{PATH}/_cluster/rbac.authorization.k8s.io/clusterroles"
        long_name = "e2e-long-" + "x" * 291
        files = {"e2e\\back": f"{base}/e2e%5Cback.yaml",
                 "e2e\tctl": f"{base}/e2e%09ctl.yaml",
                 "e2e.sops": f"{base}/e2e%2Esops.yaml",
                 long_name: f"{base}/{long_name[:232]}%-{hashlib.sha256(long_name.encode()).hexdigest()[:16]}.yaml"}

        def role(name, verbs):
            return json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                               "metadata": {"name": name},
                               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})

        def named(name, verb=None):
            def check(text):
                document = yaml.safe_load(text)
                return document["metadata"]["name"] == name and (verb is None or verb in document["rules"][0]["verbs"])
            return check

        for name in files:
            self.stack.kubectl("apply", "-f", "-", user="alice", input=role(name, ["get"]))
        for name, path in files.items():
            self.stack.wait_for_file(path, named(name))
        # Found again by identity: an update edits the same file, a delete removes it.
        self.stack.kubectl("apply", "-f", "-", user="bob", input=role(long_name, ["get", "list"]))
        self.stack.wait_for_file(files[long_name], named(long_name, "list"))
        self.stack.kubectl("delete", "clusterrole", "e2e\tctl", user="bob")
        self.stack.wait_for_absent(files["e2e\tctl"])
        present = set(self.stack.files())
        self.assertEqual({name for name, path in files.items() if path in present},
                         {"e2e\\back", "e2e.sops", long_name})

        # A second target without encryption follows Secrets: they can never be written there.
        plain = [
            {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
             "metadata": {"name": "plain", "namespace": "demo"},
             "spec": {"providerRef": {"name": "local"}, "branch": "main", "path": "clusters/e2e-plain"}},
            {"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
             "metadata": {"name": "plain-secrets", "namespace": "demo"},
             "spec": {"targetRef": {"name": "plain"},
                      "rules": [{"operations": ["*"], "apiGroups": [""], "resources": ["secrets"]}]}}]
        self.stack.kubectl("apply", "--validate=false", "-f", "-",
                           input=json.dumps({"apiVersion": "v1", "kind": "List", "items": plain}))
        try:
            self.stack.kubectl("apply", "-f", "-", user="alice", input=json.dumps(
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "plain-secret", "namespace": "demo"},
                 "data": {"k": base64.b64encode(b"never-in-git").decode()}}))
            local_stack.wait_until(lambda: "Secret demo/plain-secret: EncryptionUnavailable" in
                                   self.target_condition("plain", "Stalled").get("message", ""),
                                   60, "the refusal on GitTarget plain's status", poll=0.2)
            stalled = self.target_condition("plain", "Stalled")
            self.assertEqual((stalled["status"], stalled["reason"]), ("True", "ObjectRefused"), stalled)
            self.assertEqual(self.target_condition("plain", "Ready")["status"], "False")
            self.assertEqual(self.target_condition("plain", "GitPathAccepted")["status"], "True")
            self.assertRegex(stalled["message"], r"^\d+ object\(s\) refused: ")
            self.assertFalse([f for f in self.stack.files() if f.startswith("clusters/e2e-plain/")])
            self.assertNotIn("never-in-git", self.stack.git("log", "-p", "--all"))
            # The refusal is logged naming the object, and counted.
            self.assertTrue(any('"msg":"refused"' in line and '"name":"plain-secret"' in line
                                and '"reason":"EncryptionUnavailable"' in line
                                for line in self.stack.logs("gitworker").splitlines()))
            self.assertGreaterEqual(metric_sum(self.stack.metrics("gitworker"), "reverser_gitworker_refusals_total",
                                               reason="EncryptionUnavailable"), 1)
            # The encrypted target mirrors the same Secret and stays clear of refusals.
            self.stack.wait_for_file(f"{PATH}/demo/secrets/plain-secret.sops.yaml")
            self.assertNotEqual(self.target_condition("mirror", "Ready").get("reason"), "ObjectRefused")
            # Once the object is gone, its refusal clears.
            self.stack.kubectl("delete", "secret", "plain-secret", "-n", "demo", user="alice")
            local_stack.wait_until(lambda: self.target_condition("plain", "Ready").get("status") == "True" or
                                   "plain-secret" not in self.target_condition("plain", "Ready").get("message", ""),
                                   60, "the refusal to clear", poll=0.2)
        finally:
            self.stack.kubectl("delete", "watchrule", "plain-secrets", "-n", "demo", check=False)
            self.stack.kubectl("delete", "gittarget", "plain", "-n", "demo", check=False)

    def test_30_a_hand_pushed_duplicate_refuses_the_path_until_it_is_removed(self):
        # The acceptance gate (docs/behaviour.md): a person pushes a second document of a mirrored
        # object; the next write is refused as a whole and the GitTarget says why; once the person
        # removes it, the held write lands.
        managed = f"{PATH}/demo/configmaps/gate-a.yaml"
        duplicate = f"{PATH}/hand/gate-a-copy.yaml"
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("gate-a", data={"v": "one"}))
        self.stack.wait_for_file(managed, lambda text: "one" in text)
        hand_commit(self.stack, {duplicate: self.file("demo/configmaps/gate-a.yaml")}, "hand duplicate of gate-a")
        try:
            self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("gate-a", data={"v": "two"}))
            expected = (f"Git path refused at {PATH}: duplicate: ConfigMap demo/gate-a in {managed} "
                        f"and {duplicate}")
            accepted = local_stack.wait_until(
                lambda: (lambda c: c if c.get("status") == "False" else None)(
                    self.target_condition("mirror", "GitPathAccepted")),
                60, "GitPathAccepted=False on GitTarget mirror", poll=0.2)
            self.assertEqual(accepted["reason"], "UnsupportedContent", accepted)
            self.assertTrue(accepted["message"].startswith(expected), accepted)
            stalled = self.target_condition("mirror", "Stalled")
            self.assertEqual((stalled["status"], stalled["reason"]), ("True", "UnsupportedContent"), stalled)
            self.assertEqual(self.target_condition("mirror", "Ready")["status"], "False")
            # The refusal was reported by the gate that held the write: nothing of it is in Git.
            self.assertIn("one", self.file("demo/configmaps/gate-a.yaml"))
            self.assertGreaterEqual(metric_sum(self.stack.metrics("gitworker"), "reverser_gitworker_path_refusals_total",
                                               kind="duplicate"), 1)
            self.assertTrue(any('"msg":"git path refused; its writes wait"' in line
                                for line in self.stack.logs("gitworker").splitlines()))
        finally:
            hand_commit(self.stack, {duplicate: None}, "remove the duplicate of gate-a")
        # The held write lands on the fixed branch, and the path is accepted again.
        self.stack.wait_for_file(managed, lambda text: "two" in text, timeout=60)
        self.assertNotIn(duplicate, self.stack.files())
        local_stack.wait_until(lambda: self.target_condition("mirror", "GitPathAccepted").get("status") == "True",
                               60, "GitPathAccepted=True again", poll=0.2)
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("gate-b"))
        self.stack.wait_for_file(f"{PATH}/demo/configmaps/gate-b.yaml")

    def test_29_the_mesh_speaks_mutual_tls_and_each_call_needs_its_role(self):
        # The operator's certificate (reverser-admin) reaches every service's admin API.
        health = local_stack.run(self.stack.reverserctl_argv("health", "-o", "json"))
        self.assertEqual({s: v["status"] for s, v in json.loads(health.stdout).items()},
                         {s: "SERVING" for s in ("catalog", "materializer", "splicer", "gitworker")})
        # A service's own certificate is not an operator's: the gitworker's admin API refuses it.
        pki = self.stack.pki
        as_materializer = [self.stack._binary("tools/reverserctl/reverserctl"),
                           f"--endpoints_dir={self.stack.dir}", f"--grpc_tls_ca={pki}/ca.crt",
                           f"--grpc_tls_cert={pki}/grpc-materializer.crt",
                           f"--grpc_tls_key={pki}/grpc-materializer.key", "branches"]
        denied = local_stack.run(as_materializer, check=False)
        self.assertEqual(denied.returncode, 1, denied.stderr)
        self.assertIn("PERMISSION_DENIED", denied.stderr)
        self.assertIn("reverser-admin", denied.stderr)
        # The services' certificates are checked against the name given instead of the host dialed.
        named = local_stack.run(self.stack.reverserctl_argv("--grpc_tls_server_name=localhost", "status", "splicer"),
                                check=False)
        self.assertEqual(named.returncode, 0, named.stderr)
        stranger = local_stack.run(self.stack.reverserctl_argv("--grpc_tls_server_name=not-in-the-certificate",
                                                               "status", "splicer"), check=False)
        self.assertEqual(stranger.returncode, 1, stranger.stdout)
        self.assertIn("UNAVAILABLE", stranger.stderr)
        for service in ("catalog", "materializer", "splicer", "gitworker"):
            # Plaintext does not get in at all.
            plain = local_stack.run([self.stack._binary("tools/reverserctl/reverserctl"), "--grpc_insecure",
                                     f"--endpoints_dir={self.stack.dir}", "status", service], check=False)
            self.assertEqual(plain.returncode, 1, plain.stdout)
            self.assertIn("UNAVAILABLE", plain.stderr)
            # The admin certificate alone is not enough: each service has the bearer token reviewed
            # by the API server, and a token it does not know is refused.
            forged = local_stack.run(self.stack.reverserctl_argv("--token=forged-token", "status", service),
                                     check=False)
            self.assertEqual(forged.returncode, 1, forged.stdout)
            self.assertIn("UNAUTHENTICATED", forged.stderr)
            self.assertIn("not valid", forged.stderr)
            self.assertNotIn("forged-token", self.stack.logs(service))
            # The kubeconfig's user (admin) is known and allowed.
            allowed = local_stack.run(self.stack.reverserctl_argv("status", service), check=False)
            self.assertEqual(allowed.returncode, 0, allowed.stderr)

    def test_zz_every_service_exposes_the_reference_metrics(self):
        expected = {
            "catalog": ["gitopsreverser_api_catalog_resources", "gitopsreverser_api_catalog_group_versions",
                        "gitopsreverser_api_catalog_generation", "gitopsreverser_api_catalog_refresh_total",
                        "gitopsreverser_api_catalog_refresh_duration_seconds", "gitopsreverser_watched_types"],
            "materializer": ["gitopsreverser_audit_events_total", "gitopsreverser_audit_eventlists_total",
                             "gitopsreverser_audit_eventlist_events_total",
                             "gitopsreverser_audit_eventlist_duration_seconds",
                             "gitopsreverser_attribution_fact_events_total",
                             "gitopsreverser_attribution_fact_index_size",
                             "reverser_materializer_stream_appends_total"],
            "splicer": ["gitopsreverser_attribution_resolutions_total",
                        "gitopsreverser_attribution_resolution_wait_seconds",
                        "gitopsreverser_attribution_fact_events_total", "reverser_splicer_streams"],
            "gitworker": ["gitopsreverser_commits_total", "gitopsreverser_objects_written_total",
                          "gitopsreverser_git_operations_total", "gitopsreverser_branch_worker_queue_depth",
                          "gitopsreverser_target_reconcile_completed_total"],
        }
        for service, names in expected.items():
            text = self.stack.metrics(service)
            for name in names:
                self.assertIn(f"# TYPE {name} ", text, f"{service} /metrics lacks {name}")


class StackCase(unittest.TestCase):
    """A class-wide stack with the given options; tests use their own objects."""

    stack = None
    stack_options = {}

    @classmethod
    def start_stack(cls):
        cls.stack = local_stack.Stack(ROOT, ROOT, log=lambda *_: None, **cls.stack_options)
        cls.stack.start_then(cls.prepare)

    @classmethod
    def setUpClass(cls):
        cls.start_stack()

    @classmethod
    def tearDownClass(cls):
        if cls.stack:
            cls.stack.cleanup()


LEGACY_PATH = "clusters/legacy"


class E2ELegacyServer(StackCase):
    """Against an API server without WatchList (kube-sim's legacy profile, 1.27-1.33 behaviour)."""

    stack_options = {"profile": "legacy", "commit_window": "0s", "push_cooldown": "0s"}

    @classmethod
    def prepare(cls):
        cls.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("legacy-pre", data={"born": "before-rule"}))
        cls.stack.apply_mirror(LEGACY_PATH, rules=[{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}])
        cls.stack.wait_for_streams(1)

    def test_07_rejected_send_initial_events_falls_back_to_list(self):
        requests = self.stack.sim("GET", "/_sim/requests")["requests"]
        collection = "GET /api/v1/namespaces/demo/configmaps?"
        # The WatchList request was made (and answered 422), then a plain LIST served the set.
        self.assertTrue(any(r.startswith(collection) and "sendInitialEvents=true" in r for r in requests), requests)
        self.assertTrue(any(r.startswith(collection) and "watch=" not in r for r in requests), requests)
        # One resync at the LIST's resourceVersion brought the existing object ...
        pre = f"{LEGACY_PATH}/demo/configmaps/legacy-pre.yaml"
        self.stack.wait_for_file(pre)
        rv = int(json.loads(self.stack.kubectl("get", "configmap", "legacy-pre", "-n", "demo", "-o", "json").stdout)
                 ["metadata"]["resourceVersion"])
        history = self.stack.git("log", "--format=%an|%s", "main", "--", pre).splitlines()
        self.assertEqual(len(history), 1, history)
        match = re.fullmatch(r"GitOps Reverser\|reconciled 1 configmaps \(last resourceVersion: (\d+)\)", history[0])
        self.assertIsNotNone(match, history)
        self.assertGreaterEqual(int(match.group(1)), rv)
        # ... and the watch from there delivers live changes, attributed, once each.
        head = self.stack.head()
        self.stack.kubectl("apply", "-f", "-", user="bob", input=configmap("legacy-live"))
        self.stack.wait_for_file(f"{LEGACY_PATH}/demo/configmaps/legacy-live.yaml")
        self.assertEqual(self.stack.git("log", "--format=%an|%s", f"{head}..main").splitlines(),
                         ["bob@example.com|[CREATE] v1/configmaps/legacy-live"])


WINDOW_PATH = "clusters/windowed"


class E2ECommitWindowAndCooldown(StackCase):
    """A GitProvider with a long commit window and a gitworker with a push cooldown. Windows are
    closed by an author change or the buffer limit, never by waiting for the timer."""

    COOLDOWN_S = 3
    stack_options = {"commit_window": "90s", "push_cooldown": f"{COOLDOWN_S}s"}

    @classmethod
    def prepare(cls):
        for name in ("win-pre-a", "win-pre-b"):
            cls.stack.kubectl("apply", "-f", "-", user="alice", input=configmap(name))
        cls.stack.apply_mirror(WINDOW_PATH, rules=[{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}])
        cls.stack.wait_for_streams(1)
        cls.stack.wait_for_file(f"{WINDOW_PATH}/demo/configmaps/win-pre-b.yaml")

    def path(self, name):
        return f"{WINDOW_PATH}/demo/configmaps/{name}.yaml"

    def subject_of(self, name):
        return self.stack.git("log", "--format=%an|%s", "main", "--", self.path(name)).splitlines()

    def test_18a_resync_subject_names_count_resource_and_resourceversion(self):
        rvs = [int(json.loads(self.stack.kubectl("get", "configmap", n, "-n", "demo", "-o", "json").stdout)
                   ["metadata"]["resourceVersion"]) for n in ("win-pre-a", "win-pre-b")]
        history = self.subject_of("win-pre-a")
        self.assertEqual(len(history), 1, history)
        match = re.fullmatch(r"GitOps Reverser\|reconciled 2 configmaps \(last resourceVersion: (\d+)\)", history[0])
        self.assertIsNotNone(match, history)
        self.assertGreaterEqual(int(match.group(1)), max(rvs))
        self.assertLessEqual(int(match.group(1)), int(self.stack.sim("GET", "/_sim/state")["resourceVersion"]))

    def test_18b_grouped_commit_subject(self):
        # alice's two changes share her open window; bob's change closes it.
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("grp-1"))
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("grp-2"))
        self.stack.kubectl("apply", "-f", "-", user="bob", input=configmap("grp-3"))
        self.stack.wait_for_file(self.path("grp-2"), timeout=45)
        self.assertEqual(self.subject_of("grp-1"), ["alice@example.com|alice@example.com on mirror: 2 resource(s)"])
        self.assertEqual(self.subject_of("grp-2"), self.subject_of("grp-1"))

    def commit_request(self, name, message, user, close_delay=0):
        """`user` creates a CommitRequest on the mirror and waits for its terminal status."""
        self.create_commit_request(name, message, user, close_delay)
        return self.wait_for_commit_request(name, lambda reason: reason not in ("", "WaitingForCloseDelay"))

    def create_commit_request(self, name, message, user, close_delay=0):
        self.stack.kubectl("apply", "-f", "-", user=user, input=json.dumps(
            {"apiVersion": "configbutler.ai/v1alpha3", "kind": "CommitRequest",
             "metadata": {"name": name, "namespace": "demo"},
             "spec": {"targetRef": {"name": "mirror"}, "message": message,
                      "closeDelaySeconds": close_delay}}))

    def wait_for_commit_request(self, name, ready_reason_matches):
        """Until the request's Ready reason matches; returns (status, conditions by type)."""
        def matched():
            got = json.loads(self.stack.kubectl("get", "commitrequest", name, "-n", "demo", "-o", "json").stdout)
            conditions = {c["type"]: c for c in got.get("status", {}).get("conditions", [])}
            return got if "Ready" in conditions and ready_reason_matches(conditions["Ready"]["reason"]) else None
        got = local_stack.wait_until(matched, 60, f"CommitRequest {name}")
        return got["status"], {c["type"]: c for c in got["status"]["conditions"]}

    def wait_for_deliveries(self, before, count):
        """Until the gitworker received `count` more event deliveries than `before`: the
        changes are in its windows (a CommitRequest sent after them is queued behind them)."""
        local_stack.wait_until(lambda: self.delivered_events() >= before + count, 30, f"{count} deliveries")

    def delivered_events(self):
        return metric_sum(self.stack.metrics("gitworker"), "reverser_gitworker_delivery_messages_total", kind="event")

    def test_28_commit_request_saves_the_authors_window_with_its_message(self):
        # UC1, the "save button": alice edits, then asks for a commit now (closeDelay 0).
        before = self.delivered_events()
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("save-a", data={"banner": "hello"}))
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("save-b", data={"banner": "world"}))
        self.wait_for_deliveries(before, 2)
        status, conditions = self.commit_request("save-now", "Save: new banner text", user="alice")
        self.assertEqual((conditions["Ready"]["status"], conditions["Ready"]["reason"]), ("True", "Committed"), status)
        self.assertEqual(conditions["Pushed"]["status"], "True")
        self.assertEqual((conditions["AuthorAttributed"]["status"], conditions["AuthorAttributed"]["reason"]),
                         ("True", "AttributedFromAdmission"))
        self.assertEqual(status["branch"], "main")
        # One commit with both changes, the request's message verbatim, authored by alice.
        sha = status["sha"]
        self.assertEqual(self.stack.git("log", "-1", "--format=%an|%s", sha).strip(),
                         "alice@example.com|Save: new banner text")
        changed = self.stack.git("show", "--format=", "--name-only", sha).split()
        self.assertEqual(sorted(changed), [self.path("save-a"), self.path("save-b")])
        self.assertIn(sha, [p[1] for p in self.stack.pushes()], "status.sha is a pushed commit")

    def test_28b_a_catalog_restart_mid_request_takes_it_up_again(self):
        before = self.delivered_events()
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("restart-save"))
        self.wait_for_deliveries(before, 1)
        self.create_commit_request("save-across-restart", "Save: across a restart", user="alice", close_delay=3)
        status, _ = self.wait_for_commit_request("save-across-restart", lambda r: r == "WaitingForCloseDelay")
        # The controller is killed with the request in progress; a new one finds it unfinished.
        self.stack.kill("catalog")
        self.stack.start_service("catalog")
        status, conditions = self.wait_for_commit_request("save-across-restart", lambda r: r != "WaitingForCloseDelay")
        self.assertEqual(conditions["Ready"]["reason"], "Committed", status)
        self.assertEqual(self.stack.git("log", "-1", "--format=%an|%s", status["sha"]).strip(),
                         "alice@example.com|Save: across a restart")
        self.assertEqual(self.stack.git("show", "--format=", "--name-only", status["sha"]).split(),
                         [self.path("restart-save")])

    def test_28c_a_bundle_applied_with_its_commit_request_is_one_commit(self):
        # UC2: `kubectl apply -f bundle/` of three objects and a CommitRequest with a close
        # delay. The request may reach the gitworker before the objects do: it waits for alice's
        # window to open and binds to it; the delay (from its receipt) collects the bundle.
        bundle = os.path.join(self.stack.dir, "bundle")
        os.makedirs(bundle)
        for i in range(3):
            with open(os.path.join(bundle, f"{i}-configmap.json"), "w") as f:
                f.write(configmap(f"bundle-{i}", data={"part": str(i)}))
        with open(os.path.join(bundle, "9-commitrequest.json"), "w") as f:
            json.dump({"apiVersion": "configbutler.ai/v1alpha3", "kind": "CommitRequest",
                       "metadata": {"name": "release-bundle", "namespace": "demo"},
                       "spec": {"targetRef": {"name": "mirror"}, "message": "Release: the bundle",
                                "closeDelaySeconds": 10}}, f)
        self.stack.kubectl("apply", "-f", bundle, user="alice")
        status, conditions = self.wait_for_commit_request("release-bundle", lambda r: r != "WaitingForCloseDelay")
        self.assertEqual(conditions["Ready"]["reason"], "Committed", status)
        self.assertEqual(self.stack.git("log", "-1", "--format=%an|%s", status["sha"]).strip(),
                         "alice@example.com|Release: the bundle")
        self.assertEqual(sorted(self.stack.git("show", "--format=", "--name-only", status["sha"]).split()),
                         [self.path(f"bundle-{i}") for i in range(3)])

    def test_28d_reverserctl_commit_saves_as_the_kubeconfig_user(self):
        before = self.delivered_events()
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("ctl-save"))
        self.wait_for_deliveries(before, 1)
        alice = os.path.join(self.stack.dir, "kubeconfig-alice")
        self.stack._write_kubeconfig(alice, "alice-token")
        out = local_stack.run(self.stack.reverserctl_argv("commit", "demo/mirror", "-m", "Save: from reverserctl",
                                                          kubeconfig=alice))
        match = re.fullmatch(r"commitrequest demo/(\S+): Committed ([0-9a-f]{40}) on main", out.stdout.strip())
        self.assertIsNotNone(match, out.stdout)
        self.assertEqual(self.stack.git("log", "-1", "--format=%an|%s", match.group(2)).strip(),
                         "alice@example.com|Save: from reverserctl")
        self.assertEqual(self.stack.git("show", "--format=", "--name-only", match.group(2)).split(),
                         [self.path("ctl-save")])

    def test_28e_a_window_that_changes_nothing_is_already_present(self):
        # alice changes an object and changes it back inside her window: nothing to commit.
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("round-trip", data={"k": "v"}))
        self.create_commit_request("save-round-trip-base", "Save: base", user="alice")
        self.wait_for_commit_request("save-round-trip-base", lambda r: r == "Committed")
        head = self.stack.head()
        before = self.delivered_events()
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("round-trip", data={"k": "changed"}))
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("round-trip", data={"k": "v"}))
        self.wait_for_deliveries(before, 2)
        status, conditions = self.commit_request("save-round-trip", "Save: nothing changed", user="alice")
        self.assertEqual((conditions["Ready"]["status"], conditions["Ready"]["reason"]), ("True", "AlreadyPresent"), status)
        self.assertEqual(conditions["Pushed"]["status"], "False")
        self.assertNotIn("sha", status)
        self.assertEqual(self.stack.head(), head, "no commit was made")

    def test_29_commit_request_without_a_window_in_grace_leaves_others_alone(self):
        # alice has a window open; bob asks for a commit but has none.
        before = self.delivered_events()
        self.stack.kubectl("apply", "-f", "-", user="alice", input=configmap("still-open"))
        self.wait_for_deliveries(before, 1)
        status, conditions = self.commit_request("bob-saves", "Save: nothing of mine", user="bob")
        self.assertEqual((conditions["Ready"]["status"], conditions["Ready"]["reason"]),
                         ("True", "NoWindowInGrace"), status)
        self.assertEqual(conditions["Pushed"]["status"], "False")
        self.assertNotIn("sha", status)
        # alice's window is untouched: her change waits for her own window to close.
        self.assertNotIn(self.path("still-open"), self.stack.files())
        self.assertNotIn("Save: nothing of mine", self.stack.git("log", "--format=%s", "main"))

    def test_20a_successful_pushes_are_at_least_the_cooldown_apart(self):
        # Author changes close windows (grp-3's too); each commit is pushed as the cooldown
        # allows. bob's last window stays open for the next test.
        for i, user in enumerate(["alice", "bob", "alice", "bob"]):
            self.stack.kubectl("apply", "-f", "-", user=user, input=configmap(f"cool-{i}"))
        self.stack.wait_for_file(self.path("cool-2"), timeout=60)
        pushes = [p for p in self.stack.pushes()[1:]]  # after the seed commit
        self.assertGreaterEqual(len(pushes), 3, pushes)
        # Reflog times have one-second resolution: pushes >= 3 s apart differ by >= 2 there.
        gaps = [b[0] - a[0] for a, b in zip(pushes, pushes[1:])]
        self.assertTrue(all(g >= self.COOLDOWN_S - 1 for g in gaps), gaps)
        # Nothing was lost by the pacing.
        for i in range(3):
            self.assertIn(self.path(f"cool-{i}"), self.stack.files())

    def test_20b_a_buffer_of_8_mib_finalizes_the_window_at_once(self):
        # bob's window from the test before is open; alice's first change closes it. Nine
        # ConfigMaps of ~0.95 MB each cross 8 MiB with the ninth: the window must finalize then,
        # long before its 90 s timer (the wait below gives up after 45 s).
        blob = "x" * 950_000
        for i in range(9):
            self.stack.kubectl("create", "-f", "-", user="alice", input=configmap(f"big-{i}", data={"blob": blob}))
        self.stack.wait_for_file(self.path("big-8"), timeout=45)
        self.assertEqual(self.subject_of("big-0"), ["alice@example.com|alice@example.com on mirror: 9 resource(s)"])
        self.assertEqual(self.subject_of("big-8"), self.subject_of("big-0"))
        self.assertGreaterEqual(metric_sum(self.stack.metrics("gitworker"), "reverser_gitworker_windows_finalized_total",
                                           reason="buffer-limit"), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
