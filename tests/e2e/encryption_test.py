#!/usr/bin/env python3
"""Age keys from the GitTarget's encryption Secret (docs/behaviour.md, Sensitive resources and
encryption), through the whole stack: the reference quickstart's GitTarget (provider sops,
secretRef sops-age-key, age enabled, recipients extracted from the Secret and generated when
missing) gets its key Secret created by the catalog, with the date-named entry and the backup
annotations; a Secret is mirrored encrypted to that key and opens with the generated identity
(age CLI for the data key, AES-256-GCM for the values); the backup warning is logged once per
read of the Secret, not per event, while the annotation remains."""
import base64
import datetime
import json
import os
import re
import signal
import sys
import unittest

ROOT = os.environ.get("REVERSER_RUNFILES") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "deploy", "local"))
import stack as local_stack  # noqa: E402

PATH = "live-cluster"
NS = "demo"
BACKUP_WARNING = "ENCRYPTION KEY BACKUP REQUIRED"


def entry_name(day):
    """The reference's `%04d%02d%d.agekey`: the day is not zero-padded."""
    return "%04d%02d%d.agekey" % (day.year, day.month, day.day)


def quickstart(remote, commit_window):
    """The reference chart's quickstart objects (names, branch, path, encryption), in namespace
    demo, plus a WatchRule for Secrets so the encryption is exercised."""
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider",
         "metadata": {"name": "example-provider", "namespace": NS},
         "spec": {"url": f"file://{remote}", "allowedBranches": ["*"],
                  "push": {"commitWindow": commit_window}}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
         "metadata": {"name": "example-target", "namespace": NS},
         "spec": {"providerRef": {"name": "example-provider"}, "branch": "main", "path": PATH,
                  "encryption": {"provider": "sops",
                                 "age": {"enabled": True,
                                         "recipients": {"extractFromSecret": True,
                                                        "generateWhenMissing": True}},
                                 "secretRef": {"name": "sops-age-key"}}}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
         "metadata": {"name": "example-watchrule", "namespace": NS},
         "spec": {"targetRef": {"name": "example-target"},
                  "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""],
                             "apiVersions": ["v1"], "resources": ["configmaps"]}]}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
         "metadata": {"name": "example-secrets", "namespace": NS},
         "spec": {"targetRef": {"name": "example-target"},
                  "rules": [{"operations": ["*"], "apiGroups": [""], "resources": ["secrets"]}]}},
    ]}


