#!/usr/bin/env python3
"""Writes the five configbutler.ai/v1alpha3 CRDs of reverser.

The schemas are structurally identical to gitops-reverser v0.36.0's (docs/behaviour.md, CRDs):
same fields, types, defaults, enums, patterns, bounds, required lists, validation rules and
messages, printer columns and names; //deploy/crds:crds_reference_test compares them with the
facts in testdata/. The descriptions are reverser's own, written for `kubectl explain`.
One generator keeps the shared parts (conditions, refs, stream summary) identical in every file.

Run `python3 deploy/crds/gen_crds.py` after editing and commit the YAML it writes;
//deploy/crds:crds_generated_test fails while the checked-in YAML differs from the output.
`--out-dir DIR` writes elsewhere (the test uses it).
"""

import argparse
import os

import yaml

GROUP = "configbutler.ai"
VERSION = "v1alpha3"
HERE = os.path.dirname(os.path.abspath(__file__))

IMMUTABLE_DESTINATION = ("spec.%s is immutable; delete and recreate the GitTarget to change its "
                         "destination")


def s(description, **extra):
    return {"type": "string", "description": description, **extra}


def boolean(description, default):
    return {"type": "boolean", "default": default, "description": description}


def int32(description, **extra):
    return {"type": "integer", "format": "int32", "description": description, **extra}


def array(description, items, **extra):
    return {"type": "array", "description": description, "items": items, **extra}


def obj(description, properties, required=None, **extra):
    out = {"type": "object", "description": description, "properties": properties}
    if required:
        out["required"] = required
    out.update(extra)
    return out


def cel(*rules):
    """x-kubernetes-validations from (rule, message) pairs."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


def condition_list(types):
    """metav1.Condition list, as Kubernetes defines it (a list-map keyed by type)."""
    return array(
        "Observations of the object's state, one entry per condition type (" +
        ", ".join(types) + "). Ready summarizes the others.",
        obj("One observed aspect of the object.", {
            "lastTransitionTime": s("When status last changed (RFC 3339).", format="date-time"),
            "message": s("Explanation for people; may be empty.", maxLength=32768),
            "observedGeneration": {
                "type": "integer", "format": "int64", "minimum": 0,
                "description": "The metadata.generation this condition was computed for."},
            "reason": s("Machine-readable cause in CamelCase, e.g. BranchNotAllowed.",
                        maxLength=1024, minLength=1,
                        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
            "status": s("Whether the condition holds: True, False or Unknown.",
                        enum=["True", "False", "Unknown"]),
            "type": s("Condition type in CamelCase, e.g. Ready.", maxLength=316,
                      pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                              r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"),
        }, required=["lastTransitionTime", "message", "reason", "status", "type"]),
        **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})


def observed_generation():
    return {"type": "integer", "format": "int64",
            "description": "The metadata.generation the status was last computed for."}


def secret_ref(description):
    """A reference to a Secret in the object's own namespace."""
    return obj(description, {
        "group": s('API group of the referenced object: "" (the core group).', default=""),
        "kind": s("Kind of the referenced object: Secret.", default="Secret", enum=["Secret"]),
        "name": s("Name of the Secret, in the same namespace.", minLength=1),
    }, required=["name"])


def git_target_ref(description, with_namespace=False):
    props = {
        "group": s("API group of the GitTarget: configbutler.ai.", default=GROUP, enum=[GROUP]),
        "kind": s("Kind of the referenced object: GitTarget.", default="GitTarget",
                  enum=["GitTarget"]),
        "name": s("Name of the GitTarget.", minLength=1),
    }
    required = ["name"]
    if with_namespace:
        props["namespace"] = s("Namespace of the GitTarget.", minLength=1)
        required.append("namespace")
    return obj(description, props, required=required)


