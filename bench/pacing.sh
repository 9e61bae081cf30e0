#!/usr/bin/env bash
# Pacing on the disk (issue 32, item 9): a paced performance test must put the target's load on
# the storage, no more and no less: achieved transactional IOPS within ±3% of the target where
# the storage is not the limit.
#
# Each shape is a job with a target (mailboxes × iops_per_mailbox) far below what the disk can
# do; each round runs `jetproof run --test performance` on it (release build, direct I/O) and
# reads achieved_iops and target_iops from result.json. In the same round, on the same file
# system, fio is paced at the same rate (--rate_iops split into its read and write rates, as
# fio paces each direction on its own; one job per database, the 60/40 random 32 KiB mix,
# --rate_process=poisson) for the same duration: the reference for how close a
# rate-limited load generator gets to its rate on this disk. The report gives each tool's
# achieved ÷ target.
#
# Shapes (the issue's cases): `2db-16MiB` 2 databases of DB_SIZE_SMALL (256MiB) with 16 MiB
# caches, 1,000 mailboxes × 0.3 = 300 IOPS; `4db-256MiB` 4 databases of DB_SIZE_LARGE (1GiB)
# with 256 MiB caches, 400 mailboxes × 0.3 = 120 IOPS.
#
# Usage: bench/pacing.sh [DIR]   (default /var/tmp/jetproof-bench-pacing; the data under it is
#        deleted after)
# Environment: DURATION (the measured window, default 120s), ROUNDS (1), SHAPES (default
#   "2db-16MiB 4db-256MiB"), DB_SIZE_SMALL (256MiB), DB_SIZE_LARGE (1GiB), JETPROOF_BIN (a built
#   jetproof; default: build release), OUT (default bench/results/<date>-pacing.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
duration=${DURATION:-120s}
rounds=${ROUNDS:-1}
shapes=${SHAPES:-"2db-16MiB 4db-256MiB"}
small=${DB_SIZE_SMALL:-256MiB}
large=${DB_SIZE_LARGE:-1GiB}
dir=${1:-/var/tmp/jetproof-bench-pacing}
out=${OUT:-$(fresh_results "$here/results" pacing)}
secs=${duration%s}
if ! [[ $secs =~ ^[0-9]+$ ]] || ((secs < 10)); then
  echo "pacing.sh: DURATION=$duration: give whole seconds, at least 10, like 120s" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -e "$dir/data" ]; then
  echo "pacing.sh: $dir/data exists; give an empty directory (it is deleted after)" >&2
  exit 2
fi
trap 'rm -rf "$dir/data" "$dir/results" "$dir/fio.dat" "$dir/fio.json" "$dir"/job-*.toml; rmdir "$dir" 2>/dev/null || true' EXIT

if [ -z "${JETPROOF_BIN:-}" ]; then
  (cd "$here/.." && cargo build --release -q -p jetproof)
  JETPROOF_BIN="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
fi
notes=$(machine_notes "$dir")

# shape -> "databases db_size cache_max mailboxes iops_per_mailbox"
shape_of() {
  case $1 in
    2db-16MiB) echo "2 $small 16MiB 1000 0.3" ;;
    4db-256MiB) echo "4 $large 256MiB 400 0.3" ;;
    *)
      echo "pacing.sh: SHAPES: unknown shape $1; give 2db-16MiB and/or 4db-256MiB" >&2
      exit 2
      ;;
  esac
}

rows=()
for shape in $shapes; do
  read -r databases db_size cache_max mailboxes per_mailbox <<<"$(shape_of "$shape")"
  job="$dir/job-$shape.toml"
  cat >"$job" <<JOB
[storage]
data_dir = "$dir/data/$shape"
databases = $databases
db_size = "$db_size"
direct_io = true

[simulation]
mailboxes = $mailboxes
iops_per_mailbox = $per_mailbox

[cache]
max_size = "$cache_max"
min_size = "8MiB"

[workload]
threads = 2

[run]
duration = "$duration"
JOB
  echo "pacing.sh: init $shape" >&2
  "$JETPROOF_BIN" init "$job" --quiet --out "$dir/results/$shape-init" >/dev/null
  target=$(python3 -c "print($mailboxes * $per_mailbox)")
  fio_size=$(python3 -c "import re,sys; m=re.fullmatch(r'(\d+)(MiB|GiB)', '$db_size'); print(int(m.group(1)) * (1 if m.group(2)=='MiB' else 1024))")M
  for ((round = 1; round <= rounds; round++)); do
    echo "pacing.sh: $shape round $round: jetproof" >&2
    res="$dir/results/$shape-$round"
    "$JETPROOF_BIN" run "$job" --test performance --quiet --out "$res" >/dev/null || true
    jp=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%.1f %.1f" % (r["achieved_iops"], r["target_iops"]))' "$res/result.json")
    read -r jp_achieved jp_target <<<"$jp"
    echo "pacing.sh: $shape round $round: fio" >&2
    per_job=$(python3 -c "print(max(1, round($target / $databases)))")
    # fio's --rate_iops paces reads and writes each on its own: the job's rate split 60/40.
    read_rate=$(python3 -c "print(max(1, round($per_job * 0.6)))")
    write_rate=$(python3 -c "print(max(1, round($per_job * 0.4)))")
    fio --name=paced --filename="$dir/fio.dat" --size="$fio_size" --rw=randrw --rwmixread=60 \
      --bs=32k --direct=1 --ioengine=psync --numjobs="$databases" --rate_iops="$read_rate,$write_rate" \
      --rate_process=poisson --runtime="$secs" --time_based --group_reporting \
      --output-format=json >"$dir/fio.json" 2>/dev/null
    fio_iops=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print("%.1f" % (j["read"]["iops"] + j["write"]["iops"]))' "$dir/fio.json")
    fio_target=$(((read_rate + write_rate) * databases))
    rows+=("$(python3 -c "
a, t, f, ft = $jp_achieved, $jp_target, $fio_iops, $fio_target
print(f'| $shape | $round | {t:.1f} | {a:.1f} | {a / t:.3f} | {ft} | {f:.1f} | {f / ft:.3f} |')")")
    rm -rf "$res"
  done
done

{
  echo "# Pacing on the disk ($(date -u +%Y-%m-%d))"
  echo
  echo "Command: \`bench/pacing.sh\` (DURATION=$duration ROUNDS=$rounds SHAPES=\"$shapes\")."
  echo "jetproof: \`jetproof run JOB --test performance\` (release, direct I/O, 2 sessions per database);"
  echo "fio: \`--rate_iops\` per database job, 60/40 random 32 KiB, psync, poisson arrivals, same duration."
  echo
  echo "$notes"
  echo "| shape | round | jetproof target | jetproof achieved | achieved ÷ target | fio rate | fio achieved | fio ÷ rate |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${rows[@]}"
} >"$out"
echo "pacing.sh: wrote $out" >&2
cat "$out"
