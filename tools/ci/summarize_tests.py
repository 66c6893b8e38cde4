#!/usr/bin/env python3
"""Counts test cases from Bazel's test.xml files and prints `N passed, N failed`.

Usage: summarize_tests.py --bazel-exit N <bazel-testlogs dir> <test target>...
A target without a test.xml (it did not build or did not run) counts as one failure, and so does
a failed build (Bazel exit 1) of anything, test or not.
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


def main():
    args = sys.argv[1:]
    bazel_exit = 0
    if len(args) >= 2 and args[0] == "--bazel-exit":
        bazel_exit = int(args[1])
        args = args[2:]
    if not args:
        print("usage: summarize_tests.py --bazel-exit N <bazel-testlogs> <targets...>", file=sys.stderr)
        return 2
    logs = args[0]
    passed = failed = skipped = 0
    if bazel_exit == 1:
        print("FAILED: the build failed (see the log above)", file=sys.stderr)
        failed += 1
    for target in args[1:]:
        rel = target.lstrip("/").replace(":", "/")
        xml_path = os.path.join(logs, rel, "test.xml")
        if not os.path.exists(xml_path):
            print(f"no result for {target} (did not build or run)", file=sys.stderr)
            failed += 1
            continue
        try:
            p, f, s = count(xml_path)
        except ET.ParseError as e:
            print(f"unreadable result for {target}: {e}", file=sys.stderr)
            failed += 1
            continue
        if f:
            print(f"FAILED: {target} ({f} failing case(s))", file=sys.stderr)
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
