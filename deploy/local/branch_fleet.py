"""The scaled-out workload of the replicas test and bench (tests/e2e/replicas_test.py,
bench/replicas_bench.py): N namespaces, each with its own GitProvider, GitTarget and branch on
the stack's remote, and what the gitworkers' logs say of who owned which branch."""
import calendar
import json
import time


def namespace(i):
    return f"team-{i:02d}"


def branch(i):
    return f"b-{i:02d}"


def target_path(i):
    return f"clusters/{namespace(i)}"


def unit(i):
    """Branch i's membership unit (libs/membership/units.h BranchUnit)."""
    return f"branch:{namespace(i)}/local/{branch(i)}"


def mirror_manifest(stack, i):
    """A GitProvider, GitTarget and WatchRule (ConfigMaps) in their own namespace, on their own
    branch, committing every change at once."""
    ns = namespace(i)
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitProvider",
         "metadata": {"name": "local", "namespace": ns},
         "spec": {"url": stack.remote_url, "allowedBranches": [branch(i)],
                  "push": {"commitWindow": "0s"}}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "GitTarget",
         "metadata": {"name": "mirror", "namespace": ns},
         "spec": {"providerRef": {"name": "local"}, "branch": branch(i), "path": target_path(i)}},
        {"apiVersion": "configbutler.ai/v1alpha3", "kind": "WatchRule",
         "metadata": {"name": "configmaps", "namespace": ns},
         "spec": {"targetRef": {"name": "mirror"},
                  "rules": [{"operations": ["*"], "apiGroups": [""], "resources": ["configmaps"]}]}},
    ]}


def resyncs_sent(stack):
    """Type-scoped resyncs the splicer replicas sent (one series per target and type)."""
    return sum(len([l for l in stack.metrics(replica).splitlines()
                    if l.startswith("reverser_splicer_resyncs_total{")])
               for replica in stack.replica_names("splicer"))


def log_time(ts):
    """A log line's "ts" (2026-12-04T18:48:11.123Z) as Unix seconds; None if it is not one."""
    try:
        whole, _, fraction = ts.rstrip("Z").partition(".")
        return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (fraction or "0"))
    except (AttributeError, ValueError):
        return None


def log_entry(raw):
    """One JSON log line as a dict (None for anything else: a partial line, other output)."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def ownership_change(entry):
    """The (gained, lost) units of a "branch ownership changed" line."""
    return ({u for u in entry.get("gained", "").split(",") if u},
            {u for u in entry.get("lost", "").split(",") if u})
