#!/usr/bin/env bash
# Benchmark of the workload driver's cost (issue 5 targets): CPU µs per transactional I/O of
# `jetproof run --test performance`, with the in-memory backend (no device: the driver alone)
# and on this machine's disk, against fio's CPU µs per I/O for 32 KiB random direct reads at the
# same number of I/Os in flight on the same file system, in the same rounds; and the disk run's
# peak resident memory against the bound sum(cache maxima) + 10% + 64 MiB.
#
# The disk run is made with each I/O engine of ENGINES (default "std io_uring": `--io-engine`,
# docs/io.md) in every round, the engines alternating which goes first, so that std and
# io_uring are compared within the same rounds, fio beside them.
#
# The issue's target is that the driver must not be the bottleneck before the device is: the
# results also give the cores jetproof would need to carry fio's random-read rate at its own CPU
# cost per I/O, as a share of this machine's cores (under 100%: the device limits first).
#
# The CPU figure is the run's own `totals.cpu_us_per_transactional_io` (docs/results.md): the
# process's CPU time (every thread) over the measured window only, divided by the window's
# database reads and writes. The whole-process figure of /usr/bin/time (init excluded; attach,
# warm-up and shut-down included) is shown beside it for the disk run.
#
# The in-memory run: `jetproof run` offers the std and io_uring engines only, so the mem variant
# runs the same procedures (init, then the performance test) in one process over
# `jetproof_io::mem::MemBackend`, through the example `mem_bench` of jetproof-procedures.
#
# Before/after: with BASE_JETPROOF and BASE_MEM_BENCH set (a `jetproof` binary and a
# jetproof-procedures `mem_bench` example binary built from an earlier commit), every round also runs
# them, interleaved with the current build (which build goes first alternates by round), and the
# table gains their columns. The machine is
# shared: compare within rounds, and medians over rounds.
#
# Usage: bench/run-overhead.sh [DIR]   (default ./bench-data; removed after)
# Environment: DB_SIZE (default 512MiB), DATABASES (2), THREADS (4), CACHE_MAX (64MiB),
# DURATION (20s), ROUNDS (3), FIO_SIZE (1G), FIO_RUNTIME (15), ENGINES ("std io_uring"; std is
# the default engine and is run without the flag, so it works with builds that predate it),
# BASE_ENGINES (engines of the BASE_ build: "std"), BASE_JETPROOF, BASE_MEM_BENCH,
# BASE_LABEL (before), WRITE_BACK_DEPTH (cache.write_back_depth of every job; unset: the default),
# NOW_JETPROOF and NOW_MEM_BENCH (binaries to measure instead of building
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
engines=${ENGINES:-std io_uring}
write_back_depth=${WRITE_BACK_DEPTH:-}
base_engines=${BASE_ENGINES:-std}
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
# label, jetproof binary, mem_bench binary, engines (comma-separated)
variants=("${NOW_LABEL:-now} $jetproof $mem_bench ${engines// /,}")
if [[ -n ${BASE_JETPROOF:-} && -n ${BASE_MEM_BENCH:-} ]]; then
  variants=("$base_label $BASE_JETPROOF $BASE_MEM_BENCH ${base_engines// /,}" "${variants[@]}")
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
${write_back_depth:+write_back_depth = $write_back_depth}
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
  line=$(figures "$dir/mem/out/results/result.json")
  read -r us ios iops <<<"$line"
  rm -rf "$dir/mem"
  echo "$us $iops"
}