def streams_status(owner, with_pending_sample):
    props = {
        "summary": s('Ready over total streams as "<ready>/<total>", for kubectl get.'),
        "total": int32("Watch streams %s needs: one per watched type and scope." % owner),
        "ready": int32("Streams caught up and delivering live changes."),
        "replaying": int32("Streams replaying the current state (initial sync or resume)."),
        "blocked": int32("Streams that cannot proceed, e.g. a watch the API server refuses."),
        "observedTime": s("When these counts were taken (RFC 3339).", format="date-time"),
    }
    if with_pending_sample:
        props["pendingSample"] = array(
            'Up to five streams that are not ready yet, each "group/version/resource" with '
            'the namespace appended for namespaced streams.', {"type": "string"}, maxItems=5)
    return obj("Counts of the watch streams behind %s, by state." % owner, props,
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


def crd(kind, plural, scope, description, spec, status, columns):
    names = {"kind": kind, "listKind": kind + "List", "plural": plural,
             "singular": kind.lower()}
    schema = obj(description, {
        "apiVersion": s("API group and version of this object: configbutler.ai/v1alpha3."),
        "kind": s("Kind of this object: %s." % kind),
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
    spec = obj("The repository and how reverser writes to it.", {
        "url": s("Remote URL of the repository: https://, http://, ssh:// or scp-like "
                 "user@host:path. Cannot be changed after creation.", minLength=1),
        "secretRef": secret_ref(
            "Secret with the Git credentials: an SSH key (ssh-privatekey, identity or "
            "sshPrivateKey, optional passphrase and known_hosts), username and password, or "
            "bearerToken. Omit it for repositories that need none."),
        "knownHostsRef": obj(
            "ConfigMap or Secret with SSH host keys in key known_hosts (or ssh_known_hosts), "
            "used when the credentials Secret has no known_hosts.", {
                "kind": s("ConfigMap or Secret.", default="ConfigMap",
                          enum=["ConfigMap", "Secret"]),
                "name": s("Name of the object, in the same namespace.", minLength=1),
            }, required=["name"]),
        "allowedBranches": array(
            "Branches GitTargets may write to, as glob patterns (* and ? do not match /). "
            "A GitTarget whose branch matches none is refused.",
            {"type": "string", "minLength": 1}, minItems=1),
        "push": obj("When changes are committed and pushed.", {
            "commitWindow": s(
                'Quiet period that groups changes by the same author into one commit, as a '
                'duration such as "5s" or "1m"; "0s" commits every change on its own. When '
                'unset, 5s.'),
        }),
        "commit": obj("Committer identity, message templates and signing of commits.", {
            "committer": obj("Who is recorded as committer; the author is the user who made "
                             "the change when known.", {
                "name": s("Committer name.", default="GitOps Reverser"),
                "email": s("Committer email address.", default="noreply@configbutler.ai"),
            }),
            "message": obj("Commit messages as Go text/template templates; an unset field "
                           "uses the built-in template.", {
                "eventTemplate": s("Message of a commit holding one change."),
                "reconcileTemplate": s("Message of a commit that brings the folder in line "
                                       "with the cluster (resync)."),
                "groupTemplate": s("Message of a commit grouping several changes of one "
                                   "commit window."),
            }),
            "signing": obj("Signs commits with an SSH key.", {
                "secretRef": secret_ref("Secret with the private key in signing.key, an "
                                        "optional passphrase and the public key in "
                                        "signing.pub."),
                "generateWhenMissing": boolean("Create an ed25519 key in the Secret when it "
                                               "holds none.", False),
            }, required=["secretRef"]),
        }),
    }, required=["allowedBranches", "url"],
        **cel(("self.url == oldSelf.url",
               "spec.url is immutable; delete and recreate the GitProvider to point at a "
               "different repository")))
    status = obj("What reverser last observed about the repository.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled"]),
        "signingPublicKey": s("Public key commits are signed with, in authorized_keys "
                              "format."),
        "observedGeneration": observed_generation(),
    })
    columns = [
        column("URL", ".spec.url"),
        condition_column("Ready", "Ready"),
        condition_column("Reason", "Ready", "reason"),
        condition_column("Status", "Ready", "message", wide=True),
        AGE,
    ]
    return crd("GitProvider", "gitproviders", "Namespaced",
               "GitProvider is a Git repository that GitTargets in the same namespace write "
               "to.", spec, status, columns)


