#!/usr/bin/env python3
"""Writes the five configbutler.ai/v1alpha3 CRDs of reverser into this folder.

The CRDs reproduce gitops-reverser v0.36.0 (docs/behaviour.md, CRDs and Status conditions).
One generator keeps the shared parts (conditions, refs, stream summary) identical in every file.
Run `python3 deploy/crds/gen_crds.py` after editing, and commit the YAML it writes; the test
//deploy/crds:crds_test checks the YAML's structure.
"""

import os

import yaml

GROUP = "configbutler.ai"
VERSION = "v1alpha3"
HERE = os.path.dirname(os.path.abspath(__file__))


def s(description, **extra):
    return {"type": "string", "description": description, **extra}


def obj(description, properties, required=None, **extra):
    out = {"type": "object", "description": description, "properties": properties}
    if required:
        out["required"] = required
    out.update(extra)
    return out


def condition_list(types):
    """metav1.Condition list, as controller-gen renders it (list-map keyed by type)."""
    return {
        "type": "array",
        "description": "Current state of the object. Types: " + ", ".join(types) + ".",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": obj(
            "One aspect of the object's state.",
            {
                "lastTransitionTime": s("When the condition last changed status.",
                                        format="date-time"),
                "message": s("Human-readable detail.", maxLength=32768),
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                                       "description": "metadata.generation the condition is based on."},
                "reason": s("CamelCase reason code.", maxLength=1024, minLength=1,
                            pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
                "status": s("True, False or Unknown.", enum=["True", "False", "Unknown"]),
                "type": s("Condition type in CamelCase.", maxLength=316,
                          pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                                  r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"),
            },
            required=["lastTransitionTime", "message", "reason", "status", "type"],
        ),
    }


def observed_generation():
    return {"type": "integer", "format": "int64",
            "description": "metadata.generation last reconciled."}


def secret_ref(description):
    return obj(description, {
        "group": s("Group of the referent (core).", default=""),
        "kind": s("Kind of the referent.", default="Secret", enum=["Secret"]),
        "name": s("Name of the Secret.", minLength=1),
    }, required=["name"])


def git_target_ref(description, with_namespace=False):
    # As in the reference: only the ClusterWatchRule's group carries an enum.
    group = s("Group of the referent.", default=GROUP)
    if with_namespace:
        group["enum"] = [GROUP]
    props = {
        "group": group,
        "kind": s("Kind of the referent.", default="GitTarget", enum=["GitTarget"]),
        "name": s("Name of the GitTarget.", minLength=1),
    }
    required = ["name"]
    if with_namespace:
        props["namespace"] = s("Namespace of the GitTarget.", minLength=1)
        required.append("namespace")
    return obj(description, props, required=required)


def streams_status(with_pending_sample):
    props = {
        "summary": s('"ready/total" for printing.'),
        "total": {"type": "integer", "format": "int32", "minimum": 0,
                  "description": "Streams this object needs."},
        "ready": {"type": "integer", "format": "int32", "minimum": 0,
                  "description": "Streams streaming live."},
        "replaying": {"type": "integer", "format": "int32", "minimum": 0,
                      "description": "Streams in initial or resume replay."},
        "blocked": {"type": "integer", "format": "int32", "minimum": 0,
                    "description": "Streams that cannot run (error, permission)."},
        "observedTime": s("When the summary was computed.", format="date-time"),
    }
    if with_pending_sample:
        props["pendingSample"] = {
            "type": "array", "maxItems": 5, "items": {"type": "string"},
            "description": 'Up to five not-ready streams, "group/version/resource[ ns]".'}
    return obj("Bounded roll-up of the watch streams.", props,
               required=["blocked", "ready", "replaying", "total"])


def condition_column(name, condition, field="status", wide=False):
    col = {"name": name, "type": "string",
           "jsonPath": '.status.conditions[?(@.type=="%s")].%s' % (condition, field)}
    if wide:
        col["priority"] = 1
    return col


