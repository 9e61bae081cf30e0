#!/usr/bin/env bash
# Benchmark of the write-back's thread hand-offs (issue 22): context switches per transactional
# I/O of `jetproof run --test performance` with the std engine, for a BASE build and the current
# build interleaved in the same rounds, with fio's context switches per I/O (32 KiB random
# direct reads and writes, psync, as many jobs as the run's sessions) measured in the same run as
# the reference: a synchronous I/O costs one switch, so fio's figure is the floor of any
# thread-per-I/O design.
#
# Context switches are counted by `perf stat -e context-switches` (a software counter: it works
# where hardware counters are not exposed) over the whole process; the CPU figure is the run's own
# `totals.cpu_us_per_transactional_io` (measured window only). On a loaded machine switches per
# I/O move less than CPU time does, which is why this script counts them.
#
# Usage: BASE_JETPROOF=/path/to/old/jetproof bench/write-back-wakeups.sh [DIR]
# Environment: NOW_JETPROOF (default target/release/jetproof), ROUNDS (3), DB_SIZE (512MiB),
# THREADS (4 per database, 2 databases), DURATION (20s), WRITE_BACK_DEPTH (32),
# OUT (default bench/results/<date>-write-back-wakeups.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
dir=${1:-$PWD/bench-data}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
base=${BASE_JETPROOF:?set BASE_JETPROOF to the jetproof binary to compare against}
now=${NOW_JETPROOF:-$here/../target/release/jetproof}
rounds=${ROUNDS:-3}
threads=${THREADS:-4}
out=${OUT:-$(fresh_results "$here/results" write-back-wakeups)}
command -v fio >/dev/null || { echo "fio is missing: apt-get install -y fio" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is missing: apt-get install -y linux-perf" >&2; exit 2; }
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)")
cat >"$dir/job.toml" <<JOB
[storage]
data_dir = "$dir/data"
databases = 2
db_size = "${DB_SIZE:-512MiB}"
direct_io = true
[workload]
threads = $threads
[cache]
min_size = "8MiB"
max_size = "64MiB"
write_back_depth = ${WRITE_BACK_DEPTH:-32}
[run]
duration = "${DURATION:-20s}"
sample_interval = "5s"
JOB
"$now" init "$dir/job.toml" >/dev/null

measure() { # $1: binary -> "cpu_us_per_io switches_per_io iops"
  rm -rf "$dir/out"
  perf stat -x, -e context-switches -o "$dir/perf.txt" \
    "$1" run "$dir/job.toml" --test performance --out "$dir/out" >/dev/null 2>&1
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/out/result.json"))
ios = sum(i[k]["count"] for i in r["instances"] for k in ("db_read", "db_write"))
cs = int(open(d + "/perf.txt").read().strip().splitlines()[-1].split(",")[0])
print("%.2f %.3f %.0f" % (r["totals"]["cpu_us_per_transactional_io"], cs / ios, r["achieved_iops"]))
PY
}

fio_switches() { # -> "switches_per_io iops"
  perf stat -x, -e context-switches -o "$dir/fio-perf.txt" \
    fio --output-format=json --name=wb --filename="$dir/fio.dat" --size=1G --bs=32k \
    --rw=randrw --rwmixread=75 --direct=1 --ioengine=psync --numjobs=$((2 * threads)) \
    --group_reporting --runtime=15 --time_based >"$dir/fio.json" 2>/dev/null
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
j = json.load(open(d + "/fio.json"))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
cs = int(open(d + "/fio-perf.txt").read().strip().splitlines()[-1].split(",")[0])
print("%.3f %.0f" % (cs / ios, (j["read"]["iops"] + j["write"]["iops"])))
PY
}

rows=()
for round in $(seq 1 "$rounds"); do
  if ((round % 2)); then order=("base $base" "now $now"); else order=("now $now" "base $base"); fi
  for entry in "${order[@]}"; do
    read -r label bin <<<"$entry"
    line=$(measure "$bin")
    read -r cpu cs iops <<<"$line"
    rows+=("| $round | $label | $cpu | $cs | $iops |")
  done
  line=$(fio_switches)
  read -r fcs fiops <<<"$line"
  rows+=("| $round | fio | | $fcs | $fiops |")
done
{
  echo "# write-back wake-ups: context switches per transactional I/O (issue 22)"
  echo
  echo "$notes"
  echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "BASE_JETPROOF=$base NOW_JETPROOF=$now ROUNDS=$rounds bench/write-back-wakeups.sh"
  echo "# each: perf stat -e context-switches jetproof run job.toml --test performance (2 databases, $threads sessions each, std, write_back_depth ${WRITE_BACK_DEPTH:-32})"
  echo "# fio: fio --rw=randrw --rwmixread=75 --bs=32k --direct=1 --ioengine=psync --numjobs=$((2 * threads)) --runtime=15"
  echo '```'
  echo
  echo "## Figures"
  echo
  echo "| round | build | CPU µs per I/O | context switches per I/O | IOPS |"
  echo "| ---: | --- | ---: | ---: | ---: |"
  printf '%s\n' "${rows[@]}"
} >"$out"
rm -rf "$dir"
echo "wrote $out"
