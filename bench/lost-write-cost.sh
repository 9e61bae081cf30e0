#!/usr/bin/env bash
# What lost-write detection costs (issue 15: "under 2% of transactional IOPS, benchmarked
# against the build before, same run"). Every round runs the same unpaced performance test with
# the build before the flush map was wired in (BASE_COMMIT, default 14e025d: the map's module
# present, unused) and with this build, alternating which goes first, on fresh databases of the
# same size; and fio's random 32 KiB mix at the same read share and concurrency on a file of the
# same size beside them, as the reference for what the disk gave in that round. Reported: each
# run's achieved transactional IOPS, now ÷ before per round, and the median over rounds.
#
# The machine is shared: rounds drift, the ratio within a round is what to read.
#
# Usage: bench/lost-write-cost.sh [DIR]   (default ./bench-data; removed after)
# Environment: DB_SIZE (default 1GiB), DATABASES (2), THREADS (8 per database), DURATION (45s),
# ROUNDS (3), BASE_COMMIT (14e025d), BASE_JETPROOF (a binary of the build before, instead of
# building BASE_COMMIT in a temporary worktree), NOW_JETPROOF, FIO_RUNTIME (30),
# OUT (default bench/results/<date>-lost-write-cost.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
dir=${1:-$PWD/bench-data}
db_size=${DB_SIZE:-1GiB}
databases=${DATABASES:-2}
threads=${THREADS:-8}
duration=${DURATION:-45s}
rounds=${ROUNDS:-3}
fio_runtime=${FIO_RUNTIME:-30}
base_commit=${BASE_COMMIT:-14e025d}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)")

if [[ -n ${NOW_JETPROOF:-} ]]; then
  now=$NOW_JETPROOF
else
  (cd "$here/.." && cargo build --release -q -p jetproof)
  now="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
fi
if [[ -n ${BASE_JETPROOF:-} ]]; then
  base=$BASE_JETPROOF
else
  worktree="$dir/base-src"
  git -C "$here/.." worktree add --detach "$worktree" "$base_commit" >/dev/null
  (cd "$worktree" && CARGO_TARGET_DIR="$dir/base-target" cargo build --release -q -p jetproof)
  base="$dir/base-target/release/jetproof"
fi

job() { # $1: data dir
  cat <<JOB
[storage]
data_dir = "$1"
databases = $databases
db_size = "$db_size"
direct_io = true
[workload]
threads = $threads
[run]
duration = "$duration"
sample_interval = "5s"
JOB
}

run_one() { # $1: jetproof binary -> "iops stalls_per_sec cpu_us_per_transactional_io"
  rm -rf "$dir/data" "$dir/results" "$dir/init"
  job "$dir/data" >"$dir/job.toml"
  "$1" init "$dir/job.toml" --out "$dir/init" >/dev/null
  # Exit 1 is a failed verdict (a threshold on a busy machine): still a measured run.
  "$1" run "$dir/job.toml" --test performance --out "$dir/results" >/dev/null || [[ $? == 1 ]]
  local figures
  figures=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
h = r.get("host_counters") or {}
stalls = h.get("database_page_fault_stalls_per_sec", 0) or 0
if isinstance(stalls, dict):
    stalls = stalls.get("average", 0)
cpu = (r.get("totals") or {}).get("cpu_us_per_transactional_io") or 0
print("%.0f %.2f %.3f" % (r["achieved_iops"], float(stalls), float(cpu)))' "$dir/results/result.json")
  # Removed before the figures are printed: the caller reads them through a process
  # substitution and starts the next run as soon as they arrive.
  rm -rf "$dir/data" "$dir/results" "$dir/init" "$dir/job.toml"
  echo "$figures"
}

run_fio() { # -> iops of fio's mix (76% reads, 32 KiB, one job per session)
  fio --name=layout --filename="$dir/fio.dat" --rw=write --bs=1M --size="$db_size" --direct=1 \
    >/dev/null 2>&1
  fio --output-format=json --name=mix --filename="$dir/fio.dat" --rw=randrw --rwmixread=76 \
    --bs=32k --size="${db_size}" --direct=1 --ioengine=psync \
    --numjobs=$((threads * databases)) --group_reporting --runtime="$fio_runtime" \
    --time_based >"$dir/fio.json" 2>/dev/null
  local iops
  iops=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print("%.0f" % (j["read"]["iops"] + j["write"]["iops"]))' "$dir/fio.json")
  rm -f "$dir/fio.dat" "$dir/fio.json"
  echo "$iops"
}

rows=()
for round in $(seq 1 "$rounds"); do
  order=(before now)
  if ((round % 2 == 0)); then order=(now before); fi
  for label in "${order[@]}"; do
    bin=$now
    [[ $label == before ]] && bin=$base
    echo "round $round of $rounds: $label ..." >&2
    line=$(run_one "$bin")
    read -r iops stalls cpu <<<"$line"
    rows+=("$round $label $iops $stalls $cpu")
  done
  echo "round $round of $rounds: fio ..." >&2
  rows+=("$round fio $(run_fio) 0 0")
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
if [[ -z ${BASE_JETPROOF:-} ]]; then
  git -C "$here/.." worktree remove --force "$worktree"
  rm -rf "$dir/base-target"
fi
rmdir "$dir" 2>/dev/null || true

out=${OUT:-$(fresh_results "$here/results" lost-write-cost)}
table=$(printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
cell = {}
for line in sys.stdin:
    r, label, iops, stalls, cpu = line.split()
    cell.setdefault(int(r), {})[label] = (float(iops), float(stalls), float(cpu))
print("| round | before: IOPS | before: stalls/s | before: CPU µs per I/O | now: IOPS | now: stalls/s | now: CPU µs per I/O | fio mix: IOPS | IOPS now ÷ before | CPU now ÷ before |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
ratios, cpus = [], []
for r in sorted(cell):
    b, n, f = cell[r]["before"], cell[r]["now"], cell[r]["fio"]
    ratio = n[0] / b[0] if b[0] else float("nan")
    cpu = n[2] / b[2] if b[2] else float("nan")
    ratios.append(ratio)
    cpus.append(cpu)
    print("| %d | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | %.0f | %.3f | %.3f |" % (r, b[0], b[1], b[2], n[0], n[1], n[2], f[0], ratio, cpu))
print()
print("Median transactional IOPS now ÷ before over %d rounds: **%.3f** (range %.3f–%.3f)." % (
    len(ratios), statistics.median(ratios), min(ratios), max(ratios)))
print()
print("Median CPU per transactional I/O now ÷ before: **%.3f** (range %.3f–%.3f): the flush map costs CPU only (its counts ride in pages already read and written), so this is the figure that load on a shared machine moves least." % (
    statistics.median(cpus), min(cpus), max(cpus)))')
{
  echo "# Lost-write detection: cost in transactional IOPS"
  echo
  echo "Command: \`bench/lost-write-cost.sh\` (DB_SIZE=$db_size, DATABASES=$databases,"
  echo "THREADS=$threads per database, DURATION=$duration, ROUNDS=$rounds, before = $base_commit)."
  echo "Unpaced performance tests, direct I/O, default cache; before and now alternate which goes"
  echo "first; fio's 76%-read 32 KiB random mix at one job per session on a file of the same size,"
  echo "same file system, same round."
  echo
  echo "$notes"
  echo "- load average at the end: $load_end"
  echo
  echo "## Figures"
  echo
  echo "$table"
} >"$out"
echo "wrote $out" >&2
cat "$out"