def git_target():
    spec = obj("Where in which repository the selected resources are written.", {
        "providerRef": obj("The GitProvider, in the same namespace. Cannot be changed after "
                           "creation.", {
            "group": s("API group of the GitProvider: configbutler.ai.", default=GROUP,
                       enum=[GROUP]),
            "kind": s("Kind of the referenced object: GitProvider.", default="GitProvider",
                      enum=["GitProvider"]),
            "name": s("Name of the GitProvider.", minLength=1),
        }, required=["name"]),
        "branch": s("Branch to commit to; must match one of the provider's allowedBranches. "
                    "Cannot be changed after creation.", minLength=1),
        "path": s('Folder in the repository that holds the files; "." is the repository '
                  'root. Must be relative and free of ".." segments; a trailing "/" is '
                  'ignored. Cannot be changed after creation.', minLength=1),
        "encryption": obj("How sensitive resources such as Secrets are encrypted before they "
                          "are written (SOPS with age recipients).", {
            "provider": s("Encryption tool: sops.", default="sops", enum=["sops"]),
            "secretRef": secret_ref("Secret holding age identities (*.agekey entries), read "
                                    "for extractFromSecret and written by "
                                    "generateWhenMissing."),
            "age": obj("Encryption to age recipients.", {
                "enabled": boolean("Encrypt sensitive resources; needs at least one "
                                   "recipient.", False),
                "recipients": obj("Where the age public keys come from.", {
                    "publicKeys": array("age public keys (age1...).",
                                        {"type": "string", "minLength": 1}),
                    "extractFromSecret": boolean("Also use the public key of every *.agekey "
                                                 "identity in secretRef.", False),
                    "generateWhenMissing": boolean("Create an identity in secretRef when it "
                                                   "holds none.", False),
                }),
            }),
        }, required=["provider"]),
        "placement": obj("Paths for newly written files. Files that already hold an object "
                         "are edited where they are.", {
            "byType": {"type": "object", "additionalProperties": {"type": "string"},
                       "description": 'Path template per type, keyed "[group/]version/'
                                      'resource" (e.g. "apps/v1/deployments").'},
            "default": s("Path template for types without a byType entry, with variables "
                         "such as {namespace}, {resource} and {name}."),
        }),
    }, required=["branch", "path", "providerRef"],
        **cel(("self.providerRef == oldSelf.providerRef",
               IMMUTABLE_DESTINATION % "providerRef"),
              ("self.branch == oldSelf.branch", IMMUTABLE_DESTINATION % "branch"),
              ("self.path == oldSelf.path", IMMUTABLE_DESTINATION % "path")))
    status = obj("What reverser last observed about this destination.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled", "Validated",
                                      "EncryptionConfigured", "StreamsRunning",
                                      "GitPathAccepted"]),
        "streams": streams_status("the GitTarget", with_pending_sample=False),
        "lastReconcileTime": s("When the folder was last brought in line with the cluster "
                               "(RFC 3339).", format="date-time"),
        "lastPushTime": s("When commits were last pushed (RFC 3339).", format="date-time"),
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
               "GitTarget is a folder on a branch of a GitProvider's repository that the "
               "resources selected by watch rules are written to.", spec, status, columns)


def resource_rule_properties():
    return {
        "operations": array("Changes to write: CREATE, UPDATE, DELETE; empty or * means all.",
                            {"type": "string", "enum": ["CREATE", "UPDATE", "DELETE", "*"]}),
        "apiGroups": array('API groups of the resources: "" is the core group, * any group. '
                           'When omitted, each resource name must exist in exactly one group.',
                           {"type": "string"}),
        "apiVersions": array("API versions to read the resources in; * means all, empty the "
                             "group's preferred version.", {"type": "string"}),
        "resources": array("Plural resource names such as configmaps, or * for all; "
                           "subresources (a/b) are not allowed.",
                           {"type": "string", "minLength": 1, "pattern": "^[^/]*$"},
                           minItems=1),
    }


def rule_status():
    return obj("What reverser last observed about this rule.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled", "ResourcesResolved",
                                      "GitTargetReady", "StreamsRunning"]),
        "streams": streams_status("the rule", with_pending_sample=True),
        "observedGeneration": observed_generation(),
    })


