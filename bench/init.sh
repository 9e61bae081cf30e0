#!/usr/bin/env bash
# Benchmark of `jetproof init`: the whole init (every database filled through the engine, each
# from its own content, so no block of one equals a block of another) against fio's sequential
# direct write bandwidth with 1 MiB blocks on the same file system, measured in the same run;
# and the data reduction figures init measured (compression ratio, duplicate 8 KiB blocks
# across all databases), checked against the setting.
#
# Rounds alternate fio and jetproof (fio, init, fio, init, ..., fio): each init round's reference
# is the mean of the fio runs just before and after it, and the summary is the median over rounds
# (a shared VM's bandwidth drifts; alternating keeps the reference honest). The target (issue 33):
# init overall >= 0.9 x fio.
#
# Usage: bench/init.sh [DIR]   (DIR: where the data goes; default ./bench-data; removed after)
# Environment: DB_SIZE (default 2GiB), DATABASES (default 3), ROUNDS (default 3),
# COMPRESSION_RATIO (default 1.0, the job's workload.compression_ratio),
# CARGO_TARGET_DIR (where the release build goes; default ./target), PROFILE (the cargo profile
# built and run: release, the default, or profiling, the same code with symbols for perf).
# Writes bench/results/<date>-init.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
dir=${1:-$PWD/bench-data}
db_size=${DB_SIZE:-2GiB}
databases=${DATABASES:-3}
rounds=${ROUNDS:-3}
ratio=${COMPRESSION_RATIO:-1.0}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

profile=${PROFILE:-release}
(cd "$here/.." && cargo build --profile "$profile" -q -p jetproof)
jetproof="${CARGO_TARGET_DIR:-$here/../target}/$profile/jetproof"

# fio's size for the same bytes one database holds (fio reads "2GiB" as 2 GiB too).
fio_write() {
  rm -f "$dir/fio.dat"
  fio_mb_per_sec --name=seqwrite --filename="$dir/fio.dat" --rw=write --bs=1M --size="${db_size/iB/}" \
    --direct=1 --ioengine=psync --end_fsync=1
  rm -f "$dir/fio.dat"
}

cat >"$dir/job.toml" <<EOF
[storage]
data_dir = "$dir/data"
databases = $databases
db_size = "$db_size"
[workload]
compression_ratio = $ratio
EOF

fio_runs=("$(fio_write)")
init_runs=()
for round in $(seq 1 "$rounds"); do
  rm -rf "$dir/data" "$dir/results"
  # The CPU init spent (user + system seconds): on a shared machine the fill is as fast as the
  # CPU it gets.
  cpu=$( { TIMEFORMAT='%U+%S'; time "$jetproof" init "$dir/job.toml" --out "$dir/results" --quiet >/dev/null; } 2>&1 )
  init_runs+=("$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t, d = r["totals"], r["data_reduction"]["across_databases"]
print("%.1f,%.3f,%.3f,%.4f,%.2f,%.2f" % (t["mb_per_sec"], t["seconds"], d["compression_ratio"], d["duplicate_share"], d["compression_ratio_ci95_percent"], eval(sys.argv[2])))' "$dir/results/result.json" "$cpu")")
  rm -rf "$dir/data" "$dir/results"
  fio_runs+=("$(fio_write)")
done
rm -f "$dir/job.toml"

out=${OUT:-$(fresh_results "$here/results" init)}
{
  echo "# init: every database filled (unique content) vs fio sequential write"
  echo
  machine_notes "$dir"
  echo "- load before the run: $(uptime)"
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "fio --name=seqwrite --filename=DIR/fio.dat --rw=write --bs=1M --size=${db_size/iB/} --direct=1 --ioengine=psync --end_fsync=1"
  echo "jetproof init DIR/job.toml --out DIR/results   # storage.databases = $databases, db_size = \"$db_size\", workload.compression_ratio = $ratio"
  echo "(bench/init.sh, ROUNDS=$rounds: fio, init, fio, init, ..., fio)"
  echo '```'
  echo
  echo "Each init round's reference is the mean of the fio runs just before and after it; the"
  echo "summary is the median over rounds. init's MB/s is every byte of every database over the"
  echo "whole command (creation, fill, close, rename, measurement)."
  echo
  echo "## Figures (MB/s, 10^6 bytes)"
  echo
  python3 - "${fio_runs[*]}" "${init_runs[*]}" "$ratio" <<'PY'
import statistics, sys
fio = [float(x) for x in sys.argv[1].split()]
runs = [[float(v) for v in r.split(",")] for r in sys.argv[2].split()]
setting = float(sys.argv[3])
print("| round | fio before / after | init overall | init / fio | init seconds | init CPU seconds | compression measured (set %.2f) | 95%% interval | duplicate 8 KiB blocks, all databases |" % setting)
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
ratios = []
for i, (rate, seconds, comp, dup, ci, cpu) in enumerate(runs):
    ref = (fio[i] + fio[i + 1]) / 2
    ratios.append(rate / ref)
    print(f"| {i + 1} | {fio[i]:.1f} / {fio[i + 1]:.1f} | {rate:.1f} | {rate / ref:.2f} | {seconds:.2f} | {cpu:.2f} | {comp:.3f} | ±{ci:.2f}% | {dup * 100:.3f}% |")
print()
print("| figure (median over rounds) | value | target |")
print("| --- | ---: | ---: |")
print(f"| init overall / fio sequential write | {statistics.median(ratios):.2f} | >= 0.90 |")
print(f"| compression measured / set | {statistics.median(r[2] for r in runs) / setting:.3f} | 0.90-1.10 |")
print(f"| duplicate blocks across all databases | {statistics.median(r[3] for r in runs) * 100:.3f}% | < 1% |")
PY
} >"$out"
cat "$out"
