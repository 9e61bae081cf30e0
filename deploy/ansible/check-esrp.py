#!/usr/bin/env python3
"""Checks an esrp.md of a rehearsal against the hosts' result.json files, apart from jetproof's
own code (jetproof esrp --verify is the other check): used by test-namespaces.sh after
solution.yml ran the whole set at rehearsal scale (docs/many-servers.md).

    check-esrp.py RESULTS ESRP_MD PLAN_JSON TESTS HOST...

RESULTS is laid out RESULTS/HOST/TEST/result.json; PLAN_JSON is `jetproof plan --json` of the
solution's flags. Checked, from the results read here as plain JSON:
  - every host ran every test, as a rehearsal (run.rehearsal), under its own name, one start
    time per test for all hosts, each measured part starting 0-100 ms after it (performance,
    stress, backup), soft recovery replaying the rehearsal's log count or more;
  - the document: title and first page marked a rehearsal naming every result, "Not a
    rehearsal" not met, not a complete test set;
  - the first page's requirement on the plan's target: every server's achieved IOPS and verdict;
  - each server's heading: the plan's target, the achieved IOPS, the one verdict (pass when the
    run passed and achieved the target);
  - each server's table: target, achieved, database reads, writes and transfers summed over its
    databases, log writes summed, latencies averaged, the log replication rows (copies > 1);
  - the aggregate: the plan's total target, the servers' sum achieved, the rows the servers' sums
    (latencies the average of the servers');
  - the backup table: each database's MB/s, every server's the sum of its databases' (average x
    databases = per server), all servers' the sum of the servers';
  - windows that do not overlap (backup, soft recovery: milliseconds long here) said so;
  - soft recovery: the rehearsal's log count generated (or more), at least that replayed, the table's
    logs replayed per server.
"""
import json
import os
import re
import sys
from datetime import datetime

results_dir, md_path, plan_path, tests = sys.argv[1:5]
tests = tests.split(",")
hosts = sys.argv[5:]
md = open(md_path, encoding="utf-8").read()
plan = json.load(open(plan_path))
failures = []
checked = 0


def expect(ok, what):
    global checked
    checked += 1
    if not ok:
        failures.append(what)


def close(printed, value, decimals, what):
    """printed (a cell of `decimals` decimals) is value, allowing the last digit's rounding."""
    tolerance = 0.5 * 10 ** -decimals * 1.02 + 1e-9 * abs(value)
    expect(printed is not None and abs(printed - value) <= tolerance,
           f"{what}: the document has {printed}, the results give {value:.4f}")


def when(text):
    return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def mean(values):
    return sum(values) / len(values) if values else 0.0


results = {}
for h in hosts:
    for t in tests:
        path = os.path.join(results_dir, h, t, "result.json")
        if not os.path.exists(path):
            failures.append(f"{h}: no {t} result ({path})")
            continue
        results[(h, t)] = json.load(open(path))
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)

# The runs themselves.
for t in tests:
    starts = {results[(h, t)].get("requested_start") for h in hosts}
    expect(len(starts) == 1 and None not in starts, f"{t}: not one start time: {starts}")
    for h in hosts:
        r = results[(h, t)]
        expect(r["host"]["name"] == h, f"{h} {t}: host name {r['host']['name']}")
        expect(r["parameters"]["run"]["rehearsal"] is True, f"{h} {t}: not run as a rehearsal")
        skew = (when(r["measured_start"]) - when(r["requested_start"])) * 1000
        if t != "soft-recovery":
            expect(0 <= skew < 100, f"{h} {t}: started {skew:.1f} ms after the start time")
        expect(abs(skew - r["start_skew_ms"]) <= 1, f"{h} {t}: start_skew_ms {r['start_skew_ms']} against {skew:.1f}")

# The marks of a rehearsal.
lines = md.splitlines()
expect(lines[0].startswith("# ") and lines[0].endswith("(REHEARSAL)"), f"title: {lines[0]}")
mark = next((l for l in lines if l.startswith("**REHEARSAL, NOT AN ESRP TEST.**")), None)
expect(mark is not None, "no rehearsal mark on the first page")
for h in hosts:
    for t in tests:
        name = {"soft-recovery": "recovery"}.get(t, t)
        expect(mark is not None and re.search(rf"\b{re.escape(h)} (soft[- ])?{name}\b", mark) is not None,
               f"the rehearsal mark does not name {h} {t}: {mark}")
requirement = next((l for l in lines if l.startswith("| Not a rehearsal |")), "")
expect(requirement.rstrip().endswith("| NO |"), f"requirement: {requirement!r}")
expect("**NOT A COMPLETE ESRP TEST SET.**" in md, "a rehearsal marked complete")


def section(heading):
    """The lines under the first heading whose text starts with `heading`, up to the next."""
    for i, l in enumerate(lines):
        if l.startswith("#") and l.lstrip("#").strip().startswith(heading):
            body = []
            for m in lines[i + 1:]:
                if m.startswith("#"):
                    break
                body.append(m)
            return l, body
    return None, []


def cell(body, label):
    for l in body:
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] == label:
            try:
                return float(cells[-1].replace(",", ""))
            except ValueError:
                return None
    return None