def rule_columns():
    return [
        column("Target", ".spec.targetRef.name"),
        condition_column("Ready", "Ready"),
        condition_column("Reason", "Ready", "reason"),
        column("Streams", ".status.streams.summary"),
        condition_column("GitTargetReady", "GitTargetReady", wide=True),
        condition_column("StreamsRunning", "StreamsRunning", wide=True),
        AGE,
    ]


def watch_rule():
    spec = obj("Which resources of this namespace are written to which GitTarget.", {
        "targetRef": git_target_ref("The GitTarget, in the same namespace."),
        "rules": array("Resource rules; a resource is selected when any rule matches it.",
                       obj("Resources selected by API group, version and name, and the "
                           "operations written for them.", resource_rule_properties(),
                           required=["resources"]),
                       minItems=1),
    }, required=["rules", "targetRef"])
    return crd("WatchRule", "watchrules", "Namespaced",
               "WatchRule selects resources of its own namespace to be written to a GitTarget "
               "of that namespace.", spec, rule_status(), rule_columns())


def cluster_watch_rule():
    props = resource_rule_properties()
    scopes = ["Cluster", "Namespaced"]
    props["scope"] = s("Cluster selects cluster-scoped resources; Namespaced selects "
                       "namespaced resources in every namespace.",
                       allOf=[{"enum": scopes}, {"enum": scopes}])
    spec = obj("Which resources of the cluster are written to which GitTarget.", {
        "targetRef": git_target_ref("The GitTarget, in any namespace.", with_namespace=True),
        "rules": array("Resource rules; a resource is selected when any rule matches it.",
                       obj("Resources selected by API group, version, name and scope, and "
                           "the operations written for them.", props,
                           required=["resources", "scope"]),
                       minItems=1),
    }, required=["rules", "targetRef"])
    return crd("ClusterWatchRule", "clusterwatchrules", "Cluster",
               "ClusterWatchRule selects cluster-scoped resources, or namespaced resources in "
               "all namespaces, to be written to a GitTarget.", spec, rule_status(),
               rule_columns())


def commit_request():
    spec = obj("Which GitTarget to commit on and the message. Cannot be changed after "
               "creation.", {
        "targetRef": git_target_ref("The GitTarget, in the same namespace."),
        "message": s("Commit message, used as written. May span lines; other control "
                     "characters (tab, carriage return, ...) are not allowed.",
                     minLength=1, maxLength=1024, pattern=r"^[^\x00-\x09\x0B-\x1F\x7F]*$"),
        "closeDelaySeconds": int32("Seconds to keep collecting the requester's changes "
                                   "before the commit is made.", minimum=0, maximum=300),
    }, required=["targetRef"],
        **cel(("self == oldSelf", "CommitRequest spec is immutable after creation")))
    status = obj("Outcome of the request.", {
        "conditions": condition_list(["Ready", "Reconciling", "Stalled", "AuthorAttributed",
                                      "Pushed"]),
        "branch": s("Branch the commit was pushed to."),
        "sha": s("Commit SHA."),
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
               "CommitRequest asks for the requester's pending changes on a GitTarget to be "
               "committed now, with the given message.", spec, status, columns)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, data):
    # Block style for multi-line text; plain otherwise (quoted when YAML needs it).
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=HERE, help="folder to write the YAML files to")
    args = parser.parse_args()
    for doc in (git_provider(), git_target(), watch_rule(), cluster_watch_rule(),
                commit_request()):
        name = doc["metadata"]["name"]
        path = os.path.join(args.out_dir,
                            "%s_%s.yaml" % (GROUP, doc["spec"]["names"]["plural"]))
        with open(path, "w") as out:
            out.write("# Generated by deploy/crds/gen_crds.py; edit that file, not this one.\n")
            out.write("# CRD %s (reverser, compatible with gitops-reverser v0.36.0).\n---\n" % name)
            yaml.dump(doc, out, Dumper=_Dumper, sort_keys=True, width=100,
                      default_flow_style=False)


if __name__ == "__main__":
    main()
