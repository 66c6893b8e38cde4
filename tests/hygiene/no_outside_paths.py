#!/usr/bin/env python3
"""Fails if a tracked file mentions a path outside the repository.

The repository stands alone: a fresh clone in an empty folder builds, tests and reads completely,
so no code, build file, test, doc or comment may point at files beside or above the checkout.
Every tracked file (`git ls-files` in the source tree) is read and each line is checked for:

- names of the material that lives beside the checkout on the development machines (the sibling
  `shared` folder and its reference, design and test data parts) and absolute paths into the
  machines' work folder;
- names of reference documents that are not in the repository;
- a relative path whose leading `..` segments climb above the repository root from the file's own
  folder (`../x` in a top-level file, `../../x` one folder down, ...). Paths that stay inside (a
  test's `"../etc"` input, a doc's `../README.md` link) are fine.

Each finding is printed as `path:line: why: text`. Usage:
  no_outside_paths.py             check the repository this script belongs to
  no_outside_paths.py --self-test check the rules on examples
"""

import os
import re
import subprocess
import sys

# The patterns are written so that this file does not match them itself.
EXPLICIT_RULES = [
    (re.compile(r"\.\./shared\b"), "names the folder beside the checkout"),
    (re.compile(r"\bshared/(?:reference|design|testdata)\b"), "names the shared reference material"),
    (re.compile(r"(?<![\w.~-])/work" + "/"), "an absolute path on the development machines"),
]

# Reference documents kept outside the repository. A name stops being flagged once a tracked file
# of that name exists (the project then has its own document).
OUTSIDE_DOCUMENTS = [
    "gitops-reverser" + ".md",
    "kubernetes-protocol" + ".md",
    "sops-age" + ".md",
    "crds-v0.36.0" + ".md",
    "cpp-models" + ".md",
]

# A run of `..` segments at the start of a relative path: not preceded by a word character, a dot,
# `/`, `~` or `-` (so `a/../b`, `.../pods` and `x..y` are not starts), and ending at `/`, the end
# of the line or a character that cannot continue a path segment.
CLIMB = re.compile(r"(?<![\w.~/-])\.\.(?:/\.\.)*(?=/|$|[^\w.])")

# Intentional mentions: (path, text on the line, reason). Keep it short; every entry says why.
ALLOWED = []


def outside_document_rules(tracked):
    names = {os.path.basename(path) for path in tracked}
    rules = []
    for doc in OUTSIDE_DOCUMENTS:
        if doc not in names:
            rules.append((re.compile(r"(?<![\w.-])" + re.escape(doc)), "names a document outside the repository"))
    return rules


def findings_in_text(path, text, rules):
    """Yields (line number, why, line) for each offending mention in `text` of the file `path`."""
    depth = path.count("/")  # folders between the file and the repository root
    for number, line in enumerate(text.splitlines(), 1):
        if any(path == p and needle in line for p, needle, _ in ALLOWED):
            continue
        for pattern, why in rules:
            if pattern.search(line):
                yield number, why, line
                break
        else:
            if ".." not in line:
                continue
            for match in CLIMB.finditer(line):
                climbs = match.group(0).count("..")
                if climbs > depth:
                    where = os.path.dirname(path) or "the repository root"
                    yield number, f"climbs {climbs} folder(s) up from {where}, out of the repository", line
                    break


def tracked_files(root):
    """The files git tracks under `root`; every file below it when it is not a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True
        ).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("bazel-")]
            for name in names:
                files.append(os.path.relpath(os.path.join(folder, name), root))
        return sorted(files)


def read_text(full_path):
    """The file's text, the link target for a symlink; None for binary files."""
    if os.path.islink(full_path):
        return os.readlink(full_path)
    try:
        with open(full_path, "rb") as f:
            data = f.read()
    except OSError:
        return None  # tracked but deleted in the working tree
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace")


def source_root():
    """The source tree: Bazel's runfiles are symlinks into it (the WORKSPACE file is a data input)."""
    if os.environ.get("BUILD_WORKSPACE_DIRECTORY"):  # bazel run
        return os.environ["BUILD_WORKSPACE_DIRECTORY"]
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        workspace = os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "reverser"), "WORKSPACE")
        return os.path.dirname(os.path.realpath(workspace))
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def check(root):
    tracked = tracked_files(root)
    if "WORKSPACE" not in tracked:
        print(f"no_outside_paths: {root} does not look like the repository (no WORKSPACE)")
        return 1
    rules = EXPLICIT_RULES + outside_document_rules(tracked)
    bad_files = set()
    count = 0
    for path in tracked:
        text = read_text(os.path.join(root, path))
        if text is None:
            continue
        for number, why, line in findings_in_text(path, text, rules):
            print(f"{path}:{number}: {why}: {line.strip()[:200]}")
            bad_files.add(path)
            count += 1
    if count:
        print(f"\n{count} mention(s) of paths outside the repository in {len(bad_files)} file(s) "
              f"(of {len(tracked)} tracked)")
        return 1
    print(f"no path outside the repository in {len(tracked)} tracked files")
    return 0


def self_test():
    """The rules on examples: what must be flagged and what must not."""
    rules = EXPLICIT_RULES + outside_document_rules(["WORKSPACE", "docs/behaviour.md"])
    flagged = [
        ("README.md", "data in ../" + "shared/" + "testdata/k8s"),
        ("libs/x/a.h", "// see shared/" + "reference/kubernetes-protocol" + ".md"),
        ("libs/x/a.h", "// see gitops-reverser" + ".md §2A.6"),
        ("tools/test.sh", 'cd /work' + '/main && make'),
        ("README.md", "[sibling](../other/README.md)"),
        ("README.md", "cd .. && ls"),
        ("docs/a.md", "[up](../../x.md)"),
        ("libs/kube/README.md", "`" + "../" * 3 + "reference/x.md`"),
        ("tests/testdata/k8s/captured/lab/CLUSTER.md", "[design](" + "../" * 6 + "docs/spec.md)"),
    ]
    kept = [
        ("docs/a.md", "[readme](../README.md)"),
        ("libs/core/types_test.cc", 'for (const char* bad : {"", "..", "../etc", "a/b"}) {'),
        ("libs/manifest/paths_test.cc", 'ConfigMap("default", "../../etc/passwd")'),
        ("libs/git/credentials_test.cc", '{"a/../b", "./a", "a//b"}'),
        ("tools/kube-sim/watch_handler.cc", "// GET .../{name}?watch=true"),
        ("deploy/local/demo.sh", 'cd "$(dirname "$0")/../.."'),
        ("libs/x/a.cc", '#include "libs/x/a.h"'),
        ("docs/behaviour.md", "see docs/behaviour.md and https://example.com/work" + "/x"),
        ("README.md", "and so on.. then"),
    ]
    failures = 0
    for path, line in flagged:
        if not list(findings_in_text(path, line, rules)):
            print(f"not flagged but should be: {path}: {line}")
            failures += 1
    for path, line in kept:
        found = list(findings_in_text(path, line, rules))
        if found:
            print(f"flagged but should not be: {path}: {line} ({found[0][1]})")
            failures += 1
    # A document name the repository has is not flagged.
    if list(findings_in_text("a.md", "see behaviour.md", rules)):
        print("flagged a document that is in the repository")
        failures += 1
    print(f"{len(flagged) + len(kept) + 1 - failures} of {len(flagged) + len(kept) + 1} examples right")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    sys.exit(check(sys.argv[1] if len(sys.argv) > 1 else source_root()))
