#!/usr/bin/env python3
"""The nearest reference for `jetproof report` (bench/report-html.sh): Python's csv module reading
the same samples.csv and computing the same per-interval series (transactional IOPS, each
class's I/O-weighted average and highest p99). Prints the interval count and the peak IOPS."""
import csv, sys
from collections import defaultdict

series = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0, 0.0, 0.0]))
with open(sys.argv[1]) as f:
    for row in csv.DictReader(f):
        t = float(row["elapsed_s"])
        s = series[row["class"]][t]
        count = float(row["count"])
        s[0] += float(row["ops_per_sec"])
        s[1] += float(row["avg_latency_ms"]) * count
        s[2] += count
        s[3] = max(s[3], float(row["p99_latency_ms"]))
iops = defaultdict(float)
for cls in ("db_read", "db_write"):
    for t, s in series[cls].items():
        iops[t] += s[0]
print(len(iops), round(max(iops.values()), 3))
