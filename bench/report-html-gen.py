#!/usr/bin/env python3
"""Writes a 24 h samples.csv beside a real result.json (bench/report-html.sh).

Usage: report-html-gen.py TEMPLATE_DIR OUT_DIR INTERVAL_S [HOURS]
The instances and I/O classes are the template's own (its samples.csv); every interval gets a
row per instance and class with figures that wander (fixed seed), with a few spikes.
"""
import csv, os, random, shutil, sys

template, out, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
hours = float(sys.argv[4]) if len(sys.argv) > 4 else 24.0
os.makedirs(out, exist_ok=True)
for name in ("result.json", "report.md", "test.log"):
    shutil.copy(os.path.join(template, name), os.path.join(out, name))
with open(os.path.join(template, "samples.csv")) as f:
    reader = csv.DictReader(f)
    header = reader.fieldnames
    pairs = []
    for row in reader:
        key = (row["instance"], row["class"])
        if key not in pairs:
            pairs.append(key)
rng = random.Random(17)
steps = int(hours * 3600 / interval)
with open(os.path.join(out, "samples.csv"), "w") as f:
    f.write(",".join(header) + "\n")
    for step in range(1, steps + 1):
        t = step * interval
        for instance, cls in pairs:
            ops = 500 + 100 * rng.random()
            avg = 5 + 3 * rng.random() + (40 if rng.random() < 0.0005 else 0)
            f.write(f"{t:g},2026-11-26T00:00:00.000Z,{instance},{cls},{int(ops * interval)},"
                    f"{ops:.3f},{ops * 8192:.1f},{avg:.4f},{avg * 3:.4f},{avg * 9:.4f},20.0,1000\n")
