#!/usr/bin/env bash
# jetproof probe against fio, same file, same pattern, same run; writes
# bench/results/<date>-probe.md with machine notes, exact commands, figures and ratios.
#
#   BENCH_DIR=/mnt/disk-under-test bench/probe.sh
#
# Variables: BENCH_DIR (directory on the storage under test; default ./jetproof-bench-data),
# FILE_SIZE (default 1GiB), DURATION (seconds per run, default 10), ROUNDS (runs per tool and
# point, default 4), CARGO_TARGET_DIR, SKIP_BUILD=1 to use existing release binaries.
# Targets (issue 4): IOPS >= 95% of fio, CPU per I/O <= 1.2x fio, average latency within 5%.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
BENCH_DIR=${BENCH_DIR:-$repo/jetproof-bench-data}
FILE_SIZE=${FILE_SIZE:-1GiB}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-4}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
out_dir=$repo/bench/results
report=$out_dir/$(date -u +%F)-probe.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v fio >/dev/null; then
    echo "fio is missing; installing it with apt-get" >&2
    apt-get install -y fio >/dev/null
fi

# SKIP_BUILD=1 reuses the release binaries already built (e.g. while the tree is mid-change).
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    cargo build --release -p jetproof --quiet
    cargo build --release -p jetproof-io --example record_cost --quiet
fi
jetproof=$CARGO_TARGET_DIR/release/jetproof

mkdir -p "$BENCH_DIR" "$out_dir"
file=$BENCH_DIR/probe.dat
# Probe creates (or reuses) its own marked file; fio then runs on the same bytes, skipping the
# 4 KiB header block exactly as probe does.
"$jetproof" probe --path "$file" --file-size "$FILE_SIZE" --duration 1s --queue-depth 1 --json >/dev/null
size_bytes=$(stat -c %s "$file")
region=$((size_bytes - 4096))

# One point: fio and probe alternating for ROUNDS rounds on the same target and pattern.
# Arguments: name target fio_offset fio_size read_percent depth [extra probe flags...]
run_point() {
    local name=$1 target=$2 offset=$3 size=$4 read_percent=$5 depth=$6
    shift 6
    local rw=randrw
    if [ "$read_percent" = 100 ]; then rw=randread; fi
    local fio_cmd=(fio --name="$name" --filename="$target" --offset="$offset" --size="$size"
        --ioengine=io_uring --fixedbufs --registerfiles --direct=1 --bs=32k
        --rw="$rw" --rwmixread="$read_percent" --iodepth="$depth" --numjobs=1
        --runtime="$DURATION" --time_based --norandommap --randrepeat=0
        --output-format=json)
    local probe_cmd=("$jetproof" probe --path "$target" "$@" --block-size 32KiB
        --read-percent "$read_percent" --queue-depth "$depth" --duration "${DURATION}s" --random
        --io-engine io_uring --json)
    echo "== $name" >&2
    # Alternating order (fio first in odd rounds, probe first in even ones), so that drift of a
    # shared device hits both tools alike; the report takes the median of the rounds.
    for round in $(seq 1 "$ROUNDS"); do
        if [ $((round % 2)) = 1 ]; then
            "${fio_cmd[@]}" >"$work/$name.fio.$round.json"
            "${probe_cmd[@]}" >"$work/$name.probe.$round.json"
        else
            "${probe_cmd[@]}" >"$work/$name.probe.$round.json"
            "${fio_cmd[@]}" >"$work/$name.fio.$round.json"
        fi
    done
    printf '%s\n' "${fio_cmd[*]}" >"$work/$name.fio.cmd"
    printf '%s\n' "${probe_cmd[*]}" >"$work/$name.probe.cmd"
}

run_point randread-qd1 "$file" 4096 "$region" 100 1
run_point randread-qd8 "$file" 4096 "$region" 100 8
run_point randread-qd32 "$file" 4096 "$region" 100 32
run_point randrw70-qd16 "$file" 4096 "$region" 70 16

"$CARGO_TARGET_DIR/release/examples/record_cost" >"$work/record_cost.txt"

# The same through a loop device (root and losetup needed): probe on a raw block device, which it
# opens only with --allow-device. The image is ours, filled with random data first so that no
# tool pays for block allocation in it; the device is detached on exit.
if [ "$(id -u)" = 0 ] && command -v losetup >/dev/null; then
    dd if=/dev/urandom of="$BENCH_DIR/loop.img" bs=1M count=256 status=none
    loop=$(losetup -f --show "$BENCH_DIR/loop.img")
    trap 'losetup -d "$loop" 2>/dev/null; rm -rf "$work"' EXIT
    echo "$loop" >"$work/loop.name"
    run_point loop-randread-qd8 "$loop" 0 256M 100 8 --allow-device
    run_point loop-randrw70-qd8 "$loop" 0 256M 70 8 --allow-device 2>/dev/null
fi

python3 - "$work" "$report" "$file" "$DURATION" "$ROUNDS" <<'PY'
import json, os, platform, statistics, subprocess, sys
work, report, path, duration, rounds = sys.argv[1:6]
rounds = int(rounds)
names = ["randread-qd1", "randread-qd8", "randread-qd32", "randrw70-qd16"]

def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception as e:
        return str(e)

def fio_figures(doc):
    job = doc["jobs"][0]
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    runtime_s = max(job["read"]["runtime"], job["write"]["runtime"]) / 1000.0
    iops = job["read"]["iops"] + job["write"]["iops"]
    # Submission-to-completion latency (lat_ns = slat + clat), weighted by I/O count.
    lat = sum(job[d]["lat_ns"]["mean"] * job[d]["total_ios"] for d in ("read", "write")) / max(ios, 1) / 1e6
    cpu_s = (job["usr_cpu"] + job["sys_cpu"]) / 100.0 * runtime_s
    return {"iops": iops, "lat_ms": lat, "cpu_us_per_io": cpu_s * 1e6 / max(ios, 1),
            "p99_ms": job["read"]["clat_ns"]["percentile"].get("99.000000", 0) / 1e6}

