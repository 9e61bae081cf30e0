#!/usr/bin/env bash
# Benchmark of `jetproof init`: the fill rate (first database, through the engine) and the
# duplication rate (the others, copied), each against fio's sequential direct write bandwidth
# with 1 MiB blocks on the same file system, measured in the same run.
#
# Rounds alternate fio and jetproof (fio, init, fio, init, ..., fio): each init round's reference
# is the mean of the fio runs just before and after it, and the summary is the median over rounds
# (a shared VM's bandwidth drifts; alternating keeps the reference honest).
#
# Usage: bench/init.sh [DIR]   (DIR: where the data goes; default ./bench-data; removed after)
# Environment: DB_SIZE (default 2GiB), DATABASES (default 3), ROUNDS (default 3),
# CARGO_TARGET_DIR (where the release build goes; default ./target).
# Writes bench/results/<date>-init.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
dir=${1:-$PWD/bench-data}
db_size=${DB_SIZE:-2GiB}
databases=${DATABASES:-3}
rounds=${ROUNDS:-3}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

(cd "$here/.." && cargo build --release -q -p jetproof)
jetproof="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"

fio_write() {
  rm -f "$dir/fio.dat"
  fio_mb_per_sec --name=seqwrite --filename="$dir/fio.dat" --rw=write --bs=1M --size="${db_size/iB/}" \
    --direct=1 --ioengine=psync --end_fsync=1
  rm -f "$dir/fio.dat"
}

# A copy reads and writes the same device at once. fio's own copy-shaped load (sequential, half
# reads and half writes, 4 MiB blocks, 4 in flight, as init's duplication) gives the rate a copy
# can reach on this device: its write bandwidth is bytes copied per second.
fio_copy() {
  rm -f "$dir/fio.dat"
  fio --name=layout --filename="$dir/fio.dat" --rw=write --bs=1M --size="${db_size/iB/}" \
    --direct=1 --ioengine=psync >/dev/null 2>&1
  fio --output-format=json --name=copyshape --filename="$dir/fio.dat" --rw=rw --rwmixread=50 \
    --bs=4M --size="${db_size/iB/}" --direct=1 --ioengine=libaio --iodepth=4 2>/dev/null |
    python3 -c 'import json, sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"] / 1e6))'
  rm -f "$dir/fio.dat"
}

fio_runs=("$(fio_write)")
copy_runs=("$(fio_copy)")
init_runs=()
for round in $(seq 1 "$rounds"); do
  rm -rf "$dir/data" "$dir/results"
  "$jetproof" init --data-dir "$dir/data" --databases "$databases" --db-size "$db_size" --out "$dir/results" >/dev/null
  init_runs+=("$(python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
print("%.1f,%.1f,%.1f,%.3f" % (t["fill_mb_per_sec"], t["duplicate_mb_per_sec"], t["mb_per_sec"], t["fill_seconds"]))' "$dir/results/result.json")")
  rm -rf "$dir/data" "$dir/results"
  fio_runs+=("$(fio_write)")
  copy_runs+=("$(fio_copy)")
done

out="$here/results/$(date -u +%Y-%m-%d)-init.md"
{
  echo "# init: fill and duplication vs fio sequential write"
  echo
  machine_notes "$dir"
  echo "## Commands"
  echo
  echo '```'
  echo "fio --name=seqwrite --filename=DIR/fio.dat --rw=write --bs=1M --size=${db_size/iB/} --direct=1 --ioengine=psync --end_fsync=1"
  echo "fio --name=copyshape --filename=DIR/fio.dat --rw=rw --rwmixread=50 --bs=4M --size=${db_size/iB/} --direct=1 --ioengine=libaio --iodepth=4   # on a laid-out file; its write MB/s"
  echo "jetproof init --data-dir DIR/data --databases $databases --db-size $db_size --out DIR/results"
  echo "(bench/init.sh, ROUNDS=$rounds: fio, init, fio, init, ..., fio)"
  echo '```'
  echo
  echo "Each init round's reference is the mean of the fio runs just before and after it; the"
  echo "summary is the median over rounds. The fill is the first database, built by the engine's"
  echo "bulk loader; the duplication copies it to the other databases."
  echo
  echo "## Figures (MB/s, 10^6 bytes)"
  echo
  python3 - "${fio_runs[*]}" "${init_runs[*]}" "${copy_runs[*]}" <<'PY'
import statistics, sys
fio = [float(x) for x in sys.argv[1].split()]
runs = [[float(v) for v in r.split(",")] for r in sys.argv[2].split()]
copy = [float(x) for x in sys.argv[3].split()]
print("| round | fio before / after | init fill | fill / fio | duplication | dup / fio | init overall | fill seconds |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
fill_ratios, dup_ratios, total_ratios = [], [], []
for i, (fill, dup, total, seconds) in enumerate(runs):
    ref = (fio[i] + fio[i + 1]) / 2
    fill_ratios.append(fill / ref)
    dup_ratios.append(dup / ref)
    total_ratios.append(total / ref)
    print(f"| {i + 1} | {fio[i]:.1f} / {fio[i + 1]:.1f} | {fill:.1f} | {fill / ref:.2f} | {dup:.1f} | {dup / ref:.2f} | {total:.1f} | {seconds:.2f} |")
print()
print("| figure (median over rounds) | ratio to fio | target |")
print("| --- | ---: | ---: |")
print(f"| init fill (engine bulk load, first database) | {statistics.median(fill_ratios):.2f} | 0.70 |")
print(f"| init duplication (copies) | {statistics.median(dup_ratios):.2f} | 0.80 |")
print(f"| init overall | {statistics.median(total_ratios):.2f} | |")
copy_ratios = [dup / ((copy[i] + copy[i + 1]) / 2) for i, (_, dup, _, _) in enumerate(runs)]
print()
print("Duplication against fio's own copy-shaped load on the same device (50/50 sequential")
print("read/write, 4 MiB, 4 in flight; its write MB/s is bytes copied per second):")
print()
print("| round | fio copy-shaped before / after | duplication | dup / fio copy |")
print("| ---: | ---: | ---: | ---: |")
for i, (_, dup, _, _) in enumerate(runs):
    print(f"| {i + 1} | {copy[i]:.1f} / {copy[i + 1]:.1f} | {dup:.1f} | {copy_ratios[i]:.2f} |")
print()
print(f"Median duplication / fio copy-shaped: {statistics.median(copy_ratios):.2f}")
PY
} >"$out"
cat "$out"
