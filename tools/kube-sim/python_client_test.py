"""Debian's python3-kubernetes (22.6) lists and watches against kube-sim.

Usage: python_client_test.py <url> (the server is started by python_client_test.sh).
"""
import sys
import threading
import unittest
import urllib.request
import json

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

URL = sys.argv.pop(1)


def api():
    cfg = client.Configuration()
    cfg.host = URL
    return client.CoreV1Api(client.ApiClient(cfg))


def admin(path, method="POST"):
    req = urllib.request.Request(URL + path, method=method, data=b"")
    return json.load(urllib.request.urlopen(req))


class PythonClientTest(unittest.TestCase):
    def test_list_create_and_get(self):
        v1 = api()
        v1.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-a"), data={"k": "v"}))
        cms = v1.list_namespaced_config_map("default")
        self.assertIn("py-a", [c.metadata.name for c in cms.items])
        self.assertTrue(cms.metadata.resource_version)
        got = v1.read_namespaced_config_map("py-a", "default")
        self.assertEqual(got.data, {"k": "v"})
        with self.assertRaises(ApiException) as err:
            v1.read_namespaced_config_map("missing", "default")
        self.assertEqual(err.exception.status, 404)
        self.assertEqual(json.loads(err.exception.body)["reason"], "NotFound")

    def test_watch_sees_later_change_and_bookmarks_are_accepted(self):
        v1 = api()
        rv = v1.list_namespaced_config_map("default").metadata.resource_version
        w = watch.Watch()
        events = []
        def writer():
            # The watch request is open once the server counts it.
            for _ in range(500):
                if admin("/_sim/state", "GET")["activeWatches"] >= 1:
                    break
                threading.Event().wait(0.02)
            v1.create_namespaced_config_map(
                "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-w")))
        t = threading.Thread(target=writer)
        t.start()
        # The client sends watch=True&allowWatchBookmarks=True (capital True).
        for event in w.stream(v1.list_namespaced_config_map, "default", resource_version=rv,
                              allow_watch_bookmarks=True, timeout_seconds=30):
            events.append((event["type"], event["object"].metadata.name))
            if event["object"].metadata.name == "py-w":
                w.stop()
        t.join()
        self.assertEqual(events[-1], ("ADDED", "py-w"))

    def test_watch_from_compacted_rv_raises_410(self):
        v1 = api()
        rv = v1.list_namespaced_config_map("default").metadata.resource_version
        v1.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py-old")))
        admin("/_sim/compact")
        w = watch.Watch()
        with self.assertRaises(ApiException) as err:
            for _ in w.stream(v1.list_namespaced_config_map, "default", resource_version=rv,
                              timeout_seconds=30):
                pass
        self.assertEqual(err.exception.status, 410)


if __name__ == "__main__":
    unittest.main()
