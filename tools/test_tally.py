#!/usr/bin/env python3
"""Counts the test cases of a `bazel test` run: passed, failed and skipped.

Reads, for every test target named on the command line, the JUnit reports
Bazel left under --testlogs (test.xml, or one per shard or attempt), and the
per-target status lines of Bazel's summary (--summary, the captured output
of `bazel test`). Prints one line per failed case or target and one per
skipped case, each with its reason, then a last line alone:

    N passed, N failed, N skipped

Rules (docs/BUILDING.md, "Test counts"):
- A GoogleTest case counts once: failed if its <testcase> holds <failure>
  or <error>, skipped if it holds <skipped> (or says result="skipped" /
  status="notrun"), passed otherwise.
- A report Bazel wrote itself (an sh_test, or a binary that crashed or timed
  out before writing its own) has one <testcase> named after the target; its
  <error message=...> makes that case a failure that names the target.
- A target whose summary status is not PASSED (FAILED, TIMEOUT, NO STATUS,
  FAILED TO BUILD, ...) counts at least one failure, even when its report
  shows every case passed (a binary that failed at exit, after its report
  was written: a leak report, a crash in a destructor). A target without a
  report counts one failure.
- --extra FILE adds results of checks run outside Bazel, one per line:
  "passed WHAT", "failed WHAT" or "skipped WHAT: WHY".

Exit status: 0 when nothing failed, 1 otherwise, 2 on bad arguments.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

SUMMARY = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?"
    r"(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE|REMOTE FAILURE|SKIPPED|BUILT)\b")


def read_summary(path):
    """Target -> its status word in Bazel's summary."""
    statuses = {}
    if not path:
        return statuses
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = SUMMARY.match(line.strip())
            if m:
                statuses[m.group(1)] = m.group(2)
    return statuses


def target_dir(testlogs, target):
    """//a/b:c -> TESTLOGS/a/b/c."""
    path = target[2:] if target.startswith("//") else target
    return os.path.join(testlogs, path.replace(":", "/"))


def reports(directory):
    """The target's test.xml files: its own, or one per shard or attempt."""
    found = []
    top = os.path.join(directory, "test.xml")
    if os.path.isfile(top):
        found.append(top)
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            sub = os.path.join(directory, name, "test.xml")
            if re.match(r"^(shard|run|attempt)_", name) and os.path.isfile(sub):
                found.append(sub)
    return found


def one_line(text):
    """A reason on one line: GoogleTest prefixes "file:line" and a newline."""
    text = (text or "").strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if len(lines) > 1 and re.match(r"^\S+:\d+$", lines[0]):
        lines = lines[1:]
    return " ".join(lines)[:300]


def read_cases(path):
    """[(name, outcome, reason)] of one report; outcome is passed, failed or
    skipped; name is Suite.Case, or None for the one case of a report Bazel
    wrote itself."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        # A report Bazel wrote from a log that is not valid XML still says
        # how the binary ended.
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        m = re.search(r'<error message="([^"]*)"', text)
        return [(None, "failed", m.group(1) if m else "unreadable report: %s" % e)]
    cases = []
    for case in root.iter("testcase"):
        # GoogleTest names a case's suite in classname; a report Bazel wrote
        # itself has none (its one case is the target).
        classname = case.get("classname")
        full = "%s.%s" % (classname, case.get("name", "?")) if classname else None
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            cases.append((full, "failed", one_line(bad.get("message") or bad.text)))
        elif skipped is not None or case.get("result") in ("skipped", "suppressed") or case.get("status") == "notrun":
            reason = one_line(skipped.get("message") or skipped.text) if skipped is not None else ""
            if not reason and case.get("result") == "suppressed":
                reason = "disabled"
            cases.append((full, "skipped", reason or "no reason given"))
        elif full is None and sh_skip_reason(path, root):
            # A script test that found nothing to run said so ("SKIPPED:
            # why" at the start of a line) and exited 0: a skip, not a pass.
            cases.append((full, "skipped", sh_skip_reason(path, root)))
        else:
            cases.append((full, "passed", ""))
    return cases


def sh_skip_reason(path, root):
    """The reason of a "SKIPPED: why" line in a script test's output (the
    report's system-out, or the test.log beside it), or ""."""
    texts = [e.text or "" for e in root.iter("system-out")]
    log = os.path.join(os.path.dirname(path), "test.log")
    if os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            texts.append(f.read())
    for text in texts:
        m = re.search(r"^SKIPPED: (.+)$", text, re.MULTILINE)
        if m:
            return one_line(m.group(1))
    return ""


def tally(testlogs, targets, statuses, out):
    passed = failed = skipped = 0
    for target in targets:
        status = statuses.get(target)
        files = reports(target_dir(testlogs, target))
        if status is not None and status not in ("PASSED", "FLAKY"):
            if status in ("FAILED TO BUILD", "NO STATUS", "SKIPPED", "BUILT"):
                files = []  # whatever report is there is from an earlier run
        if not files:
            why = {"FAILED TO BUILD": "failed to build", "NO STATUS": "did not run (no status)"}.get(
                status, "no test report (status %s)" % (status or "unknown"))
            print("FAILED %s: %s" % (target, why), file=out)
            failed += 1
            continue
        target_failed = 0
        for path in files:
            for name, outcome, reason in read_cases(path):
                if outcome == "failed":
                    target_failed += 1
                    where = target if name is None else "%s %s" % (target, name)
                    if status == "TIMEOUT" and name is None:
                        # Bazel 4's report of a timed-out binary says only
                        # "exited with error code 142" (128 + SIGALRM).
                        reason = "timed out (Bazel's limit for the target's size; its report: %s)" % reason
                    print("FAILED %s: %s" % (where, reason or "failed"), file=out)
                elif outcome == "skipped":
                    skipped += 1
                    print("skipped %s: %s" % (target if name is None else "%s %s" % (target, name), reason),
                          file=out)
                else:
                    passed += 1
        if target_failed == 0 and status is not None and status not in ("PASSED", "FLAKY"):
            print("FAILED %s: %s although its report shows no failed case (it failed on exit)" % (target, status),
                  file=out)
            target_failed = 1
        failed += target_failed
    return passed, failed, skipped


def read_extra(path, out):
    passed = failed = skipped = 0
    if not path or not os.path.exists(path):
        return passed, failed, skipped
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            word, _, what = line.partition(" ")
            if word == "passed":
                passed += 1
            elif word == "failed":
                failed += 1
                print("FAILED %s" % what, file=out)
            elif word == "skipped":
                skipped += 1
                print("skipped %s" % what, file=out)
            else:
                failed += 1
                print("FAILED (unreadable result line: %r)" % line, file=out)
    return passed, failed, skipped


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testlogs", required=True, help="bazel info bazel-testlogs")
    parser.add_argument("--summary", help="the captured output of `bazel test`")
    parser.add_argument("--extra", help="results of checks run outside Bazel")
    parser.add_argument("targets", nargs="*", help="the test targets, //pkg:name")
    args = parser.parse_args(argv[1:])
    statuses = read_summary(args.summary)
    p, f, s = tally(args.testlogs, args.targets, statuses, sys.stdout)
    ep, ef, es = read_extra(args.extra, sys.stdout)
    p, f, s = p + ep, f + ef, s + es
    if p + f + s == 0:
        print("FAILED: no test ran")
        f = 1
    print("%d passed, %d failed, %d skipped" % (p, f, s))
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
