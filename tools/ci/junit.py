#!/usr/bin/env python3
"""JUnit XML for the checks tools/test.sh runs outside Bazel (fuzzers, thread-safety, images, the
chart run), which tools/ci/summarize_tests.py counts into the closing line.

As a program:  junit.py FILE SUITE [NAME VERDICT WHY LOG]...
  VERDICT is PASS or anything else (a failure whose message is WHY, with the last lines of LOG).
As a module:   write(path, suite, [(name, passed, why, details), ...])
"""
import sys
from xml.sax.saxutils import escape, quoteattr

TAIL_LINES = 60


def write(path, suite, cases):
    """One <testcase> per (name, passed, why, details); details is the failure's text."""
    rows, failures = [], 0
    for name, passed, why, details in cases:
        body = ""
        if not passed:
            failures += 1
            # XML 1.0 has no room for other control characters (a log may echo input bytes).
            text = "".join(c if c >= " " or c in "\t\n\r" else "?" for c in details)
            body = f"<failure message={quoteattr(why)}>{escape(text)}</failure>"
        rows.append(f"  <testcase classname={quoteattr(suite)} name={quoteattr(name)}>{body}</testcase>")
    with open(path, "w") as out:
        out.write(f"<testsuites>\n<testsuite name={quoteattr(suite)} tests=\"{len(rows)}\" "
                  f"failures=\"{failures}\">\n")
        out.write("\n".join(rows) + "\n</testsuite>\n</testsuites>\n")


def log_tail(path):
    """The last lines of a log file, or "" when there is none."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-TAIL_LINES:]) if path else ""
    except OSError:
        return ""


def main(argv):
    path, suite, rows = argv[1], argv[2], argv[3:]
    cases = [(rows[i], rows[i + 1] == "PASS", rows[i + 2], log_tail(rows[i + 3]))
             for i in range(0, len(rows), 4)]
    write(path, suite, cases)


if __name__ == "__main__":
    main(sys.argv)
