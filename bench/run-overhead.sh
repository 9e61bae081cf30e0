#!/usr/bin/env bash
# Benchmark of the workload driver's cost (issue 5 targets): CPU µs per transactional I/O of
# `jetproof run --test performance`, with the in-memory backend (no device: the driver alone)
# and on this machine's disk, against fio's CPU µs per I/O for 32 KiB random direct reads at the
# same number of I/Os in flight on the same file system, in the same rounds; and the disk run's
# peak resident memory against the bound sum(cache maxima) + 10% + 64 MiB.
#
# The CPU figure is the run's own `totals.cpu_us_per_transactional_io` (docs/results.md): the
# process's CPU time (every thread) over the measured window only, divided by the window's
# database reads and writes. The whole-process figure of /usr/bin/time (init excluded; attach,
# warm-up and shut-down included) is shown beside it for the disk run.
#
# The in-memory run: `jetproof run` always uses the portable backend, so the mem variant runs the
# same procedures (init, then the performance test) in one process over
# `jetproof_io::mem::MemBackend`, through the example `mem_bench` of jetproof-procedures.
#
# Before/after: with BASE_JETPROOF and BASE_MEM_BENCH set (a `jetproof` binary and a
# jetproof-procedures `mem_bench` example binary built from an earlier commit), every round also runs
# them, interleaved with the current build, and the table gains their columns. The machine is
# shared: compare within rounds, and medians over rounds.
#
# Usage: bench/run-overhead.sh [DIR]   (default ./bench-data; removed after)
# Environment: DB_SIZE (default 512MiB), DATABASES (2), THREADS (4), CACHE_MAX (64MiB),
# DURATION (20s), ROUNDS (3), FIO_SIZE (1G), FIO_RUNTIME (15), BASE_JETPROOF, BASE_MEM_BENCH,
# BASE_LABEL (before), NOW_JETPROOF and NOW_MEM_BENCH (binaries to measure instead of building
# the working tree), NOW_LABEL (now), OUT (default bench/results/<date>-run-overhead.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
dir=${1:-$PWD/bench-data}
db_size=${DB_SIZE:-512MiB}
databases=${DATABASES:-2}
threads=${THREADS:-4}
cache_max=${CACHE_MAX:-64MiB}
duration=${DURATION:-20s}
rounds=${ROUNDS:-3}
fio_size=${FIO_SIZE:-1G}
fio_runtime=${FIO_RUNTIME:-15}
base_label=${BASE_LABEL:-before}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)")
if [[ -n ${NOW_JETPROOF:-} && -n ${NOW_MEM_BENCH:-} ]]; then
  jetproof=$NOW_JETPROOF
  mem_bench=$NOW_MEM_BENCH
else
  (cd "$here/.." && cargo build --release -q -p jetproof)
  jetproof="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
  (cd "$here/.." && cargo build --release -q -p jetproof-procedures --example mem_bench)
  mem_bench="${CARGO_TARGET_DIR:-$here/../target}/release/examples/mem_bench"
fi
variants=("${NOW_LABEL:-now} $jetproof $mem_bench")
if [[ -n ${BASE_JETPROOF:-} && -n ${BASE_MEM_BENCH:-} ]]; then
  variants=("$base_label $BASE_JETPROOF $BASE_MEM_BENCH" "${variants[@]}")
fi

job() { # $1: data dir, $2: direct_io
  cat <<JOB
[storage]
data_dir = "$1"
databases = $databases
db_size = "$db_size"
direct_io = $2
[workload]
threads = $threads
[cache]
min_size = "8MiB"
max_size = "$cache_max"
[run]
duration = "$duration"
sample_interval = "5s"
JOB
}

figures() { # result.json -> "cpu_us_per_io transactional_ios iops"
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
ios = sum(i[k]["count"] for i in r["instances"] for k in ("db_read", "db_write") if k in i)
print("%.3f %d %.0f" % (r["totals"]["cpu_us_per_transactional_io"], ios, r["achieved_iops"]))' "$1"
}

run_mem() { # $1: mem bench binary -> "cpu_us iops"
  rm -rf "$dir/mem"
  mkdir -p "$dir/mem"
  job "$dir/mem/data" false >"$dir/mem/job.toml"
  JETPROOF_BENCH_JOB="$dir/mem/job.toml" JETPROOF_BENCH_OUT="$dir/mem/out" \
    "$1" >/dev/null
  local us ios iops
  read -r us ios iops < <(figures "$dir/mem/out/results/result.json")
  rm -rf "$dir/mem"
  echo "$us $iops"
}

run_disk() { # $1: jetproof binary -> "cpu_us whole_us iops max_rss_kb"
  rm -rf "$dir/data" "$dir/results" "$dir/init"
  job "$dir/data" true >"$dir/job.toml"
  "$1" init "$dir/job.toml" --out "$dir/init" >/dev/null
  /usr/bin/time -f "%U %S %M" -o "$dir/time.txt" \
    "$1" run "$dir/job.toml" --test performance --out "$dir/results" >/dev/null
  local user sys rss us ios iops
  read -r user sys rss <"$dir/time.txt"
  read -r us ios iops < <(figures "$dir/results/result.json")
  rm -rf "$dir/data" "$dir/results" "$dir/init" "$dir/time.txt" "$dir/job.toml"
  echo "$us $(python3 -c "print('%.3f' % (($user + $sys) / $ios * 1e6))") $iops $rss"
}

