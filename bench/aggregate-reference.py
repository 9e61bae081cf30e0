#!/usr/bin/env python3
"""The nearest reference for `jetproof aggregate` (no aggregation tool for Jetstress results
exists): Python's json module reads the same result.json files, sums every class's counts and
rates, merges the histograms' buckets and takes the p99 of the merged histogram (nearest rank,
reported as the top of its bucket, clamped to the exact min and max: jetproof_io::hist's rule).
Prints one JSON object: {class: {count, ops_per_sec, p99_ms}, "achieved_iops": sum}.

Usage: aggregate-reference.py DIR   (DIR/*/result.json, as `jetproof aggregate DIR`)
"""
import glob
import json
import math
import os
import sys


def top_of_bucket(key):
    if key < 256:
        return key
    shift = key.bit_length() - 8
    return key + (1 << shift) - 1


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "*", "result.json")))
    classes = {}
    achieved = 0.0
    for path in files:
        with open(path) as f:
            result = json.load(f)
        if result.get("aggregate"):
            continue
        achieved += result.get("achieved_iops") or 0.0
        for instance in result["instances"]:
            for key, value in instance.items():
                if not isinstance(value, dict) or "histogram" not in value:
                    continue
                c = classes.setdefault(key, {"count": 0, "rate": 0.0, "buckets": {}, "min": None, "max": 0})
                c["count"] += value["count"]
                c["rate"] += value["ops_per_sec"]
                h = value["histogram"]["latency"]
                for k, n in h["buckets"]:
                    c["buckets"][k] = c["buckets"].get(k, 0) + n
                c["min"] = h["min_ns"] if c["min"] is None else min(c["min"], h["min_ns"])
                c["max"] = max(c["max"], h["max_ns"])
    out = {"achieved_iops": achieved, "files": len(files)}
    for key, c in classes.items():
        total = sum(c["buckets"].values())
        rank = min(max(math.ceil(0.99 * total), 1), total)
        seen = 0
        p99 = c["max"]
        for k in sorted(c["buckets"]):
            seen += c["buckets"][k]
            if seen >= rank:
                p99 = min(max(top_of_bucket(k), c["min"]), max(c["max"], c["min"]))
                break
        out[key] = {"count": c["count"], "ops_per_sec": c["rate"], "p99_ms": p99 / 1e6}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
