#!/usr/bin/env python3
"""Writes JUnit XML for tools/test.sh's closing line (tools/ci/summarize_tests.py).

Usage: junit.py FILE SUITE [NAME VERDICT WHY LOG]...
VERDICT is PASS or anything else (a failure whose message is WHY, with the last lines of LOG).
"""
import sys
from xml.sax.saxutils import escape, quoteattr

path, suite, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
cases, failures = [], 0
for i in range(0, len(rows), 4):
    name, verdict, why, log = rows[i:i + 4]
    body = ""
    if verdict != "PASS":
        failures += 1
        try:
            tail = "".join(open(log, errors="replace").readlines()[-60:]) if log else ""
        except OSError:
            tail = ""
        tail = "".join(c if c >= " " or c in "\t\n\r" else "?" for c in tail)
        body = f"<failure message={quoteattr(why)}>{escape(tail)}</failure>"
    cases.append(f'  <testcase classname="{suite}" name={quoteattr(name)}>{body}</testcase>')
with open(path, "w") as out:
    out.write(f'<testsuites>\n<testsuite name="{suite}" tests="{len(cases)}" failures="{failures}">\n')
    out.write("\n".join(cases) + "\n</testsuite>\n</testsuites>\n")