depth=$((threads * databases))
run_fio() { # -> "cpu_us iops"
  fio --name=layout --filename="$dir/fio.dat" --rw=write --bs=1M --size="$fio_size" --direct=1 \
    >/dev/null 2>&1
  fio --output-format=json --name=rr --filename="$dir/fio.dat" --rw=randread --bs=32k \
    --size="$fio_size" --direct=1 --ioengine=psync --numjobs="$depth" --group_reporting \
    --runtime="$fio_runtime" --time_based >"$dir/fio.json" 2>/dev/null
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
ios = j["read"]["total_ios"]
# With group_reporting, job_runtime is summed over the jobs and usr/sys_cpu are their average.
cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000
print("%.3f %.0f" % (cpu_s / ios * 1e6, j["read"]["iops"]))' "$dir/fio.json"
  rm -f "$dir/fio.dat" "$dir/fio.json"
}

rows=()
for round in $(seq 1 "$rounds"); do
  for variant in "${variants[@]}"; do
    read -r label bin mem <<<"$variant"
    echo "round $round of $rounds: $label ..." >&2
    read -r mem_us mem_iops < <(run_mem "$mem")
    read -r disk_us whole_us disk_iops rss < <(run_disk "$bin")
    rows+=("$round $label $mem_us $mem_iops $disk_us $whole_us $disk_iops $rss")
  done
  read -r fio_us fio_iops < <(run_fio)
  rows+=("$round fio $fio_us $fio_iops")
done
rmdir "$dir" 2>/dev/null || true
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

out=${OUT:-$here/results/$(date -u +%Y-%m-%d)-run-overhead.md}
body=$(printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
databases, cache_max = int(sys.argv[1]), sys.argv[2]
rows = [l.split() for l in sys.stdin if l.strip()]
fio = {int(r[0]): (float(r[2]), float(r[3])) for r in rows if r[1] == "fio"}
runs = [r for r in rows if r[1] != "fio"]
labels = list(dict.fromkeys(r[1] for r in runs))
print("| round | build | mem: CPU µs per I/O | mem: IOPS | disk: CPU µs per I/O | disk: whole process | disk: IOPS | fio: CPU µs per I/O | fio: IOPS | disk ÷ fio | mem ÷ fio |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
per = {l: [] for l in labels}
for r in runs:
    n, label = int(r[0]), r[1]
    mem_us, mem_iops, disk_us, whole_us, disk_iops = map(float, r[2:7])
    fio_us, fio_iops = fio[n]
    per[label].append((mem_us, mem_iops, disk_us, whole_us, disk_iops, fio_us, fio_iops, float(r[7])))
    print("| %d | %s | %.2f | %.0f | %.2f | %.2f | %.0f | %.2f | %.0f | %.2f | %.2f |" % (
        n, label, mem_us, mem_iops, disk_us, whole_us, disk_iops, fio_us, fio_iops,
        disk_us / fio_us, mem_us / fio_us))
for label in labels:
    v = per[label]
    med = lambda i: statistics.median(x[i] for x in v)
    ratio = lambda i: statistics.median(x[i] / x[5] for x in v)
    print("| **median** | **%s** | **%.2f** | %.0f | **%.2f** | %.2f | %.0f | **%.2f** | %.0f | **%.2f** | **%.2f** |" % (
        label, med(0), med(1), med(2), med(3), med(4), med(5), med(6), ratio(2), ratio(0)))
print()
print("CPU µs per I/O of jetproof: the run'"'"'s `totals.cpu_us_per_transactional_io` (process CPU over")
print("the measured window ÷ its database reads and writes); \"whole process\": /usr/bin/time'"'"'s user +")
print("system of the whole `run` command ÷ the same I/Os. Ratios are medians of the per-round ratios")
print("(fio ran once per round, after the jetproof runs).")
print()
units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
cache = next(float(cache_max[:-3]) * u for k, u in units.items() if cache_max.endswith(k))
bound = databases * cache * 1.10 + 64 * (1 << 20)
print("| memory (disk run) | MiB |")
print("| --- | ---: |")
for label in labels:
    rss = max(x[7] for x in per[label])
    print("| peak resident set, %s (largest round) | %.1f |" % (label, rss / 1024))
    print("| within the bound (%s) | %s |" % (label, "yes" if rss * 1024 <= bound else "NO"))
print("| bound: %d x %s cache + 10%% + 64 MiB | %.1f |" % (databases, cache_max, bound / (1 << 20)))
' "$databases" "$cache_max")
{
  echo "# run: driver CPU per I/O and memory"
  echo
  echo "$notes"
  echo "- load average at the end: $load_end"
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "bench/run-overhead.sh   # DB_SIZE=$db_size DATABASES=$databases THREADS=$threads CACHE_MAX=$cache_max DURATION=$duration ROUNDS=$rounds"
  echo "# each round, for each build:"
  echo "# mem:  JETPROOF_BENCH_JOB=job.toml JETPROOF_BENCH_OUT=out target/release/examples/mem_bench   # cargo build --release -p jetproof-procedures --example mem_bench"
  echo "# disk: jetproof init job.toml && /usr/bin/time jetproof run job.toml --test performance   (direct I/O, std backend)"
  echo "# job: $databases databases of $db_size, $threads sessions each, cache 8MiB/$cache_max, $duration window, unpaced"
  echo "# then fio: fio --rw=randread --bs=32k --size=$fio_size --direct=1 --ioengine=psync --numjobs=$depth --group_reporting --runtime=$fio_runtime --time_based"
  echo '```'
  echo
  echo "## Figures"
  echo
  echo "$body"
} >"$out"
cat "$out"