run_disk() { # $1: jetproof binary, $2: I/O engine -> "cpu_us whole_us iops max_rss_kb"
  rm -rf "$dir/data" "$dir/results" "$dir/init"
  job "$dir/data" true >"$dir/job.toml"
  local engine=()
  if [[ $2 != std ]]; then engine=(--io-engine "$2"); fi
  "$1" init "$dir/job.toml" --out "$dir/init" >/dev/null
  # Exit 1 is a failed verdict (a latency threshold on a busy machine): still a measured run.
  /usr/bin/time -f "%U %S %M" -o "$dir/time.txt" \
    "$1" run "$dir/job.toml" --test performance "${engine[@]}" --out "$dir/results" >/dev/null ||
    [[ $? == 1 ]]
  if [[ $2 != std ]]; then # a build without the engine would have refused the flag
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
sys.exit(r.get("io_engine") != sys.argv[2] and "the run did not use the %s engine" % sys.argv[2])' \
      "$dir/results/result.json" "$2"
  fi
  local user sys rss us ios iops
  read -r user sys rss < <(tail -n 1 "$dir/time.txt") # after "Command exited with non-zero status 1"
  line=$(figures "$dir/results/result.json")
  read -r us ios iops <<<"$line"
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
  # Builds alternate which goes first too, as the engines do.
  round_variants=("${variants[@]}")
  alternate_order round_variants "$round"
  for variant in "${round_variants[@]}"; do
    read -r label bin mem variant_engines <<<"$variant"
    read -r -a order <<<"${variant_engines//,/ }"
    alternate_order order "$round"
    echo "round $round of $rounds: $label mem ..." >&2
    line=$(run_mem "$mem")
    read -r mem_us mem_iops <<<"$line"
    rows+=("$round $label mem $mem_us $mem_iops")
    for engine in "${order[@]}"; do
      echo "round $round of $rounds: $label disk $engine ..." >&2
      line=$(run_disk "$bin" "$engine")
      read -r disk_us whole_us disk_iops rss <<<"$line"
      rows+=("$round $label $engine $disk_us $whole_us $disk_iops $rss")
    done
  done
  line=$(run_fio)
  read -r fio_us fio_iops <<<"$line"
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
engines = list(dict.fromkeys(r[2] for r in runs if r[2] != "mem"))
# cell[(round, label)] = {"mem": (us, iops), engine: (us, whole_us, iops, rss_kb)}
cell = {}
for r in runs:
    cell.setdefault((int(r[0]), r[1]), {})[r[2]] = tuple(map(float, r[3:]))
dash = "–"
f2 = lambda v: dash if v is None else "%.2f" % v
f0 = lambda v: dash if v is None else "%.0f" % v
head = ["round", "build", "mem: CPU µs per I/O", "mem: IOPS"]
for e in engines:
    head += ["disk %s: CPU µs per I/O" % e, "disk %s: whole process" % e, "disk %s: IOPS" % e]
head += ["fio: CPU µs per I/O", "fio: IOPS"] + ["%s ÷ fio" % e for e in engines]
others = [e for e in engines if e != "std"]
if "std" in engines:
    head += ["%s ÷ std" % e for e in others]
head += ["mem ÷ fio"]
print("| " + " | ".join(head) + " |")
print("|" + "|".join(" ---: " if i != 1 else " --- " for i in range(len(head))) + "|")
def line(n, label, values, bold=False):
    b = (lambda t: "**%s**" % t) if bold else (lambda t: t)
    print("| " + " | ".join([b(n), b(label)] + values) + " |")
series = {}  # (label, key) -> list of per-round values
def keep(label, key, v):
    if v is not None:
        series.setdefault((label, key), []).append(v)
for (n, label), c in sorted(cell.items(), key=lambda kv: (kv[0][0], labels.index(kv[0][1]))):
    fio_us, fio_iops = fio[n]
    mem = c.get("mem")
    values = [f2(mem and mem[0]), f0(mem and mem[1])]
    keep(label, "mem_us", mem and mem[0]); keep(label, "mem_iops", mem and mem[1])
    for e in engines:
        d = c.get(e)
        values += [f2(d and d[0]), f2(d and d[1]), f0(d and d[2])]
        for i, k in enumerate(("us", "whole", "iops")):
            keep(label, e + k, d and d[i])
    values += [f2(fio_us), f0(fio_iops)]
    keep(label, "fio_us", fio_us); keep(label, "fio_iops", fio_iops)
    for e in engines:
        d = c.get(e)
        values.append(f2(d and d[0] / fio_us)); keep(label, e + "/fio", d and d[0] / fio_us)
    if "std" in engines:
        for e in others:
            d, s = c.get(e), c.get("std")
            v = d and s and d[0] / s[0]
            values.append(f2(v)); keep(label, e + "/std", v)
    values.append(f2(mem and mem[0] / fio_us)); keep(label, "mem/fio", mem and mem[0] / fio_us)
    line(str(n), label, values)
med = lambda label, key: statistics.median(series[(label, key)]) if (label, key) in series else None
for label in labels:
    values = ["**%s**" % f2(med(label, "mem_us")), f0(med(label, "mem_iops"))]
    for e in engines:
        values += ["**%s**" % f2(med(label, e + "us")), f2(med(label, e + "whole")), f0(med(label, e + "iops"))]
    values += ["**%s**" % f2(med(label, "fio_us")), f0(med(label, "fio_iops"))]
    values += ["**%s**" % f2(med(label, e + "/fio")) for e in engines]
    if "std" in engines:
        values += ["**%s**" % f2(med(label, e + "/std")) for e in others]
    values.append("**%s**" % f2(med(label, "mem/fio")))
    line("median", label, values, bold=True)
print()
print("CPU µs per I/O of jetproof: the run'"'"'s `totals.cpu_us_per_transactional_io` (process CPU over")
print("the measured window ÷ its database reads and writes); \"whole process\": /usr/bin/time'"'"'s user +")
print("system of the whole `run` command ÷ the same I/Os. \"disk std\" and \"disk io_uring\" are the")
print("same job with `--io-engine std` (the default) and `--io-engine io_uring`, in the same round,")
print("alternating which goes first. Ratios are medians of the per-round ratios (fio ran once per")
print("round, after the jetproof runs).")
print()
# Is the driver the bottleneck before the device? The CPU jetproof would need to carry fio'"'"'s
# random-read rate (the device'"'"'s rate at this depth) at its own CPU cost per I/O, against the
# machine'"'"'s cores.
cores = int(sys.argv[3])
print("| build, engine | CPU µs per I/O (median) | fio IOPS (median) | cores needed at fio'"'"'s rate | share of the %d cores |" % cores)
print("| --- | ---: | ---: | ---: | ---: |")
for label in labels:
    for e in engines:
        us, iops = med(label, e + "us"), med(label, "fio_iops")
        if us is None or iops is None:
            continue
        need = us * iops / 1e6
        print("| %s, %s | %.1f | %.0f | %.2f | %.0f%% |" % (label, e, us, iops, need, need / cores * 100))
print()
print("Under 100%: at its own CPU cost per I/O, jetproof could drive the device at fio'"'"'s rate on")
print("this machine, so the device, not the driver, limits the run (the sessions must still be")
print("enough to keep as many I/Os in flight: auto-tune finds that count).")
print()
units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
cache = next(float(cache_max[:-3]) * u for k, u in units.items() if cache_max.endswith(k))
bound = databases * cache * 1.10 + 64 * (1 << 20)
print("| memory (disk run) | MiB |")
print("| --- | ---: |")
for label in labels:
    for e in engines:
        rss = [c[e][3] for (n, l), c in cell.items() if l == label and e in c]
        if not rss:
            continue
        print("| peak resident set, %s, %s (largest round) | %.1f |" % (label, e, max(rss) / 1024))
        print("| within the bound (%s, %s) | %s |" % (label, e, "yes" if max(rss) * 1024 <= bound else "NO"))
print("| bound: %d x %s cache + 10%% + 64 MiB | %.1f |" % (databases, cache_max, bound / (1 << 20)))
' "$databases" "$cache_max" "$(nproc)")
{
  echo "# run: driver CPU per I/O and memory"
  echo
  echo "$notes"
  echo "- load average at the end: $load_end"
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "bench/run-overhead.sh   # DB_SIZE=$db_size DATABASES=$databases THREADS=$threads CACHE_MAX=$cache_max DURATION=$duration ROUNDS=$rounds ENGINES=\"$engines\" WRITE_BACK_DEPTH=${write_back_depth:-default}"
  echo "# each round, for each build:"
  echo "# mem:  JETPROOF_BENCH_JOB=job.toml JETPROOF_BENCH_OUT=out target/release/examples/mem_bench   # cargo build --release -p jetproof-procedures --example mem_bench"
  echo "# disk, for each engine of ENGINES (alternating which goes first): jetproof init job.toml && /usr/bin/time jetproof run job.toml --test performance [--io-engine io_uring]   (direct I/O)"
  echo "# job: $databases databases of $db_size, $threads sessions each, cache 8MiB/$cache_max, $duration window, unpaced"
  echo "# then fio: fio --rw=randread --bs=32k --size=$fio_size --direct=1 --ioengine=psync --numjobs=$depth --group_reporting --runtime=$fio_runtime --time_based"
  echo '```'
  echo
  echo "## Figures"
  echo
  echo "$body"
} >"$out"
cat "$out"