class QuickstartEncryption(unittest.TestCase):
    def setUp(self):
        self.stack = local_stack.Stack(ROOT, ROOT, commit_window="0s", push_cooldown="0s",
                                       attribution_grace="1s", log=lambda *_: None)
        try:
            self.stack.start()
        except Exception:
            self.stack.cleanup()
            raise

    def tearDown(self):
        self.stack.cleanup()

    def run_logged(self, body):
        """Runs `body`; on failure prints the tail of every service's log."""
        try:
            body()
        except BaseException:
            self.stack.print_log_tails()
            raise

    def get(self, *args):
        return json.loads(self.stack.kubectl("get", *args, "-n", NS, "-o", "json").stdout)

    def condition(self, kind, name, type_):
        obj = self.get(kind, name)
        for c in obj.get("status", {}).get("conditions", []):
            if c["type"] == type_:
                return c
        return None

    def wait_condition(self, kind, name, type_, status, reason, timeout=30):
        def holds():
            c = self.condition(kind, name, type_)
            return c is not None and c["status"] == status and c["reason"] == reason
        local_stack.wait_until(holds, timeout, f"{kind} {name} {type_}={status} ({reason})", poll=0.1)

    def everything_in_redis(self):
        """Every value of every key, as Redis holds it."""
        out = []
        keys = self.stack.redis_cli("--scan").stdout.split()
        for key in keys:
            kind = self.stack.redis_cli("TYPE", key).stdout.strip()
            read = {"string": ["GET", key], "hash": ["HGETALL", key], "stream": ["XRANGE", key, "-", "+"],
                    "set": ["SMEMBERS", key], "zset": ["ZRANGE", key, "0", "-1"],
                    "list": ["LRANGE", key, "0", "-1"]}.get(kind)
            out.append(key)
            if read:
                out.append(self.stack.redis_cli(*read).stdout)
        return "\n".join(out)

    def backup_warnings(self):
        return self.stack.logs("catalog").count(BACKUP_WARNING)

    def reads_ok(self):
        total = 0.0
        for line in self.stack.metrics("catalog").splitlines():
            if line.startswith('reverser_catalog_encryption_secret_reads_total{outcome="ok"} '):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def test_quickstart_target_generates_its_key_and_mirrors_secrets_encrypted(self):
        self.run_logged(self.quickstart_story)

    def quickstart_story(self):
        stack = self.stack
        before = datetime.datetime.now(datetime.timezone.utc).date()
        stack.kubectl("apply", "--validate=false", "-f", "-",
                      input=json.dumps(quickstart(stack.remote, stack.commit_window)))
        self.wait_condition("gittarget", "example-target", "EncryptionConfigured", "True", "OK")
        after = datetime.datetime.now(datetime.timezone.utc).date()

        # The generated Secret: one date-named entry, the recipient and the backup warning.
        key_secret = self.get("secret", "sops-age-key")
        self.assertEqual(key_secret["type"], "Opaque")
        entries = list(key_secret["data"])
        self.assertEqual(len(entries), 1, entries)
        self.assertIn(entries[0], {entry_name(before), entry_name(after)})
        annotations = key_secret["metadata"]["annotations"]
        self.assertEqual(annotations["configbutler.ai/backup-warning"], "REMOVE_AFTER_BACKUP")
        recipient = annotations["configbutler.ai/age-recipient"]
        identity = base64.b64decode(key_secret["data"][entries[0]]).decode()
        self.assertTrue(identity.startswith("AGE-SECRET-KEY-1"), identity[:16])
        identity_file = os.path.join(stack.dir, "generated.agekey")
        with open(identity_file, "w") as f:
            f.write(identity + "\n")
        derived = local_stack.run(["age-keygen", "-y", identity_file]).stdout.strip()
        self.assertEqual(derived, recipient)
        self.assertIn("Generated missing encryption secret", stack.logs("catalog"))
        self.assertNotIn(identity, stack.logs("catalog"))

        # A Secret is mirrored encrypted to the generated key, never in plaintext.
        stack.wait_for_streams(2)  # configmaps and secrets of example-target
        password = "quickstart-s3cr3t"
        data = {"password": base64.b64encode(password.encode()).decode(),
                "username": base64.b64encode(b"admin").decode()}
        stack.kubectl("apply", "-f", "-", user="alice", input=json.dumps(
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": "db-credentials", "namespace": NS}, "data": data}))
        path = f"{PATH}/{NS}/secrets/db-credentials.sops.yaml"
        stack.wait_for_file(path)
        history = stack.git("log", "-p", "--all")
        for plain in (password, data["password"], identity):
            self.assertNotIn(plain, history)
        self.assertIn(recipient, stack.show(f"{PATH}/.sops.yaml"))
        # The key Secret itself is a Secret of the namespace: mirrored, encrypted too.
        stack.wait_for_file(f"{PATH}/{NS}/secrets/sops-age-key.sops.yaml")

        import yaml
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        document = yaml.safe_load(stack.show(path))
        stanzas = document["sops"]["age"]
        self.assertEqual([s["recipient"] for s in stanzas], [recipient])
        data_key = local_stack.subprocess.run(["age", "-d", "-i", identity_file],
                                              input=stanzas[0]["enc"].encode(),
                                              capture_output=True, check=True).stdout
        self.assertEqual(len(data_key), 32)
        opened = {}
        for key, value in document["data"].items():
            match = re.fullmatch(r"ENC\[AES256_GCM,data:([^,]*),iv:([^,]*),tag:([^,]*),type:str\]", value)
            self.assertIsNotNone(match, value)
            ciphertext, iv, tag = (base64.b64decode(g) for g in match.groups())
            opened[key] = AESGCM(data_key).decrypt(iv, ciphertext + tag, f"data:{key}:".encode()).decode()
        self.assertEqual(opened, self.get("secret", "db-credentials")["data"])

        # Nowhere outside the API server in plaintext: a marker in data, stringData and an
        # annotation shows in no Redis value, no log line and no metric; its data and stringData
        # forms in no Git object (metadata stays readable in a SOPS file, as the reference
        # writes it: encrypted_regex covers data and stringData only).
        marker = "marker-" + base64.b32encode(os.urandom(10)).decode().lower()
        stack.kubectl("apply", "-f", "-", user="alice", input=json.dumps(
            {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": "marked", "namespace": NS, "annotations": {"note": marker}},
             "data": {"d": base64.b64encode(marker.encode()).decode()},
             "stringData": {"s": marker + "-string"}}))
        stack.wait_for_file(f"{PATH}/{NS}/secrets/marked.sops.yaml")
        forms = [marker, base64.b64encode(marker.encode()).decode(),
                 base64.b64encode((marker + "-string").encode()).decode()]
        redis = self.everything_in_redis()
        self.assertIn("rvenc1:", redis)  # the Secrets' materialization is there, sealed
        history = stack.git("log", "-p", "--all")
        objects = local_stack.run(["git", "-C", stack.remote, "cat-file", "--batch-all-objects",
                                   "--batch"], errors="replace").stdout
        for i, form in enumerate(forms):
            self.assertNotIn(form, redis)
            for name in stack.procs:
                self.assertNotIn(form, stack.logs(name), name)
            for service in ("catalog", "materializer", "splicer", "gitworker"):
                self.assertNotIn(form, stack.metrics(service), service)
            if i > 0:  # the base64 forms are what data and stringData hold
                self.assertNotIn(form, history)
                self.assertNotIn(form, objects)

        # The backup warning: logged on each read of the Secret while the annotation remains
        # (a restarted catalog reads it at once), not on every event.
        self.assertEqual(self.backup_warnings(), 0)  # the creating read says "Generated ..."
        stack.kill("catalog", signal.SIGTERM)
        stack.start_service("catalog")
        local_stack.wait_until(lambda: self.backup_warnings() == 1, 30, "the backup warning", poll=0.1)
        for i in range(3):  # events: ConfigMap changes, status writes
            stack.kubectl("apply", "-f", "-", user="bob", input=json.dumps(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": NS},
                 "data": {"v": f"value-{i}"}}))
        stack.wait_for_file(f"{PATH}/{NS}/configmaps/app.yaml", lambda text: "value-2" in text)
        self.assertEqual(self.backup_warnings(), 1)

        # Once backed up, the operator removes the annotation: the next read (here at once, as
        # the encryption spec changes) no longer warns, and the new recipient joins the key's.
        stack.kubectl("annotate", "secret", "sops-age-key", "-n", NS, "configbutler.ai/backup-warning-")
        extra = os.path.join(stack.dir, "extra.agekey")
        local_stack.run(["age-keygen", "-o", extra])
        extra_recipient = local_stack.run(["age-keygen", "-y", extra]).stdout.strip()
        reads = self.reads_ok()
        stack.kubectl("patch", "gittarget", "example-target", "-n", NS, "--type=merge", "-p", json.dumps(
            {"spec": {"encryption": {"age": {"recipients": {"publicKeys": [extra_recipient]}}}}}))
        local_stack.wait_until(lambda: self.reads_ok() > reads, 30, "the Secret read again", poll=0.1)
        self.wait_condition("gittarget", "example-target", "EncryptionConfigured", "True", "OK")
        self.assertEqual(self.backup_warnings(), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