def column(name, path, type_="string", wide=False):
    col = {"name": name, "type": type_, "jsonPath": path}
    if wide:
        col["priority"] = 1
    return col


AGE = column("Age", ".metadata.creationTimestamp", "date")


def crd(kind, plural, scope, description, spec, status, columns, short_names=None):
    names = {"kind": kind, "listKind": kind + "List", "plural": plural,
             "singular": kind.lower()}
    if short_names:
        names["shortNames"] = short_names
    schema = obj(description, {
        "apiVersion": s("Versioned schema of this representation of an object."),
        "kind": s("REST resource this object represents."),
        "metadata": {"type": "object"},
        "spec": spec,
        "status": status,
    }, required=["spec"])
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.%s" % (plural, GROUP)},
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": scope,
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": schema},
                "subresources": {"status": {}},
            }],
        },
    }


def git_provider():
    spec = obj("Desired state of the GitProvider: one remote repository and how to write to it.", {
        "url": s("Repository URL (HTTP(S) or SSH). Immutable.", minLength=1),
        "secretRef": secret_ref("Credentials Secret (may be omitted for public repositories)."),
        "knownHostsRef": obj("Object holding SSH known_hosts (key known_hosts, fallback "
                             "ssh_known_hosts).", {
            "kind": s("ConfigMap or Secret.", default="ConfigMap", enum=["ConfigMap", "Secret"]),
            "name": s("Name of the object.", minLength=1),
        }, required=["name"]),
        "allowedBranches": {"type": "array", "minItems": 1, "items": {"type": "string"},
                            "description": "Glob patterns (filepath.Match) a GitTarget branch "
                                           "must match."},
        "push": obj("Push strategy.", {
            "commitWindow": s('Silence window that groups events into one commit; "0s" '
                              'commits per event.', default="5s"),
        }),
        "commit": obj("Commit identity, message formatting and signing.", {
            "committer": obj("Operator identity written as the committer.", {
                "name": s("Committer name.", default="GitOps Reverser"),
                "email": s("Committer email.", default="noreply@configbutler.ai"),
            }),
            "message": obj("Go text/template commit message templates.", {
                "eventTemplate": s("Per-event commit message template."),
                "reconcileTemplate": s("Resync (reconcile) commit message template."),
                "groupTemplate": s("Grouped-window commit message template."),
            }),
            "signing": obj("SSH commit signing.", {
                "secretRef": secret_ref("Secret with signing.key, optional passphrase, "
                                        "signing.pub."),
                "generateWhenMissing": {"type": "boolean", "default": False,
                                        "description": "Generate the key when the Secret "
                                                       "lacks one."},
            }, required=["secretRef"]),
        }),
    }, required=["allowedBranches", "url"],
        **{"x-kubernetes-validations": [
            {"rule": "self.url == oldSelf.url", "message": "url is immutable"}]})
    status = obj("Observed state of the GitProvider.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled"]),
        "signingPublicKey": s("SSH signing public key, authorized_keys format."),
        "observedGeneration": observed_generation(),
    })
    columns = [
        column("URL", ".spec.url"),
        condition_column("Ready", "Ready"),
        condition_column("Reason", "Ready", "reason"),
        condition_column("Status", "Ready", "message"),
        AGE,
    ]
    return crd("GitProvider", "gitproviders", "Namespaced",
               "GitProvider is a Git repository reverser writes to.", spec, status, columns)


