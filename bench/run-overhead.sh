#!/usr/bin/env bash
# Benchmark of the workload driver's cost (issue 5 targets): CPU µs per transactional I/O of
# `jetproof run --test performance`, against fio's CPU µs per I/O for 32 KiB random direct reads
# at the same number of I/Os in flight on the same file system, in the same run; and the run's
# peak resident memory against the bound sum(cache maxima) + 10% + 64 MiB.
#
# Usage: bench/run-overhead.sh [DIR]   (default ./bench-data; removed after)
# Environment: DB_SIZE (default 2GiB), DATABASES (2), THREADS (4), CACHE_MAX (64MiB), DURATION (30s).
# Writes bench/results/<date>-run-overhead.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
dir=${1:-$PWD/bench-data}
db_size=${DB_SIZE:-2GiB}
databases=${DATABASES:-2}
threads=${THREADS:-4}
cache_max=${CACHE_MAX:-64MiB}
duration=${DURATION:-30s}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
(cd "$here/.." && cargo build --release -q -p jetproof)
jetproof="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"

cat >"$dir/job.toml" <<JOB
[storage]
data_dir = "$dir/data"
databases = $databases
db_size = "$db_size"
[workload]
threads = $threads
[cache]
min_size = "8MiB"
max_size = "$cache_max"
[run]
duration = "$duration"
sample_interval = "5s"
JOB
rm -rf "$dir/data" "$dir/results" "$dir/init"
"$jetproof" init "$dir/job.toml" --out "$dir/init" >/dev/null
/usr/bin/time -f "%U %S %M" -o "$dir/time.txt" "$jetproof" run "$dir/job.toml" --test performance --out "$dir/results" >/dev/null
read -r user sys max_rss_kb <"$dir/time.txt"
read -r ios window < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
ios = sum(i[k]["count"] for i in r["instances"] for k in ("db_read", "db_write") if k in i)
bdm = sum(i["bdm_read"]["count"] for i in r["instances"] if "bdm_read" in i)
print(ios + bdm, r["totals"]["measured_seconds"])' "$dir/results/result.json")

# fio: the same number of I/Os in flight (sessions x databases), 32 KiB random reads, direct.
depth=$((threads * databases))
fio --name=layout --filename="$dir/fio.dat" --rw=write --bs=1M --size=1G --direct=1 >/dev/null 2>&1
fio --output-format=json --name=rr --filename="$dir/fio.dat" --rw=randread --bs=32k --size=1G \
  --direct=1 --ioengine=psync --numjobs="$depth" --group_reporting --runtime=15 --time_based \
  >"$dir/fio.json" 2>/dev/null
fio_us=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"]
cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000
print("%.2f" % (cpu_s / ios * 1e6))' "$dir/fio.json")
rm -rf "$dir/data" "$dir/results" "$dir/init" "$dir/fio.dat" "$dir/fio.json" "$dir/time.txt"

out="$here/results/$(date -u +%Y-%m-%d)-run-overhead.md"
python3 - "$user" "$sys" "$max_rss_kb" "$ios" "$window" "$fio_us" "$databases" "$cache_max" >"$out.body" <<'PY'
import sys
user, sys_s, rss_kb, ios, window, fio_us = map(float, sys.argv[1:7])
databases, cache_max = int(sys.argv[7]), sys.argv[8]
units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
cache = next(float(cache_max[:-3]) * v for k, v in units.items() if cache_max.endswith(k))
bound = databases * cache * 1.10 + 64 * (1 << 20)
# The process's CPU covers warm-up and shut-down too, so per-I/O cost is an upper bound.
us = (user + sys_s) / ios * 1e6
print("| figure | jetproof | fio | ratio |")
print("| --- | ---: | ---: | ---: |")
print(f"| CPU µs per I/O (whole process, incl. warm-up) | {us:.2f} | {fio_us:.2f} | {us / fio_us:.2f} |")
print()
print(f"I/Os in the measured window: {ios:.0f} over {window:.1f} s; process CPU {user:.1f} s user + {sys_s:.1f} s system.")
print()
print("| memory | MiB |")
print("| --- | ---: |")
print(f"| peak resident set | {rss_kb / 1024:.1f} |")
print(f"| bound: {databases} x {cache_max} cache + 10% + 64 MiB | {bound / (1 << 20):.1f} |")
print(f"| within the bound | {'yes' if rss_kb * 1024 <= bound else 'NO'} |")
PY
{
  echo "# run: driver CPU per I/O and memory"
  echo
  machine_notes "$dir"
  echo "## Commands"
  echo
  echo '```'
  echo "jetproof init job.toml && /usr/bin/time jetproof run job.toml --test performance"
  echo "# job: $databases databases of $db_size, $threads sessions each, cache 8MiB/$cache_max, $duration window"
  echo "fio --rw=randread --bs=32k --direct=1 --ioengine=psync --numjobs=$depth --group_reporting --runtime=15 --time_based"
  echo '```'
  echo
  cat "$out.body"
} >"$out"
rm -f "$out.body"
cat "$out"
