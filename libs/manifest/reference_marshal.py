#!/usr/bin/env python3
"""An independent statement of how gitops-reverser v0.36.0 writes a new file (docs/behaviour.md,
Sanitization and YAML rendering), for reference_bytes_test.

Reads a live object as JSON on stdin. Writes the file bytes the reference writes, or with
--sanitize-only the sanitized object as JSON. The file is the reference's ordered marshal: three
one-key maps (apiVersion, kind, metadata) and then the payload map, each marshalled on its own,
so metadata keys come out sorted (annotations, labels, name, namespace) like every other map.

The YAML is PyYAML's emitter with go-yaml v2's scalar choices: a string that would read back as
something else ("2", "on", "0123") is double-quoted, a multi-line string is a `|` block, anything
else plain unless the syntax forbids it (then single quotes, as both emitters fall back).
Sequences are not indented under their key, 80 columns, keys sorted. Map keys are sorted by code
point, which is go-yaml's natural order for keys without digit runs or non-letter/letter pairs
(the test's inputs keep to those).
"""

import json
import sys

import yaml

PAYLOAD_FIELDS = (
    "spec", "data", "binaryData", "rules", "subjects", "roleRef", "webhooks", "template",
    "involvedObject", "reason", "message", "type", "eventTime",
)
LABEL_PREFIXES = ("kustomize.toolkit.fluxcd.io/", "kro.run/", "applyset.kubernetes.io/")
ANNOTATION_KEYS = (
    "argocd.argoproj.io/tracking-id", "argocd.argoproj.io/installation-id", "kcp.io/cluster",
)
ANNOTATION_PREFIXES = (
    "kubectl.kubernetes.io/", "control-plane.alpha.kubernetes.io/", "deployment.kubernetes.io/",
    "autoscaling.alpha.kubernetes.io/", "kustomize.toolkit.fluxcd.io/", "applyset.kubernetes.io/",
)
KIND_SPEC_DROPS = {
    "Service": ("clusterIP", "clusterIPs", "healthCheckNodePort", "ipFamilies", "ipFamilyPolicy",
                "internalTrafficPolicy"),
    "Pod": ("nodeName",),
    "PersistentVolumeClaim": ("volumeName", "volumeMode"),
}


def sanitize(live):
    metadata = live.get("metadata") or {}
    out_metadata = {}
    for field in ("name", "namespace"):
        if metadata.get(field):
            out_metadata[field] = metadata[field]
    labels = {k: v for k, v in (metadata.get("labels") or {}).items()
              if not k.startswith(LABEL_PREFIXES)}
    if labels:
        out_metadata["labels"] = labels
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items()
                   if k not in ANNOTATION_KEYS and not k.startswith(ANNOTATION_PREFIXES)}
    if annotations:
        out_metadata["annotations"] = annotations
    out = {"apiVersion": live["apiVersion"], "kind": live["kind"], "metadata": out_metadata}
    for field in PAYLOAD_FIELDS:
        if field in live:
            out[field] = live[field]
    spec = out.get("spec")
    if isinstance(spec, dict):
        for field in KIND_SPEC_DROPS.get(live["kind"], ()):
            spec.pop(field, None)
    return out


# What a plain scalar may mean in YAML 1.1 besides a string, for both libraries. (PyYAML also
# reads a lone `!`, `&` or `*` as its own `yaml` tag; go-yaml does not, so those are left to the
# syntax check below, which single-quotes them.)
OTHER_TYPES = {"tag:yaml.org,2002:" + t for t in ("bool", "int", "float", "null", "timestamp")}


class GoYamlStyleDumper(yaml.SafeDumper):
    def choose_scalar_style(self):
        event = self.event
        if (isinstance(event, yaml.ScalarEvent) and event.style is None
                and event.tag == "tag:yaml.org,2002:str"
                and self.resolve(yaml.ScalarNode, event.value, (True, False)) in OTHER_TYPES):
            return '"'
        return super().choose_scalar_style()


def represent_str(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style="|" if "\n" in value else None)


GoYamlStyleDumper.add_representer(str, represent_str)


def marshal(value):
    return yaml.dump(value, Dumper=GoYamlStyleDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=80, indent=2)


def reference_file(sanitized):
    text = marshal({"apiVersion": sanitized["apiVersion"]})
    text += marshal({"kind": sanitized["kind"]})
    text += marshal({"metadata": sanitized.get("metadata") or {}})
    payload = {k: v for k, v in sanitized.items()
               if k not in ("apiVersion", "kind", "metadata", "status")}
    if payload:
        text += marshal(payload)
    return text


def main():
    sanitized = sanitize(json.load(sys.stdin))
    if "--sanitize-only" in sys.argv[1:]:
        sys.stdout.write(json.dumps(sanitized))
    else:
        sys.stdout.write(reference_file(sanitized))


if __name__ == "__main__":
    main()
