#!/usr/bin/env python3
"""Counts test cases from Bazel's test.xml files and prints `N passed, N failed`.

Usage: summarize_tests.py --bazel-exit N [--extra-junit FILE]... <bazel-testlogs dir> <test target>...
A target without a test.xml (it did not build or did not run) counts as one failure, and so does
a failed build (Bazel exit 1) of anything, test or not. Each --extra-junit file (results of runs
outside `bazel test`, e.g. tools/fuzz.sh) adds its test cases; a missing or unreadable one counts
as one failure.
Exit status 1 when anything failed.
"""
import os
import sys
import xml.etree.ElementTree as ET


def count(xml_path):
    passed = failed = skipped = 0
    root = ET.parse(xml_path).getroot()
    cases = list(root.iter("testcase"))
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    if not cases:
        # A plain sh_test: Bazel's own record has no cases; judge by the suite's failure count.
        suites = list(root.iter("testsuite"))
        bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
        if bad:
            failed += 1
        else:
            passed += 1
    return passed, failed, skipped


MESSAGE_LIMIT = 2000  # characters of each failure shown; logs stay in bazel-testlogs


def failures(xml_path):
    """(case name, failure text) of each failing case, the text cut to MESSAGE_LIMIT."""
    out = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is None:
                continue
            text = (node.get("message") or "") + "\n" + (node.text or "")
            text = text.strip()
            if len(text) > MESSAGE_LIMIT:
                text = text[:MESSAGE_LIMIT] + f"\n... ({len(text) - MESSAGE_LIMIT} more characters)"
            out.append((f"{case.get('classname', '')}.{case.get('name', '')}", text))
            break
    return out


LOG_TAIL_LINES = 60


def log_tail(log_path):
    """The last LOG_TAIL_LINES lines of a test's log, from its first traceback or failure on."""
    try:
        with open(log_path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return f"(no log: {e})"
    start = next((i for i, line in enumerate(lines)
                  if line.startswith(("Traceback", "FAIL:", "ERROR:", "[  FAILED"))), len(lines))
    tail = lines[start:] if start < len(lines) else lines
    tail = tail[-LOG_TAIL_LINES:]
    return "\n".join(tail)[:MESSAGE_LIMIT * 2]


def result_files(target_dir):
    """test.xml of a target, or one per shard (shard_K_of_N/test.xml); [] when any is missing."""
    single = os.path.join(target_dir, "test.xml")
    if os.path.exists(single):
        return [single]
    if not os.path.isdir(target_dir):
        return []
    shards = sorted(d for d in os.listdir(target_dir) if d.startswith("shard_"))
    paths = [os.path.join(target_dir, d, "test.xml") for d in shards]
    if not paths or not all(os.path.exists(p) for p in paths):
        return []
    return paths


def main():
    args = sys.argv[1:]
    bazel_exit = 0
    extra = []
    while len(args) >= 2 and args[0] in ("--bazel-exit", "--extra-junit"):
        if args[0] == "--bazel-exit":
            bazel_exit = int(args[1])
        else:
            extra.append(args[1])
        args = args[2:]
    if not args:
        print("usage: summarize_tests.py --bazel-exit N [--extra-junit FILE]... <bazel-testlogs> <targets...>",
              file=sys.stderr)
        return 2
    logs = args[0]
    passed = failed = skipped = 0
    if bazel_exit == 1:
        print("FAILED: the build failed (see the log above)", file=sys.stderr)
        failed += 1
    for target in args[1:]:
        rel = target.lstrip("/").replace(":", "/")
        xml_paths = result_files(os.path.join(logs, rel))
        if not xml_paths:
            print(f"no result for {target} (did not build or run)", file=sys.stderr)
            failed += 1
            continue
        try:
            p = f = s = 0
            for xml_path in xml_paths:
                cp, cf, cs = count(xml_path)
                p, f, s = p + cp, f + cf, s + cs
        except ET.ParseError as e:
            print(f"unreadable result for {target}: {e}", file=sys.stderr)
            failed += 1
            continue
        if f:
            # Why, next to the count: CI often shows only the end of the output.
            for xml_path in xml_paths:
                for name, text in failures(xml_path):
                    print(f"--- {target} {name}\n{text}", file=sys.stderr)
                    if text.startswith("exited with error code"):
                        # Bazel wrote this XML itself: the reason is in the log beside it.
                        print(log_tail(os.path.join(os.path.dirname(xml_path), "test.log")),
                              file=sys.stderr)
            print(f"FAILED: {target} ({f} failing case(s))", file=sys.stderr)
        passed += p
        failed += f
        skipped += s
    for xml_path in extra:
        try:
            p, f, s = count(xml_path)
        except (OSError, ET.ParseError) as e:
            print(f"no result in {xml_path}: {e}", file=sys.stderr)
            failed += 1
            continue
        if f:
            for name, text in failures(xml_path):
                print(f"--- {xml_path} {name}\n{text}", file=sys.stderr)
            print(f"FAILED: {xml_path} ({f} failing case(s))", file=sys.stderr)
        passed += p
        failed += f
        skipped += s
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