def classes(r, name):
    found = [i[name] for i in r["instances"] if isinstance(i.get(name), dict)]
    return sum(c["ops_per_sec"] for c in found), mean([c["avg_latency_ms"] for c in found]), len(found)


target = plan["target_iops_per_server"]
# Log replication rows (copies 2) are in the document once any server measured replication
# reads; a rehearsal's seconds-long windows may close no log on any server.
any_repl = any(classes(results[(h, "performance")], "replication_read")[2] >= 1 for h in hosts)
servers = {}
for h in hosts:
    r = results[(h, "performance")]
    reads, read_ms, _ = classes(r, "db_read")
    writes, write_ms, _ = classes(r, "db_write")
    logs, log_ms, _ = classes(r, "log_write")
    repl, repl_ms, repl_n = classes(r, "replication_read")
    servers[h] = dict(reads=reads, read_ms=read_ms, writes=writes, write_ms=write_ms, logs=logs,
                      log_ms=log_ms, repl=repl, repl_ms=repl_ms, repl_n=repl_n,
                      achieved=r["achieved_iops"], verdict=r["verdict"])
    heading, body = section(f"Individual Server Metrics: {h} ")
    expect(heading is not None, f"no Individual Server Metrics for {h}")
    if heading is None:
        continue
    m = re.search(r"\(target ([\d.,]+) IOPS \(the plan's\), achieved ([\d.,]+), (pass|FAIL)\)", heading)
    expect(m is not None, f"{h}: heading {heading!r}")
    if m:
        passes = r["verdict"] == "pass" and r["achieved_iops"] >= target
        close(float(m.group(1).replace(",", "")), target, 3, f"{h} heading target")
        close(float(m.group(2).replace(",", "")), r["achieved_iops"], 3, f"{h} heading achieved")
        expect(m.group(3) == ("pass" if passes else "FAIL"), f"{h}: heading verdict {m.group(3)}, the results give {passes}")
    s = servers[h]
    close(cell(body, "Target Transactional IOPS"), target, 3, f"{h} target")
    close(cell(body, "Achieved Transactional IOPS"), s["achieved"], 3, f"{h} achieved")
    close(cell(body, "Database Disks Reads/sec"), s["reads"], 3, f"{h} reads/s")
    close(cell(body, "Database Disks Writes/sec"), s["writes"], 3, f"{h} writes/s")
    close(cell(body, "Database Disks Transfers/sec"), s["reads"] + s["writes"], 3, f"{h} transfers/s")
    close(cell(body, "Average Database Disk Read Latency (ms)"), s["read_ms"], 3, f"{h} read ms")
    close(cell(body, "Average Database Disk Write Latency (ms)"), s["write_ms"], 3, f"{h} write ms")
    close(cell(body, "Log Disks Writes/sec"), s["logs"], 3, f"{h} log writes/s")
    close(cell(body, "Average Log Disk Write Latency (ms)"), s["log_ms"], 3, f"{h} log ms")
    # A server whose copies read no closed log in a rehearsal's seconds-long window shows 0
    # once any server measured replication reads; when none did, the rows are absent.
    if any_repl:
        close(cell(body, "Log Replication Reads/sec"), s["repl"], 3, f"{h} replication reads/s")
        close(cell(body, "Average Log Replication Read Latency (ms)"), s["repl_ms"], 3, f"{h} replication ms")
    else:
        expect(cell(body, "Log Replication Reads/sec") is None, f"{h}: a replication row, but no server measured replication reads")


# The first page's requirement on the plan's target names every server's one verdict.
requirement = next((l for l in lines if l.startswith("| The plan's target IOPS on every server |")), "")
for h, s in servers.items():
    passes = s["verdict"] == "pass" and s["achieved"] >= target
    m = re.search(rf"\b{re.escape(h)} ([\d.]+) \((pass|FAIL)\)", requirement)
    expect(m is not None, f"the target requirement does not name {h}: {requirement}")
    if m:
        close(float(m.group(1)), s["achieved"], 3, f"the target requirement's {h}")
        expect(m.group(2) == ("pass" if passes else "FAIL"), f"the target requirement's {h}: {m.group(2)}")
every = all(s["verdict"] == "pass" and s["achieved"] >= target for s in servers.values())
expect(requirement.rstrip().endswith("| yes |" if every else "| NO |"), f"the target requirement: {requirement}")

heading, body = section("Aggregate Performance Across All Servers")
expect(heading is not None, "no Aggregate Performance Across All Servers")
text = "\n".join(body)
m = re.search(r"target ([\d.,]+) IOPS \(the plan's, all servers\), achieved ([\d.,]+) \(the servers' sum\)", text)
expect(m is not None, f"aggregate: no target against achieved: {text[:300]}")
total = sum(s["achieved"] for s in servers.values())
if m:
    close(float(m.group(1).replace(",", "")), plan["target_iops_total"], 3, "aggregate target")
    close(float(m.group(2).replace(",", "")), total, 3, "aggregate achieved")
