#!/usr/bin/env bash
# Benchmark of `jetproof init`: the fill rate (first database, through the engine) and the
# duplication rate (the others, copied), each against fio's sequential direct write bandwidth
# with 1 MiB blocks on the same file system, measured in the same run.
#
# Usage: bench/init.sh [DIR]   (DIR: where the data goes; default ./bench-data; removed after)
# Environment: DB_SIZE (default 2GiB), DATABASES (default 3).
# Writes bench/results/<date>-init.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
dir=${1:-$PWD/bench-data}
db_size=${DB_SIZE:-2GiB}
databases=${DATABASES:-3}
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

fio_before=$(fio_write)
rm -rf "$dir/data" "$dir/results"
"$jetproof" init --data-dir "$dir/data" --databases "$databases" --db-size "$db_size" --out "$dir/results" >/dev/null
fio_after=$(fio_write)
read -r fill dup total < <(python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
print("%.1f %.1f %.1f" % (t["fill_mb_per_sec"], t["duplicate_mb_per_sec"], t["mb_per_sec"]))' "$dir/results/result.json")
rm -rf "$dir/data" "$dir/results"

out="$here/results/$(date -u +%Y-%m-%d)-init.md"
{
  echo "# init: fill and duplication vs fio sequential write"
  echo
  machine_notes "$dir"
  echo "## Commands"
  echo
  echo '```'
  echo "fio --name=seqwrite --filename=DIR/fio.dat --rw=write --bs=1M --size=${db_size/iB/} --direct=1 --ioengine=psync --end_fsync=1"
  echo "jetproof init --data-dir DIR/data --databases $databases --db-size $db_size --out DIR/results"
  echo '```'
  echo
  echo "fio ran before and after jetproof; the reference is their mean."
  echo
  echo "## Figures (MB/s, 10^6 bytes)"
  echo
  python3 - "$fio_before" "$fio_after" "$fill" "$dup" "$total" <<'PY'
import sys
before, after, fill, dup, total = map(float, sys.argv[1:])
ref = (before + after) / 2
print("| figure | MB/s | ratio to fio | target |")
print("| --- | ---: | ---: | ---: |")
print(f"| fio sequential direct write, 1 MiB (before / after) | {before:.1f} / {after:.1f} | 1.00 | |")
print(f"| init fill (engine, first database) | {fill:.1f} | {fill/ref:.2f} | 0.70 |")
print(f"| init duplication (copies) | {dup:.1f} | {dup/ref:.2f} | 0.80 |")
print(f"| init overall | {total:.1f} | {total/ref:.2f} | |")
PY
} >"$out"
cat "$out"