def mean(runs, key):
    return statistics.median(r[key] for r in runs)

def probe_mean(runs):
    out = dict(runs[0])
    for key in ("iops", "avg_latency_ms", "cpu_us_per_io", "p99_latency_ms"):
        out[key] = mean(runs, key)
    devs = [r.get("device") or {} for r in runs]
    out["device"] = {k: statistics.median(d.get(k, float("nan")) for d in devs)
                     for k in ("avg_read_wait_ms", "avg_write_wait_ms", "reads_per_sec")}
    out["reads"] = {"avg_latency_ms": statistics.median(r["reads"]["avg_latency_ms"] for r in runs)}
    return out

spread = {}

def collect(names):
    rows = []
    for n in names:
        if not os.path.exists(f"{work}/{n}.fio.1.json"):
            continue
        fruns = [fio_figures(json.load(open(f"{work}/{n}.fio.{i}.json"))) for i in range(1, rounds + 1)]
        f = {k: mean(fruns, k) for k in fruns[0]}
        pruns = [json.load(open(f"{work}/{n}.probe.{i}.json")) for i in range(1, rounds + 1)]
        p = probe_mean(pruns)
        spread[n] = (min(r["iops"] for r in fruns), max(r["iops"] for r in fruns),
                     min(r["iops"] for r in pruns), max(r["iops"] for r in pruns))
        rows.append((n, f, p, open(f"{work}/{n}.fio.cmd").read().strip(), open(f"{work}/{n}.probe.cmd").read().strip()))
    return rows

rows = collect(names)
loop_rows = collect(["loop-randread-qd8", "loop-randrw70-qd8"])

def table(rows):
    out = []
    out.append("| point | fio IOPS | probe IOPS | IOPS ratio (≥ 0.95) | fio avg ms | probe avg ms | latency ratio (0.95–1.05) | fio CPU µs/IO | probe CPU µs/IO | CPU ratio (≤ 1.2) | probe p99 ms | probe read avg ms | kernel read wait ms |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, f, p, _, _ in rows:
        dev = p.get("device") or {}
        out.append(
            f"| {n} | {f['iops']:.0f} | {p['iops']:.0f} | {p['iops']/f['iops']:.3f} | {f['lat_ms']:.4f} | {p['avg_latency_ms']:.4f} | "
            f"{p['avg_latency_ms']/f['lat_ms']:.3f} | {f['cpu_us_per_io']:.2f} | {p['cpu_us_per_io']:.2f} | "
            f"{p['cpu_us_per_io']/max(f['cpu_us_per_io'],1e-9):.2f} | {p['p99_latency_ms']:.3f} | {p['reads']['avg_latency_ms']:.4f} | {dev.get('avg_read_wait_ms', float('nan')):.3f} |")
    return out

mem = sh("free -h | sed -n 2p")
fs = sh(f"df -T {os.path.dirname(path)} | tail -1")
cpu = sh("lscpu | grep 'Model name' | sed 's/Model name:\\s*//'")
lines = []
lines.append(f"# probe vs fio, {sh('date -u +%F')}\n")
lines.append("## Machine\n")
lines.append(f"- host: {platform.node()}, kernel {platform.release()}, {os.cpu_count()} CPUs ({cpu})")
lines.append(f"- memory: {mem}")
lines.append(f"- file system of the test file: `{fs}`")
lines.append(f"- fio: {sh('fio --version')}; the machine was shared with other work during the run, so single points carry noise.")
lines.append(f"- test file: {path} (made by probe; fio uses the same bytes after the 4 KiB header).\n")
lines.append("## Results (32 KiB, random, O_DIRECT, io_uring on both sides)\n")
lines.append(f"Each figure is the median of {rounds} runs per tool of {duration} s, the tools alternating which goes first.\n")
lines.extend(table(rows))
lines.append("\nfio's CPU is `(usr_cpu + sys_cpu) × runtime / I/Os` of its job; probe's is its process's user + system time (getrusage) per I/O, which includes recording every latency into the histograms. Latency on both sides is submission to completion (fio `lat_ns`). The kernel column is `/proc/diskstats` for the whole device over probe's runs (read time from queueing to completion per completed read, kept by the kernel in whole milliseconds); it includes every other process's reads of that device, so on a shared machine it is only indicative.\n")
lines.append("IOPS range over the runs (fio min–max / probe min–max), to judge the noise:\n")
for n in spread:
    a, b, c, d = spread[n]
    lines.append(f"- {n}: fio {a:.0f}–{b:.0f}, probe {c:.0f}–{d:.0f}")
lines.append("")
if loop_rows:
    dev = open(f"{work}/loop.name").read().strip()
    lines.append(f"## Loop device ({dev} over a 256 MiB image of random data in the bench directory, probe with `--allow-device`)\n")
    lines.extend(table(loop_rows))
    lines.append("")
    lines.append("Loop devices pass each I/O to a kernel worker that reads the image through the page cache, so these points measure the host far more than any disk; they show that probe drives a raw block device, not a device's speed.\n")
lines.append("## Recording cost (release build)\n")
lines.append("```\n" + open(f"{work}/record_cost.txt").read().strip() + "\n```\n")
lines.append("## Commands\n")
for n, _, _, fc, pc in rows + loop_rows:
    lines.append(f"- {n}:\n  - `{fc}`\n  - `{pc}`")
open(report, "w").write("\n".join(lines) + "\n")
print(report)
PY