close(cell(body, "Target Transactional IOPS"), plan["target_iops_total"], 3, "aggregate target row")
close(cell(body, "Achieved Transactional IOPS"), total, 3, "aggregate achieved row")
sums = [("Database Disks Reads/sec", "reads"), ("Database Disks Writes/sec", "writes"),
        ("Log Disks Writes/sec", "logs")]
means = [("Average Database Disk Read Latency (ms)", "read_ms"),
         ("Average Log Disk Write Latency (ms)", "log_ms")]
if any_repl:
    sums.append(("Log Replication Reads/sec", "repl"))
    means.append(("Average Log Replication Read Latency (ms)", "repl_ms"))
else:
    expect(cell(body, "Log Replication Reads/sec") is None, "aggregate: a replication row, but no server measured replication reads")
for label, key in sums:
    close(cell(body, label), sum(s[key] for s in servers.values()), 3, f"aggregate {label}")
for label, key in means:
    close(cell(body, label), mean([s[key] for s in servers.values()]), 3, f"aggregate {label}")

# Backup: each database's MB/s, their average, per server their sum (average x databases = per
# server), all servers the sum of the servers'.
_, backup_section = section("Database Backup and Recovery Performance")


def row_of(first):
    for l in backup_section:
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if l.startswith("|") and cells[0] == first:
            return cells
    return None


solution_sum, solution_databases = 0.0, 0
for h in hosts:
    r = results[(h, "backup")]
    rates = [round(i["backup"]["mb_per_sec"], 2) for i in r["instances"]]
    cells = row_of(h)
    expect(cells is not None and len(cells) == 5, f"backup: no row for {h}: {cells}")
    if not cells or len(cells) != 5:
        continue
    expect(cells[1] == str(len(rates)), f"backup {h}: {cells[1]} databases, the results {len(rates)}")
    each = [float(x) for x in cells[2].split("+")]
    expect(len(each) == len(rates), f"backup {h}: {len(each)} databases' rates, the results {len(rates)}")
    for n, (printed, rate) in enumerate(zip(each, rates)):
        close(printed, rate, 2, f"backup {h} database {n + 1}")
    server = sum(rates)
    close(float(cells[3]), server / len(rates), 3, f"backup {h} average")
    close(float(cells[4]), server, 2, f"backup {h} per server (sum of its databases)")
    # Multiplied out as printed: average x databases = per server.
    close(float(cells[3]) * len(rates), float(cells[4]), 2, f"backup {h}: average x {len(rates)} databases")
    solution_sum += float(cells[4])
    solution_databases += len(rates)
cells = row_of("**All servers**")
expect(cells is not None, "backup: no All servers row")
if cells:
    expect(cells[1] == str(solution_databases), f"backup all servers: {cells[1]} databases, the results {solution_databases}")
    close(float(cells[4]), solution_sum, 2, "backup all servers (the servers' sum)")


def window(r):
    return when(r["measured_start"]), when(r["measured_end"])


# Windows that do not overlap are said, per test (a 10 MiB backup from the page cache lasts
# milliseconds: the hosts' may not overlap); those that overlap are combined.
for t, name in [("backup", "backup"), ("soft-recovery", "recovery")]:
    spans = [window(results[(h, t)]) for h in hosts]
    apart = max(a for a, _ in spans) >= min(b for _, b in spans)
    said = f"The {name} results could not be combined: windows do not overlap" in md
    expect(said == apart, f"{t}: windows {'do not overlap' if apart else 'overlap'}, the document {'says' if said else 'does not say'} they do not")

# Soft recovery: the rehearsal's log count generated, at least that many replayed, the table's
# logs replayed per server the sum of its instances'.
for h in hosts:
    r = results[(h, "soft-recovery")]
    wanted = r["parameters"]["run"]["recovery_log_files"]
    replayed = 0
    generated = 0
    for i in r["instances"]:
        # At least the rehearsal's count (a generation may close at the end too).
        expect(i.get("logs_generated", 0) >= wanted, f"{h} {i['name']}: generated {i.get('logs_generated')} log files, the rehearsal {wanted}")
        expect(i.get("logs_replayed", 0) >= wanted, f"{h} {i['name']}: replayed {i.get('logs_replayed')} of {wanted}")
        replayed += i.get("logs_replayed", 0)
        generated += i.get("logs_generated", 0)
    # | server | logs generated | logs replayed | seconds |: only generated logs count toward 500.
    recovery = [l for l in backup_section if l.startswith(f"| {h} |") and l.count("|") == 5]
    expect(len(recovery) == 1, f"soft recovery: rows for {h}: {recovery}")
    if len(recovery) == 1:
        cells = [c.strip() for c in recovery[0].split("|")]
        expect(cells[2] == str(generated), f"soft recovery {h}: {recovery[0]}, the results {generated} logs generated")
        expect(cells[3] == str(replayed), f"soft recovery {h}: {recovery[0]}, the results {replayed} logs replayed")

if failures:
    print(f"FAIL ({len(failures)} of {checked} checks):\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"ok: {checked} checks of {os.path.basename(md_path)} against {len(results)} result.json files "
      f"({len(hosts)} hosts x {len(tests)} tests, a rehearsal)")