def git_target():
    spec = obj("Desired state of the GitTarget: where in which repository a set of rules is "
               "mirrored.", {
        "providerRef": obj("The GitProvider (same namespace). Immutable.", {
            "group": s("Group of the referent.", default=GROUP, enum=[GROUP]),
            "kind": s("Kind of the referent.", default="GitProvider", enum=["GitProvider"]),
            "name": s("Name of the GitProvider.", minLength=1),
        }, required=["name"]),
        "branch": s("Branch to write; must match a provider allowedBranches glob. Immutable.",
                    minLength=1),
        "path": s('Folder in the repository; "." is the root. A leading "/" and ".." are '
                  'rejected, a trailing "/" is normalized. Immutable.', minLength=1),
        "encryption": obj("Encryption of sensitive resources (Secrets).", {
            "provider": s("Encryption provider.", default="sops", enum=["sops"]),
            "secretRef": obj("Namespace-local Secret used by the provider.", {
                "name": s("Name of the Secret.", minLength=1),
            }, required=["name"]),
            "age": obj("age recipients for SOPS.", {
                "enabled": {"type": "boolean", "default": False,
                            "description": "Use age recipients; requires at least one."},
                "recipients": obj("How recipients are found.", {
                    "publicKeys": {"type": "array", "items": {"type": "string", "minLength": 1},
                                   "description": "Static age recipients (age1...)."},
                    "extractFromSecret": {"type": "boolean", "default": False,
                                          "description": "Derive recipients from every "
                                                         "*.agekey entry of secretRef."},
                    "generateWhenMissing": {"type": "boolean", "default": False,
                                            "description": "Create a date-named *.agekey entry "
                                                           "when none exists."},
                }),
            }),
        }),
        "placement": obj("Where NEW files go; existing documents are edited in place.", {
            "byType": {"type": "object", "additionalProperties": {"type": "string"},
                       "description": 'Path template per "[group/]version/resource".'},
            "default": s("Path template for types without a byType entry."),
        }),
    }, required=["branch", "path", "providerRef"],
        **{"x-kubernetes-validations": [
            {"rule": "self.providerRef == oldSelf.providerRef",
             "message": "providerRef is immutable"},
            {"rule": "self.branch == oldSelf.branch", "message": "branch is immutable"},
            {"rule": "self.path == oldSelf.path", "message": "path is immutable"},
        ]})
    status = obj("Observed state of the GitTarget.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled", "Validated",
                                      "EncryptionConfigured", "StreamsRunning",
                                      "GitPathAccepted"]),
        "streams": streams_status(with_pending_sample=False),
        "lastReconcileTime": s("Last reconcile.", format="date-time"),
        "lastPushTime": s("Last successful push.", format="date-time"),
        "observedGeneration": observed_generation(),
    })
    columns = [
        column("Provider", ".spec.providerRef.name"),
        column("Branch", ".spec.branch"),
        column("Path", ".spec.path"),
        condition_column("Ready", "Ready"),
        condition_column("Reason", "Ready", "reason"),
        column("Streams", ".status.streams.summary"),
        condition_column("GitPathAccepted", "GitPathAccepted", wide=True),
        condition_column("StreamsRunning", "StreamsRunning", wide=True),
        condition_column("Status", "Ready", "message", wide=True),
        column("Encryption", ".spec.encryption.provider", wide=True),
        AGE,
    ]
    return crd("GitTarget", "gittargets", "Namespaced",
               "GitTarget is a folder on a branch of a GitProvider that rules mirror into.",
               spec, status, columns)


def resource_rule_properties():
    return {
        "operations": {"type": "array",
                       "items": {"type": "string", "enum": ["CREATE", "UPDATE", "DELETE", "*"]},
                       "description": "Operations to mirror; empty or * means all."},
        "apiGroups": {"type": "array", "items": {"type": "string"},
                      "description": 'API groups ("" core, * all); omitted: the named resource '
                                     'must be unique across served groups.'},
        "apiVersions": {"type": "array", "items": {"type": "string"},
                        "description": "Versions (* all); empty: the preferred served version."},
        "resources": {"type": "array", "minItems": 1,
                      "items": {"type": "string", "pattern": "^[^/]*$"},
                      "description": "Exact plural resource names or *; subresources are "
                                     "rejected."},
    }


def rule_status():
    return obj("Observed state of the rule.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled", "ResourcesResolved",
                                      "GitTargetReady", "StreamsRunning"]),
        "streams": streams_status(with_pending_sample=True),
        "observedGeneration": observed_generation(),
    })


