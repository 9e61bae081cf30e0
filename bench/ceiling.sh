#!/usr/bin/env bash
# How far jetproof drives the storage (issue 22): unpaced performance tests at rising session
# counts against fio's random mix on the same file system in the same run, for each I/O engine.
#
# For each total session count N of SESSIONS (N / DATABASES sessions per database), and each
# engine of ENGINES, one `jetproof run --test performance --io-engine E` (unpaced: the built-in
# job has no IOPS target); then fio with N jobs of psync 32 KiB random I/O at the read share
# that jetproof's runs at N measured (database reads ÷ database reads and writes), on DATABASES
# files of DB_SIZE each (separate from the databases, same directory), direct I/O, for the
# same duration. Rounds alternate which engine goes first. The databases are made once by
# `jetproof init` and reused by every run (as Jetstress reuses its databases).
#
# Reported per point: transactional IOPS (database reads + writes per second), of which writes,
# page fault stalls per second (the verdict fails above 1), CPU µs per transactional I/O (the
# process's CPU over the measured window), fio's IOPS and CPU µs per I/O (its mix jobs' own user
# and system time over their I/Os, as fio accounts them) and both ratios. Neither figure counts
# the kernel's work done outside the process (a loop device's worker threads, interrupts).
# The ceiling of an engine is its highest transactional IOPS among the points
# with stalls ≤ STALLS_MAX, and its ratio to fio at the same N.
#
# Usage: bench/ceiling.sh [DIR]   (default ./bench-ceiling; removed after)
# With LOG_STREAM=1 (the default) each point also runs fio's same mix with the log stream the
# jetproof runs put beside their database I/O (per database, sequential write-through writes at
# the runs' log writes per second and average size): the same storage load, for a second ratio,
# and the latency of those write-through writes beside jetproof's log write latency (what the
# device makes a write of that size wait under that load).
#
# With ENGINE_FLOOR=1 each point also runs the same job through the in-memory backend (the
# jetproof-procedures example `mem_bench`: init, then the performance test, no device and no
# system call per I/O): jetproof's CPU per transactional I/O when the storage is memory (the
# floor). The backend accounts the time of its own copies of the bytes read and written (the
# monotonic clock around each copy, which waits for nothing: its CPU time, or more if preempted),
# which a real device does by DMA; their share of the performance test's CPU is taken out of the
# floor for the engine's own work (the engine, the log, the workload and the driver): what
# jetproof costs per transactional I/O before any I/O path, set beside fio's CPU per I/O.
#
# Environment: LOG_STREAM (1; 0 leaves it out), ENGINE_FLOOR (0), MEM_BENCH (a mem_bench binary
# instead of building the working tree's), DB_SIZE (1GiB), DATABASES (2), SESSIONS ("4 8 16 32 64"), DURATION (30s),
# CACHE_MAX (64MiB), ENGINES ("std io_uring"), ROUNDS (1), STALLS_MAX (1), TITLE (the results' heading),
# WRITE_BACK_DEPTH (unset: the job's default), JETPROOF (a binary to measure instead of building
# the working tree), LABEL (now), OUT (default bench/results/<date>-ceiling.md), ROLLOVER_LOG (a
# file to append each run's log summary of generations and rollovers to, per database).
# Before/after: with BASE_JETPROOF set (a jetproof binary built from an earlier commit), every
# point also runs it with each engine, interleaved with the current build (rows "base-ENGINE");
# compare within a point (the machine is shared).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
dir=${1:-$PWD/bench-ceiling}
db_size=${DB_SIZE:-1GiB}
databases=${DATABASES:-2}
sessions_list=${SESSIONS:-4 8 16 32 64}
duration=${DURATION:-30s}
cache_max=${CACHE_MAX:-64MiB}
engines=${ENGINES:-std io_uring}
base=${BASE_JETPROOF:-}
if [[ -n $base ]]; then
  variants=""
  for e in $engines; do variants="$variants base-$e $e"; done
  engines=${variants# }
fi
rounds=${ROUNDS:-1}
stalls_max=${STALLS_MAX:-1}
depth=${WRITE_BACK_DEPTH:-}
log_stream=${LOG_STREAM:-1}
engine_floor=${ENGINE_FLOOR:-0}
label=${LABEL:-now}
title=${TITLE:-"ceiling: unpaced performance tests against fio's random mix"}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)")
if [[ -n ${JETPROOF:-} ]]; then
  jetproof=$JETPROOF
