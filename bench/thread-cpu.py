#!/usr/bin/env python3
"""CPU seconds per thread of one command, summed by thread name (issue 38: which of jetproof's
threads the CPU goes to, e.g. the flusher `jetproof-flush` against the sessions).

Usage: bench/thread-cpu.py COMMAND [ARGS...]
Runs COMMAND (its output discarded) and reads /proc/PID/task/*/stat every 0.2 s; a thread's
figure is its user + system time at the last reading before it ended, so up to 0.2 s of a
thread that ends early can be missed. Threads without a name of their own (jetproof's sessions)
carry the program's name; io_uring's kernel workers (`iou-wrk-N`) are summed as `iou-wrk`.
Prints one line: `name=seconds` per name, largest first, and the total. The whole process is
counted (start-up, warm-up and shut-down included), unlike result.json's
`cpu_us_per_transactional_io`, which is the measured window's.
"""
import collections
import os
import subprocess
import sys
import time

if len(sys.argv) < 2:
    sys.exit("usage: bench/thread-cpu.py COMMAND [ARGS...]")
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
ticks = os.sysconf("SC_CLK_TCK")
last = {}
while proc.poll() is None:
    try:
        tasks = os.listdir(f"/proc/{proc.pid}/task")
    except OSError:
        tasks = []
    for tid in tasks:
        try:
            with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        last[tid] = (name, (int(fields[11]) + int(fields[12])) / ticks)
    time.sleep(0.2)
by_name = collections.defaultdict(float)
for name, seconds in last.values():
    by_name["iou-wrk" if name.startswith("iou-wrk") else name] += seconds
total = sum(by_name.values())
print(
    " ".join(f"{k}={v:.1f}s" for k, v in sorted(by_name.items(), key=lambda kv: -kv[1])),
    f"total={total:.1f}s",
)
sys.exit(proc.returncode)