def rule_columns():
    return [
        column("Target", ".spec.targetRef.name"),
        condition_column("Ready", "Ready"),
        condition_column("Reconciling", "Reconciling"),
        condition_column("Stalled", "Stalled"),
        condition_column("StreamsRunning", "StreamsRunning"),
        column("Streams", ".status.streams.summary"),
        condition_column("Reason", "Ready", "reason"),
        AGE,
    ]


def watch_rule():
    spec = obj("Which resources of this namespace are mirrored to which GitTarget.", {
        "targetRef": git_target_ref("The GitTarget (same namespace)."),
        "rules": {"type": "array", "minItems": 1, "description": "Resource rules, OR-ed.",
                  "items": obj("One resource rule.", resource_rule_properties(),
                               required=["resources"])},
    }, required=["rules", "targetRef"])
    return crd("WatchRule", "watchrules", "Namespaced",
               "WatchRule mirrors resources of its own namespace into a GitTarget.",
               spec, rule_status(), rule_columns())


def cluster_watch_rule():
    props = resource_rule_properties()
    props["scope"] = s("Cluster: cluster-scoped resources; Namespaced: namespaced resources "
                       "across all namespaces.", enum=["Cluster", "Namespaced"])
    spec = obj("Which resources of the cluster are mirrored to which GitTarget.", {
        "targetRef": git_target_ref("The GitTarget.", with_namespace=True),
        "rules": {"type": "array", "minItems": 1, "description": "Resource rules, OR-ed.",
                  "items": obj("One cluster resource rule.", props,
                               required=["resources", "scope"])},
    }, required=["rules", "targetRef"])
    columns = rule_columns()
    return crd("ClusterWatchRule", "clusterwatchrules", "Cluster",
               "ClusterWatchRule mirrors cluster-scoped or all-namespace resources into a "
               "GitTarget.", spec, rule_status(), columns)


def commit_request():
    spec = obj("A request to close the author's open commit window now. Immutable.", {
        "targetRef": git_target_ref("The GitTarget (same namespace)."),
        "message": s("Commit message, used verbatim. Newlines allowed; other control "
                     "characters are not.", minLength=1, maxLength=1024,
                     pattern=r"^[^\x00-\x09\x0B-\x1F\x7F]*$"),
        "closeDelaySeconds": {"type": "integer", "format": "int32", "minimum": 0,
                              "maximum": 300,
                              "description": "Extra collect window before the author's window "
                                             "closes."},
    }, required=["targetRef"],
        **{"x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "spec is immutable"}]})
    status = obj("Observed state of the CommitRequest.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled", "AuthorAttributed",
                                      "Pushed"]),
        "branch": s("Branch the commit was pushed to."),
        "sha": s("SHA of the pushed commit."),
        "observedGeneration": observed_generation(),
    })
    columns = [
        column("GitTarget", ".spec.targetRef.name"),
        condition_column("Ready", "Ready"),
        condition_column("Reason", "Ready", "reason"),
        column("SHA", ".status.sha"),
        condition_column("AuthorAttributed", "AuthorAttributed", wide=True),
        condition_column("Pushed", "Pushed", wide=True),
        column("Branch", ".status.branch", wide=True),
        AGE,
    ]
    return crd("CommitRequest", "commitrequests", "Namespaced",
               "CommitRequest finalizes the requester's open commit window with a message.",
               spec, status, columns)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, data):
    # Block style for multi-line text; plain otherwise (quoted when YAML needs it).
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def main():
    for doc in (git_provider(), git_target(), watch_rule(), cluster_watch_rule(),
                commit_request()):
        name = doc["metadata"]["name"]
        path = os.path.join(HERE, "%s_%s.yaml" % (GROUP, doc["spec"]["names"]["plural"]))
        with open(path, "w") as out:
            out.write("# Generated by deploy/crds/gen_crds.py; edit that file, not this one.\n")
            out.write("# CRD %s (reverser, compatible with gitops-reverser v0.36.0).\n---\n" % name)
            yaml.dump(doc, out, Dumper=_Dumper, sort_keys=True, width=100,
                      default_flow_style=False)


if __name__ == "__main__":
    main()