else
  (cd "$here/.." && cargo build --release -q -p jetproof)
  jetproof="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
fi
if [[ $engine_floor == 1 ]]; then
  if [[ -n ${MEM_BENCH:-} ]]; then
    mem_bench=$MEM_BENCH
  else
    (cd "$here/.." && cargo build --release -q -p jetproof-procedures --example mem_bench)
    mem_bench="${CARGO_TARGET_DIR:-$here/../target}/release/examples/mem_bench"
  fi
fi
seconds=$(python3 -c "
import sys; t = sys.argv[1]
print(int(float(t[:-1]) * {'s': 1, 'm': 60}[t[-1]]))" "$duration")

job() { # $1: sessions per database, $2: data directory (default $dir/data)
  cat <<JOB
[storage]
data_dir = "${2:-$dir/data}"
databases = $databases
db_size = "$db_size"
direct_io = true
[workload]
threads = $1
[cache]
min_size = "8MiB"
max_size = "$cache_max"
JOB
  if [[ -n $depth ]]; then echo "write_back_depth = $depth"; fi
  cat <<JOB
[run]
duration = "$duration"
sample_interval = "5s"
JOB
}

figures() { # result.json -> "iops writes_per_s stalls_per_s cpu_us read_share log_write_ms device_queue log_writes_per_s log_write_bytes"
  python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
seconds = float(sys.argv[2])
reads = sum(i["db_read"]["count"] for i in r["instances"] if "db_read" in i)
writes = sum(i["db_write"]["count"] for i in r["instances"] if "db_write" in i)
# What the verdict judges: all instances together, averaged over the sample intervals.
stalls = ((r.get("host_counters") or {}).get("database_page_fault_stalls_per_sec") or {}).get("average")
if stalls is None:
    stalls = sum(i.get("database_page_fault_stalls_per_sec") or 0 for i in r["instances"])
# Why sessions are not all in a database I/O at once: the durable commits wait for the log
# write (its mean latency), and the device queue shows how many I/Os were in flight on average
# (the psync jobs of fio keep N in flight).
logs = [i["log_write"] for i in r["instances"] if i.get("log_write")]
log_ms = sum(l["avg_latency_ms"] * l["count"] for l in logs) / max(sum(l["count"] for l in logs), 1)
queue = sum(d.get("aqu_sz") or 0 for d in (r["totals"].get("devices") or []))
# The log stream the run put on the storage beside its database I/O: for fio to carry too.
log_count = sum(l["count"] for l in logs)
log_bytes = sum(l.get("avg_bytes", 0) * l["count"] for l in logs) / max(log_count, 1)
print("%.0f %.0f %.2f %.3f %.3f %.2f %.1f %.1f %.0f" % (r["achieved_iops"], writes / seconds, stalls,
      r["totals"]["cpu_us_per_transactional_io"], reads / max(reads + writes, 1), log_ms, queue,
      log_count / seconds, log_bytes))' "$1" "$seconds"
}

run_jetproof() { # $1: sessions per database, $2: engine, or base-ENGINE for BASE_JETPROOF -> figures
  rm -rf "$dir/results"
  local binary=$jetproof engine=$2 data=$dir/data
  if [[ $engine == base-* ]]; then
    binary=$base
    engine=${engine#base-}
    data=$dir/data-base
  fi
  job "$1" "$data" >"$dir/job.toml"
  # Exit 1 is a failed verdict (stalls, latency): still a measured run.
  local status=0
  "$binary" run "$dir/job.toml" --test performance --io-engine "$engine" --out "$dir/results" \
    >/dev/null 2>"$dir/run.err" || status=$?
  if ((status != 0 && status != 1)); then
    echo "jetproof run ($2, $1 sessions per database) exited $status:" >&2
    tail -n 5 "$dir/run.err" >&2
    exit 1
  fi
  rm -f "$dir/run.err"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
sys.exit(r.get("io_engine") != sys.argv[2] and "the run did not use the %s engine" % sys.argv[2])' \
    "$dir/results/result.json" "$engine"
  figures "$dir/results/result.json"
  # ROLLOVER_LOG (a file): the log summary's generations and rollover figures of each run.
  if [[ -n ${ROLLOVER_LOG:-} ]]; then
    grep -o '[0-9]* generations ([^)]*)' "$dir/results/test.log" | sed "s|^|$2 $1/db: |" \
      >>"$ROLLOVER_LOG" || true
  fi
  rm -rf "$dir/results"
}

# The same job through the in-memory backend (ENGINE_FLOOR=1): $1 sessions per database ->
# "iops cpu_us copy_share" (its own databases, made by its own init in memory).
run_floor() {
  local share figures_line
  rm -rf "$dir/floor"
  mkdir -p "$dir/floor"
  job "$1" "$dir/floor/data" >"$dir/floor/job.toml"
  JETPROOF_BENCH_JOB="$dir/floor/job.toml" JETPROOF_BENCH_OUT="$dir/floor/out" "$mem_bench" \
    >"$dir/floor/out.txt" 2>"$dir/floor/err" || {
    echo "mem_bench ($1 sessions per database) failed:" >&2
    tail -n 5 "$dir/floor/err" >&2
    exit 1
  }
  share=$(sed -n 's/^memory copies: \([0-9.]*\) of .*/\1/p' "$dir/floor/out.txt")
  if [[ -z $share ]]; then
    echo "mem_bench did not say its copies' share (a build before 2026-12-08?)" >&2
    exit 1
  fi
  # An assignment, not a here-string: a failure of `figures` stops the script (set -e).
  figures_line=$(figures "$dir/floor/out/results/result.json")
  read -r iops _ _ cpu _ <<<"$figures_line"
  echo "$iops $cpu $share"
  rm -rf "$dir/floor"
}

fio_files=$(for n in $(seq 1 "$databases"); do printf '%s/fio%d.dat:' "$dir" "$n"; done)
fio_files=${fio_files%:}
fio_bytes=$(python3 -c "
import sys; t = sys.argv[1]
u = {'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}
print(int(float(t[:-3]) * u[t[-3:]]))" "$db_size")
# fio's mix: $1 psync jobs of 32 KiB random direct I/O at $2 percent reads over the databases'
# size, plus any further fio jobs given after them (their own groups) -> "mix_iops mix_writes_per_s
# other_jobs_writes_per_s mix_cpu_us_per_io other_jobs_write_ms" (the mix jobs' own user + system CPU, from fio's
# per-job accounting, over their I/Os: what jetproof's CPU µs per transactional I/O stands beside)
run_fio() {
  local jobs=$1 read_percent=$2
  shift 2
  fio --output-format=json --name=mix --filename="$fio_files" --size=$((fio_bytes * databases)) \
    --rw=randrw --rwmixread="$read_percent" --bs=32k --direct=1 --ioengine=psync \
    --numjobs="$jobs" --group_reporting --runtime="$seconds" --time_based --randrepeat=0 "$@" \
    >"$dir/fio.json" 2>/dev/null
  python3 -c '
import json, sys
jobs = json.load(open(sys.argv[1]))["jobs"]
mix = [j for j in jobs if j["jobname"] == "mix"][0]
others = sum(j["write"]["iops"] for j in jobs if j["jobname"] != "mix")
# The other jobs (the log streams): mean write latency, submission to completion, in ms.
other_ios = sum(j["write"]["total_ios"] for j in jobs if j["jobname"] != "mix")
other_ms = sum(j["write"]["lat_ns"]["mean"] * j["write"]["total_ios"] for j in jobs
               if j["jobname"] != "mix") / max(other_ios, 1) / 1e6
# With group_reporting, usr_cpu and sys_cpu are the mean share of the jobs runtime, and
# job_runtime (ms) their sum.
cpu_s = (mix["usr_cpu"] + mix["sys_cpu"]) / 100 * mix["job_runtime"] / 1000
ios = mix["read"]["total_ios"] + mix["write"]["total_ios"]
print("%.0f %.0f %.1f %.3f %.3f" % (mix["read"]["iops"] + mix["write"]["iops"], mix["write"]["iops"], others,
      cpu_s / max(ios, 1) * 1e6, other_ms))' \
    "$dir/fio.json"
  rm -f "$dir/fio.json"
}

# The same mix with the log stream jetproof's run put beside it (LOG_STREAM=1, the default): one
# job per database writing its own file sequentially, write-through (O_DSYNC, direct), one write
# at a time, at the run's log writes per second and average size (rounded to 4 KiB). On a
# device whose durable writes cost a cache flush (no FUA), these few hundred writes a second take
# a share of what the random mix gets: fio without them is not the same storage load.
run_fio_log() { # $1: jobs, $2: read percent, $3: log writes/s per database, $4: log write bytes -> "mix_iops log_writes_per_s mix_cpu_us log_write_ms"
  local logs=() n bs rate mix_iops mix_writes log_rate mix_cpu log_ms
  bs=$(python3 -c "import sys; print(max(4096, round(float(sys.argv[1]) / 4096) * 4096))" "$4")
  rate=$(python3 -c "import sys; print(max(1, round(float(sys.argv[1]))))" "$3")
  for n in $(seq 1 "$databases"); do
    # Written before it is measured, as jetproof formats every log file it makes (and ESE its
    # logs): fio's own file would be fallocated, unwritten extents, and each of its first pass's
    # write-through writes would convert one and wait for an ext4 journal commit, which none of
    # jetproof's log writes does (docs/journal/2026-12-02-fast-storage-2.md).
    fio --name=layout --filename="$dir/fiolog$n.dat" --rw=write --bs=1M --size=64M --direct=1 \
      >/dev/null 2>&1
    logs+=(--name="log$n" --new_group --filename="$dir/fiolog$n.dat" --size=64M --rw=write
      --bs="$bs" --direct=1 --sync=dsync --ioengine=psync --rate_iops="$rate"
      --runtime="$seconds" --time_based)
  done
  read -r mix_iops mix_writes log_rate mix_cpu log_ms <<<"$(run_fio "$1" "$2" "${logs[@]}")"
  rm -f "$dir"/fiolog*.dat
  echo "$mix_iops $log_rate $mix_cpu $log_ms"
}

mean() { python3 -c "import sys; v = [float(x) for x in sys.argv[1:]]; print(sum(v) / len(v))" "$@"; }

echo "init: $databases databases of $db_size ..." >&2
rm -rf "$dir/data" "$dir/data-base"
job 1 >"$dir/job.toml"
"$jetproof" init "$dir/job.toml" --out "$dir/init" >/dev/null
rm -rf "$dir/init"
# BASE_JETPROOF runs get databases and logs of their own, made by the base build: a build may
# write a log format the other does not read (log format 4, 2026-11-28).
if [[ -n $base ]]; then
  job 1 "$dir/data-base" >"$dir/job.toml"
  "$base" init "$dir/job.toml" --out "$dir/init" >/dev/null
  rm -rf "$dir/init"
fi
echo "laying out fio's files ..." >&2
for n in $(seq 1 "$databases"); do
  fio --name=layout --filename="$dir/fio$n.dat" --rw=write --bs=1M --size="$fio_bytes" \
    --direct=1 >/dev/null 2>&1
done

rows=()
for round in $(seq 1 "$rounds"); do
  for n in $sessions_list; do
    per=$((n / databases))
    ((per >= 1)) || per=1
    read -r -a order <<<"$engines"
    alternate_order order "$round"
    shares=()
    log_rates=()
    log_sizes=()
    for engine in "${order[@]}"; do
      echo "round $round: $n sessions, $engine ..." >&2
      # Command substitution, not `< <(...)`: it waits for the function's clean-up to end
      # before the next run starts in the same directory.
      figures_line=$(run_jetproof "$per" "$engine")
      read -r iops writes stalls cpu share log_ms queue log_rate log_bytes <<<"$figures_line"
      rows+=("$round $n $engine $iops $writes $stalls $cpu $share $log_ms $queue $log_rate")
      shares+=("$share")
      log_rates+=("$log_rate")
      log_sizes+=("$log_bytes")
    done
    if [[ $engine_floor == 1 ]]; then
      echo "round $round: $n sessions, the engine alone (mem backend) ..." >&2
      # As run_jetproof: the assignment carries run_floor's exit status to set -e.
      floor_line=$(run_floor "$per")
      read -r iops cpu share <<<"$floor_line"
      rows+=("$round $n floor $iops $cpu $share")
    fi
    read_percent=$(python3 -c "import sys; v = [float(x) for x in sys.argv[1:]]; print(round(100 * sum(v) / len(v)))" "${shares[@]}")
    echo "round $round: $n sessions, fio at $read_percent% reads ..." >&2
    fio_line=$(run_fio "$((per * databases))" "$read_percent")
    read -r fio_iops fio_writes _ fio_cpu _ <<<"$fio_line"
    rows+=("$round $n fio $fio_iops $fio_writes $read_percent $fio_cpu")
    if [[ $log_stream == 1 ]]; then
      per_log=$(python3 -c "import sys; print(float(sys.argv[1]) / int(sys.argv[2]))" "$(mean "${log_rates[@]}")" "$databases")
      echo "round $round: $n sessions, fio at $read_percent% reads with $databases log streams of $per_log writes/s ..." >&2
      read -r fio_log_iops fio_log_rate fio_log_cpu fio_log_ms <<<"$(run_fio_log "$((per * databases))" "$read_percent" "$per_log" "$(mean "${log_sizes[@]}")")"
      rows+=("$round $n fio-log $fio_log_iops $fio_log_rate $fio_log_cpu $fio_log_ms")
    fi
  done
done
rm -rf "$dir/data" "$dir/data-base" "$dir"/fio*.dat "$dir/job.toml"
rmdir "$dir" 2>/dev/null || true
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

out=${OUT:-$here/results/$(date -u +%Y-%m-%d)-ceiling.md}
body=$(printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
stalls_max = float(sys.argv[1])
rows = [l.split() for l in sys.stdin if l.strip()]
fio = {}
fio_log = {}
floor = {}
runs = {}
for r in rows:
    key = (int(r[0]), int(r[1]))
    if r[2] == "fio":
        fio[key] = (float(r[3]), float(r[4]), int(r[5]), float(r[6]))
    elif r[2] == "floor":
        floor[key] = (float(r[3]), float(r[4]), float(r[5]))
    elif r[2] == "fio-log":
        fio_log[key] = (float(r[3]), float(r[4]), float(r[5]), float(r[6]))
    else:
        runs.setdefault((r[2], int(r[1])), []).append((int(r[0]),) + tuple(map(float, r[3:])))
engines = list(dict.fromkeys(e for e, _ in runs))
print("| round | sessions | engine | transactional IOPS | of which writes/s | stalls/s | CPU µs per I/O | read share | log write ms | log writes/s | device queue | fio IOPS (same N, same share) | fio writes/s | fio CPU µs per I/O | ratio to fio | CPU ratio to fio | fio IOPS with the log stream (its log writes/s, their write ms) | ratio to fio with the log |")
print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (engine, n), points in sorted(runs.items(), key=lambda kv: (kv[0][1], engines.index(kv[0][0]))):
    for (rnd, iops, writes, stalls, cpu, share, log_ms, queue, log_rate) in points:
        f = fio[(rnd, n)]
        fl = fio_log.get((rnd, n))
        with_log = ("%.0f (%.0f, %.2f)" % (fl[0], fl[1], fl[3]), "%.2f" % (iops / fl[0])) if fl else ("–", "–")
        print("| %d | %d | %s | %.0f | %.0f | %.2f | %.1f | %.0f%% | %.2f | %.0f | %.1f | %.0f | %.0f | %.1f | %.2f | %.2f | %s | %s |" % ((
            rnd, n, engine, iops, writes, stalls, cpu, share * 100, log_ms, log_rate, queue, f[0], f[1], f[3], iops / f[0], cpu / f[3]) + with_log))
print()
print("| engine | ceiling: highest transactional IOPS with stalls ≤ %g/s (median over rounds) | at sessions | fio at that N | ratio | fio with the log stream at that N | ratio to it | CPU µs per I/O there (fio: ratio) | highest IOPS at any stall rate (sessions, stalls/s, ratio) |" % stalls_max)
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for engine in engines:
    best = None
    top = None
    for (e, n), points in runs.items():
        if e != engine:
            continue
        iops = statistics.median(p[1] for p in points)
        stalls = statistics.median(p[3] for p in points)
        f = statistics.median(fio[(p[0], n)][0] for p in points)
        if top is None or iops > top[0]:
            top = (iops, n, stalls, iops / f)
        logged = [fio_log[(p[0], n)][0] for p in points if (p[0], n) in fio_log]
        fl = statistics.median(logged) if logged else None
        cpu = statistics.median(p[4] for p in points)
        fio_cpu = statistics.median(fio[(p[0], n)][3] for p in points)
        if stalls <= stalls_max and (best is None or iops > best[0]):
            best = (iops, n, f, iops / f, fl, cpu, fio_cpu)
    top_text = "%.0f (%d, %.2f, %.2f)" % top if top else "–"
    if best:
        iops, n, f, ratio, fl, cpu, fio_cpu = best
        with_log = ("%.0f" % fl, "**%.2f**" % (iops / fl)) if fl else ("–", "–")
        cpu_text = "%.1f (%.1f: **%.2f**)" % (cpu, fio_cpu, cpu / fio_cpu)
        print("| %s | %.0f | %d | %.0f | **%.2f** | %s | %s | %s | %s |" % ((engine, iops, n, f, ratio) + with_log + (cpu_text, top_text)))
    else:
        print("| %s | none: every point stalled above %g/s | – | – | – | – | – | – | %s |" % (engine, stalls_max, top_text))
if floor:
    print()
    print("The engine alone (ENGINE_FLOOR=1): the same job through the in-memory backend, no device. Its CPU per transactional I/O (the floor) holds the copies of the bytes read and written to and from memory, which a real device does by DMA; the backend times them (the monotonic clock around each copy: its CPU time, or more if the thread was preempted during it), and the floor without them is the own work of the engine, the log, the workload and the driver (a lower bound of it: preemption can only add to the time of a copy).")
    print()
    print("| round | sessions | mem backend: transactional IOPS | its CPU µs per I/O (the floor) | of which memory copies | own work: CPU µs per I/O | fio CPU µs per I/O (same round, same N) | own work over the CPU of fio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (rnd, n), (iops, cpu, share) in sorted(floor.items()):
        f = fio[(rnd, n)]
        own = cpu * (1 - share)
        print("| %d | %d | %.0f | %.1f | %.0f%% | %.1f | %.1f | **%.2f** |" % (rnd, n, iops, cpu, share * 100, own, f[3], own / f[3]))
' "$stalls_max")
{
  echo "# $title"
  echo
  echo "$notes"
  echo "- load average at the end: $load_end"
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "bench/ceiling.sh   # DB_SIZE=$db_size DATABASES=$databases SESSIONS=\"$sessions_list\" DURATION=$duration CACHE_MAX=$cache_max ENGINES=\"${ENGINES:-std io_uring}\" BASE_JETPROOF=${base:-unset} ROUNDS=$rounds WRITE_BACK_DEPTH=${depth:-default} LABEL=$label"
  echo "# once: jetproof init job.toml   ($databases databases of $db_size, direct I/O, cache 8MiB/$cache_max)"
  echo "# each point: jetproof run job.toml --test performance --io-engine ENGINE   (N / $databases sessions per database, unpaced, $duration window)"
  echo "# then: fio --name=mix --filename=fio1.dat:...:fio$databases.dat --size=$databases x $db_size --rw=randrw --rwmixread=SHARE --bs=32k --direct=1 --ioengine=psync --numjobs=N --group_reporting --runtime=$seconds --time_based"
  echo "# SHARE: the database read share jetproof measured at N (mean over the engines)"
  if [[ $engine_floor == 1 ]]; then
    echo "# and (ENGINE_FLOOR=1) the same job, N / $databases sessions per database, in memory: JETPROOF_BENCH_JOB=job.toml JETPROOF_BENCH_OUT=out target/release/examples/mem_bench"
  fi
  if [[ $log_stream == 1 ]]; then
    echo "# and (LOG_STREAM=1) the same fio mix with, per database, a job of sequential write-through writes at jetproof's log rate and size:"
    echo "#   (fiologN.dat written out first: fio --name=layout --filename=fiologN.dat --rw=write --bs=1M --size=64M --direct=1)"
    echo "#   ... --name=logN --new_group --filename=fiologN.dat --size=64M --rw=write --bs=LOG_BYTES --direct=1 --sync=dsync --ioengine=psync --rate_iops=LOG_RATE"
  fi
  echo '```'
  echo
  echo "## Figures ($label)"
  echo
  echo "$body"
} >"$out"
cat "$out"
