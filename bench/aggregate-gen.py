#!/usr/bin/env python3
"""Generates the results of HOSTS hosts x INSTANCES instances for bench/aggregate.sh.

Each host gets a result.json of the current schema: a performance test whose instances carry the
classes of a Jetstress-like run (db_read, db_write, log_write, bdm_read, replication_read,
db_extend, flush_map), each with a histogram in the exact-merge form (docs/results.md). The
buckets are keyed as HdrHistogram keys them with 2 significant digits (128 keys per octave above
256 ns: m * 2^k for m in 128..255), spread log-normally around each class's typical latency, so
a main class holds a few hundred non-empty buckets, as a two-hour run's do (a short run's hold
far fewer, and would flatter the timing). Fixed seed: the same files every time.

Usage: aggregate-gen.py DIR HOSTS INSTANCES [TEMPLATE]
TEMPLATE: a real result.json whose top level (host, parameters, layout, ...) is reused.
"""
import json
import math
import os
import random
import sys

LATENCY_MS = {  # class: (typical latency ms, spread, I/Os per second per instance, bytes, buckets)
    "db_read": (15.0, 0.8, 98.0, 33_000, 600),
    "db_write": (6.5, 0.8, 57.0, 37_000, 500),
    "log_write": (4.0, 0.6, 44.0, 5_500, 400),
    "bdm_read": (20.0, 0.7, 21.0, 262_000, 250),
    "replication_read": (12.0, 0.5, 1.0, 232_000, 120),
    "db_extend": (5.0, 0.5, 0.1, 1_048_576, 40),
    "flush_map": (1.0, 0.5, 0.5, 5_120, 60),
}


def key_of(ns):
    """HdrHistogram's lowest equivalent value with 2 significant digits (256 sub-buckets)."""
    ns = max(1, int(ns))
    if ns < 256:
        return ns
    shift = ns.bit_length() - 8
    return (ns >> shift) << shift


def histogram(rng, typical_ms, spread, count, buckets):
    counts = {}
    draws = min(count, buckets * 6)
    for _ in range(draws):
        ns = math.exp(rng.gauss(math.log(typical_ms * 1e6), spread))
        k = key_of(ns)
        counts[k] = counts.get(k, 0) + 1
    # Scale the draws up to `count` I/Os, keeping every bucket non-empty.
    keys = sorted(counts)
    scaled = [max(1, counts[k] * count // draws) for k in keys]
    scaled[-1] += count - sum(scaled) if count > sum(scaled) else 0
    total = sum(scaled)
    sum_ns = sum(k * c for k, c in zip(keys, scaled))
    return {
        "count": total,
        "sum_ns": str(sum_ns),
        "min_ns": keys[0],
        "max_ns": keys[-1],
        "buckets": [[k, c] for k, c in zip(keys, scaled)],
    }, total, sum_ns


def main():
    out, hosts, instances = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    template = {}
    if len(sys.argv) > 4:
        with open(sys.argv[4]) as f:
            template = json.load(f)
    rng = random.Random(20261126)
    seconds = 7200.0
    # A pool of histograms per class, drawn from at random per instance: drawing every
    # instance's afresh would take minutes for 1,000 hosts, and the merge's cost does not depend
    # on which buckets repeat.
    pool = {
        cls: [histogram(rng, typical, spread, max(1, int(rate * seconds * rng.uniform(0.95, 1.05))), buckets)
              for _ in range(12)]
        for cls, (typical, spread, rate, size, buckets) in LATENCY_MS.items()
    }
    os.makedirs(out, exist_ok=True)
    for h in range(hosts):
        name = "host%04d" % h
        result = dict(template)
        result["host"] = dict(template.get("host", {}), name=name)
        result["test"] = "performance"
        result["verdict"] = "pass"
        result["reasons"] = []
        result["measured_start"] = "2026-11-26T21:10:50.%03dZ" % rng.randrange(100)
        result["measured_end"] = "2026-11-26T23:10:50.%03dZ" % rng.randrange(100)
        result["instances"] = []
        achieved = 0.0
        for i in range(instances):
            instance = {
                "name": "Instance%d.%d" % (h, i + 1),
                "database_path": "/data/db%d.jpdb" % (i + 1),
                "log_path": "/logs/log%d" % (i + 1),
            }
            for cls, (typical, spread, rate, size, buckets) in LATENCY_MS.items():
                latency, total, sum_ns = rng.choice(pool[cls])
                ops = total / seconds
                if cls in ("db_read", "db_write"):
                    achieved += ops
                instance[cls] = {
                    "count": total,
                    "bytes": total * size,
                    "ops_per_sec": ops,
                    "avg_bytes": float(size),
                    "avg_latency_ms": sum_ns / total / 1e6,
                    "p50_ms": typical,
                    "p95_ms": typical * 2,
                    "p99_ms": typical * 3,
                    "p999_ms": typical * 4,
                    "max_ms": latency["max_ns"] / 1e6,
                    "max_interval_avg_ms": typical * 1.5,
                    "histogram": {
                        "count": total,
                        "bytes": total * size,
                        "latency": latency,
                        "sync_latency": {
                            "count": 0, "sum_ns": "0", "min_ns": 0, "max_ns": 0, "buckets": []
                        },
                    },
                }
            result["instances"].append(instance)
        result["achieved_iops"] = achieved
        result["target_iops"] = 459.0
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "result.json"), "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
