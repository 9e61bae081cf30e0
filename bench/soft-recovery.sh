#!/usr/bin/env bash
# Replay speed of the soft-recovery test (issue 3 target): "time per 1 MiB log file on this
# machine, against the seeds' 1.7-2.3 s per log on arrays of spinning disks; aim for replay bound
# by the device, not by CPU (report CPU µs per record applied)".
#
# Each round runs `jetproof run --test soft-recovery --log-files LOG_FILES` (ESRP: 500) on a
# small job (DATABASES databases of DB_SIZE, direct I/O, release build): LOG_FILES generations of
# 1 MiB per instance are written with the checkpoint held, the instances are stopped uncleanly
# and replayed concurrently. From result.json: seconds per log, records applied, CPU µs per
# record applied (when the build reports the replay's CPU time), and the replay's read rate
# (log_read + db_read bytes of all instances over the concurrent replay's wall-clock seconds).
# In the same round, on the same file system, fio gives the device's reference read rates:
#   - 1 MiB sequential direct reads (one reader, the shape of the log reads);
#   - 32 KiB random direct reads, one reader per database at one I/O in flight each (the shape
#     of the replay's page reads without read-ahead: one page at a time per database);
#   - the same with READERS readers per database (default 8, recovery's READ_AHEAD_READERS: the
#     most page reads the replay's read-ahead has in flight per database).
# The ratio replay read MB/s ÷ fio MB/s says how close the replay is to the device.
#
# With BASE_JETPROOF_BIN (a jetproof built from another commit, e.g. the one before a change),
# every round runs the soft-recovery test with both binaries on the same job, one after the
# other (base first in odd rounds, the build under test first in even ones), after the round's
# fio, and the report adds the ratio build ÷ base of each round's seconds per log. Each build
# replays databases of its own, initialised by itself (a build never meets another's logs: an
# older build refuses a newer log format).
#
# Usage: bench/soft-recovery.sh [DIR]   (default /var/tmp/jetproof-bench-soft-recovery; the
#        data under it is deleted after)
# Environment: LOG_FILES (default 500), DATABASES (2), DB_SIZE (1GiB), ROUNDS (2),
#   FIO_SIZE (1G), FIO_RUNTIME (10), JETPROOF_BIN (a built jetproof; default: build release),
#   READERS (8), BASE_JETPROOF_BIN (optional, see above), BASE_LABEL / LABEL (names of the two builds in the
#   report; default base / new), OUT (default bench/results/<date>-soft-recovery.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
log_files=${LOG_FILES:-500}
databases=${DATABASES:-2}
db_size=${DB_SIZE:-1GiB}
rounds=${ROUNDS:-2}
fio_size=${FIO_SIZE:-1G}
fio_runtime=${FIO_RUNTIME:-10}
readers=${READERS:-8}
dir=${1:-/var/tmp/jetproof-bench-soft-recovery}
out=${OUT:-$(fresh_results "$here/results" soft-recovery)}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -e "$dir/data" ] || [ -e "$dir/data-base" ]; then
  echo "soft-recovery.sh: $dir/data exists; give an empty directory (it is deleted after)" >&2
  exit 2
fi
trap 'rm -rf "$dir/data" "$dir/data-base" "$dir/results" "$dir/fio.dat" "$dir/fio.json" "$dir/job.toml" "$dir/job-base.toml"; rmdir "$dir" 2>/dev/null || true' EXIT

# Room for the databases, every kept log generation and fio's file, with 10% to spare.
need_mib=$(python3 - "$db_size" "$fio_size" "$databases" "$log_files" "${BASE_JETPROOF_BIN:+2}" <<'PY'
import re, sys
units = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "TiB": 1024**2, "K": 1 / 1024, "M": 1, "G": 1024}
def mib(text, field):
    m = re.fullmatch(r"(\d+)\s*(KiB|MiB|GiB|TiB|K|M|G)", text)
    if not m:
        print(f"soft-recovery.sh: {field}: `{text}` is not a size; give one like 1GiB (DB_SIZE) or 1G (FIO_SIZE)", file=sys.stderr)
        sys.exit(2)
    return int(m.group(1)) * units[m.group(2)]
db, fio = mib(sys.argv[1], "DB_SIZE"), mib(sys.argv[2], "FIO_SIZE")
databases, log_files = int(sys.argv[3]), int(sys.argv[4])
builds = int(sys.argv[5] or 1)  # the base build has databases of its own
print(int((builds * databases * (db + log_files + 4) + fio) * 1.1))
PY
)
free_mib=$(df -Pm "$dir" | awk 'NR==2 {print $4}')
if [ "$free_mib" -lt "$need_mib" ]; then
  echo "soft-recovery.sh: $dir has $free_mib MiB free, the run needs about $need_mib MiB; lower LOG_FILES or DB_SIZE, or give another DIR" >&2
  exit 2
fi

if [ -z "${JETPROOF_BIN:-}" ]; then
  (cd "$here/.." && cargo build --release -q -p jetproof)
  JETPROOF_BIN="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
fi
notes=$(machine_notes "$dir")
base_bin=${BASE_JETPROOF_BIN:-}
label=${LABEL:-new}
base_label=${BASE_LABEL:-base}
if [ -n "$base_bin" ] && [ ! -x "$base_bin" ]; then
  echo "soft-recovery.sh: BASE_JETPROOF_BIN=$base_bin is not an executable" >&2
  exit 2
fi

cat >"$dir/job.toml" <<JOB
[storage]
data_dir = "$dir/data"
databases = $databases
db_size = "$db_size"
direct_io = true
JOB

init_cmd="jetproof init $dir/job.toml --out $dir/results/init"
run_cmd="jetproof run $dir/job.toml --test soft-recovery --log-files $log_files --out $dir/results/soft-N"
fio_seq_cmd="fio --name=seq --filename=$dir/fio.dat --rw=read --bs=1M --direct=1 --ioengine=psync --size=$fio_size --runtime=$fio_runtime --time_based"
fio_rand_cmd="fio --name=rand --filename=$dir/fio.dat --rw=randread --bs=32k --direct=1 --ioengine=psync --size=$fio_size --numjobs=$databases --group_reporting --runtime=$fio_runtime --time_based"
fio_rand_deep_cmd="fio --name=rand --filename=$dir/fio.dat --rw=randread --bs=32k --direct=1 --ioengine=psync --size=$fio_size --numjobs=$((databases * readers)) --group_reporting --runtime=$fio_runtime --time_based"

fio_read_mb() { # fio options...; prints read MB/s (10^6)
  fio --output-format=json "$@" >"$dir/fio.json" 2>/dev/null
  python3 -c '
import json, sys
print("%.1f" % (json.load(open(sys.argv[1]))["jobs"][0]["read"]["bw_bytes"] / 1e6))' "$dir/fio.json"
}

echo "init: $init_cmd" >&2
"$JETPROOF_BIN" init "$dir/job.toml" --out "$dir/results/init" >/dev/null
# The base build gets databases of its own, made by itself: a build must not meet the logs of
# another (an older one refuses a newer log format, and a newer one need not replay an older
# format's logs the same way).
if [ -n "$base_bin" ]; then
  sed "s|^data_dir = .*|data_dir = \"$dir/data-base\"|" "$dir/job.toml" >"$dir/job-base.toml"
  "$base_bin" init "$dir/job-base.toml" --out "$dir/results/init-base" >/dev/null
fi
fio --name=layout --filename="$dir/fio.dat" --rw=write --bs=1M --size="$fio_size" --direct=1 \
  --ioengine=psync >/dev/null 2>&1
rows=()
raw=()
ratios=()
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# One soft-recovery test with one binary; appends its row to rows (and its report to raw) and
# sets last_wall_per_log. Args: build label, binary, its job file, round, fio seq MB/s, fio
# rand MB/s (one reader per database), fio rand MB/s (READERS per database).
replay_round() {
  local name=$1 bin=$2 job=$3 round=$4 seq_mb=$5 rand_mb=$6 deep_mb=$7
  local out_dir="$dir/results/soft-$round-$name"
  local shown=${run_cmd/soft-N/soft-$round-$name}
  echo "round $round ($name): ${shown/$dir\/job.toml/$job}" >&2
  local start code=0 wall row
  start=$(date +%s.%N)
  "$bin" run "$job" --test soft-recovery --log-files "$log_files" \
    --out "$out_dir" >"$out_dir.stdout" 2>&1 || code=$?
  wall=$(python3 -c "print('%.1f' % ($(date +%s.%N) - $start))")
  if [ "$code" -ne 0 ]; then
    cat "$out_dir.stdout" >&2
    echo "soft-recovery.sh: jetproof ($name) exited $code in round $round" >&2
    exit 1
  fi
  row=$(python3 - "$out_dir/result.json" "$round" "$wall" "$seq_mb" "$rand_mb" "$name" "$deep_mb" <<'PY'
import json, sys
path, rnd, wall, seq_mb, rand_mb, name, deep_mb = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), sys.argv[6], float(sys.argv[7])
r = json.load(open(path))
inst = r["instances"]
rec = r["totals"]["recovery_seconds"]
gen = r["totals"].get("generation_seconds", 0.0)
logs = sum(i["logs_replayed"] for i in inst)
applied = sum(i["records_applied"] for i in inst)
skipped = sum(i["records_skipped"] for i in inst)
def class_bytes(key):
    return sum(i.get(key, {}).get("bytes", 0) for i in inst)
log_mb = class_bytes("log_read") / rec / 1e6
db_mb = class_bytes("db_read") / rec / 1e6
write_mb = class_bytes("db_write") / rec / 1e6
read_mb = log_mb + db_mb
per_log = ", ".join("%.4f" % i["seconds_per_log"] for i in inst)
cpu = [i["cpu_us_per_record"] for i in inst if "cpu_us_per_record" in i]
cpu_text = ", ".join("%.2f" % c for c in cpu) if cpu else "not reported"
cpu_all = [i["cpu_us_per_record_replayed"] for i in inst if "cpu_us_per_record_replayed" in i]
cpu_all_text = ", ".join("%.2f" % c for c in cpu_all) if cpu_all else "not reported"
busy = [i["cpu_seconds"] / i["seconds"] for i in inst if "cpu_seconds" in i and i["seconds"] > 0]
busy_text = ", ".join("%.2f" % b for b in busy) if busy else "-"
print(" | ".join([
    name, rnd, str(logs), "%.1f" % gen, "%.2f" % rec, per_log, "%.4f" % (rec / logs * len(inst)),
    str(applied), str(skipped), cpu_text, cpu_all_text, busy_text,
    "%.0f" % log_mb, "%.0f" % db_mb, "%.0f" % read_mb, "%.0f" % write_mb,
    "%.0f" % seq_mb, "%.2f" % (read_mb / seq_mb), "%.0f" % rand_mb, "%.2f" % (db_mb / rand_mb),
    "%.0f" % deep_mb, "%.2f" % (db_mb / deep_mb), "%.0f" % wall,
]))
PY
)
  rows+=("| $row |")
  raw+=("$name, round $round:
$(sed -n '/^Soft Recovery Statistics/,/^Result:/p' "$out_dir.stdout")")
  # The wall seconds per log (column 7) for the ratio.
  last_wall_per_log=$(echo "$row" | awk -F' [|] ' '{print $7}')
}

for round in $(seq 1 "$rounds"); do
  echo "round $round: fio" >&2
  seq_mb=$(fio_read_mb --name=seq --filename="$dir/fio.dat" --rw=read --bs=1M --direct=1 \
    --ioengine=psync --size="$fio_size" --runtime="$fio_runtime" --time_based)
  rand_mb=$(fio_read_mb --name=rand --filename="$dir/fio.dat" --rw=randread --bs=32k --direct=1 \
    --ioengine=psync --size="$fio_size" --numjobs="$databases" --group_reporting \
    --runtime="$fio_runtime" --time_based)
  deep_mb=$(fio_read_mb --name=rand --filename="$dir/fio.dat" --rw=randread --bs=32k --direct=1 \
    --ioengine=psync --size="$fio_size" --numjobs=$((databases * readers)) --group_reporting \
    --runtime="$fio_runtime" --time_based)
  mkdir -p "$dir/results"
  if [ -z "$base_bin" ]; then
    replay_round "$label" "$JETPROOF_BIN" "$dir/job.toml" "$round" "$seq_mb" "$rand_mb" "$deep_mb"
  elif [ $((round % 2)) -eq 1 ]; then
    replay_round "$base_label" "$base_bin" "$dir/job-base.toml" "$round" "$seq_mb" "$rand_mb" "$deep_mb"
    base_per_log=$last_wall_per_log
    replay_round "$label" "$JETPROOF_BIN" "$dir/job.toml" "$round" "$seq_mb" "$rand_mb" "$deep_mb"
    ratios+=("| $round | $base_per_log | $last_wall_per_log | $(python3 -c "print('%.2f' % ($last_wall_per_log / $base_per_log))") |")
  else
    replay_round "$label" "$JETPROOF_BIN" "$dir/job.toml" "$round" "$seq_mb" "$rand_mb" "$deep_mb"
    new_per_log=$last_wall_per_log
    replay_round "$base_label" "$base_bin" "$dir/job-base.toml" "$round" "$seq_mb" "$rand_mb" "$deep_mb"
    ratios+=("| $round | $last_wall_per_log | $new_per_log | $(python3 -c "print('%.2f' % ($new_per_log / $last_wall_per_log))") |")
  fi
done

{
  echo "# Soft-recovery replay speed, $(date -u +%Y-%m-%d)"
  echo
  echo "\`jetproof run --test soft-recovery\` with $log_files log files of 1 MiB per instance,"
  echo "$databases databases of $db_size (direct I/O), replayed concurrently; fio on the same file"
  echo "system in the same round. Target (issue 3): seconds per 1 MiB log file against the seeds'"
  echo "1.7-2.3 s per log on spinning arrays; replay bound by the device, not by CPU."
  echo
  echo "$notes"
  echo "- load average before / after the rounds: $load_before / $(cut -d' ' -f1-3 /proc/loadavg) (shared machine)"
  echo
  echo "## Commands"
  echo
  echo '```'
  if [ -n "$base_bin" ]; then
    echo "BASE_JETPROOF_BIN=$base_bin JETPROOF_BIN=$JETPROOF_BIN BASE_LABEL=$base_label LABEL=$label \\"
    echo "  LOG_FILES=$log_files DATABASES=$databases DB_SIZE=$db_size ROUNDS=$rounds bench/soft-recovery.sh $dir"
  else
    echo "LOG_FILES=$log_files DATABASES=$databases DB_SIZE=$db_size ROUNDS=$rounds bench/soft-recovery.sh $dir"
  fi
  echo "$init_cmd"
  if [ -n "$base_bin" ]; then
    echo "$base_label: jetproof init $dir/job-base.toml --out $dir/results/init-base   # job.toml with data_dir $dir/data-base; its runs use job-base.toml"
  fi
  echo "$run_cmd   # per round and build, N = round-build"
  echo "$fio_seq_cmd"
  echo "$fio_rand_cmd"
  echo "$fio_rand_deep_cmd"
  echo "# job.toml:"
  sed 's/^/#   /' "$dir/job.toml"
  echo '```'
  echo
  echo "## Results"
  echo
  echo "Seconds per log: per instance, its replay's seconds ÷ its log files (what Jetstress reports)."
  echo "Wall s per log: the concurrent replay's wall clock ÷ log files per instance. Read MB/s: log"
  echo "and page reads of all instances over the concurrent replay's wall clock (10^6 bytes). CPU:"
  echo "the replaying thread's own CPU time (redo, undo, the clean close), per instance; CPU busy ="
  echo "that CPU time ÷ the replay's seconds (near 1: CPU-bound; well under 1: waiting for I/O)."
  echo
  echo "| build | round | logs replayed (all) | generation s | replay s (wall) | seconds per log (per instance) | wall s per log | records applied | records skipped | CPU µs per record applied | CPU µs per record replayed (applied + skipped) | replay thread CPU busy | log read MB/s | page read MB/s | replay read MB/s | page write MB/s | fio 1 MiB seq read MB/s | replay read ÷ fio seq | fio 32 KiB rand read MB/s (${databases} readers) | page read ÷ fio rand | fio 32 KiB rand read MB/s ($((databases * readers)) readers) | page read ÷ fio rand ($((databases * readers))) | round wall s |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${rows[@]}"
  echo
  if [ -n "$base_bin" ]; then
    echo "## $label against $base_label, same round"
    echo
    echo "Wall seconds per log of each build in the same round (the same job, each on databases it initialised itself; the same fio figures), and"
    echo "the ratio $label ÷ $base_label (under 1: $label replays faster)."
    echo
    echo "| round | $base_label wall s per log | $label wall s per log | $label ÷ $base_label |"
    echo "| ---: | ---: | ---: | ---: |"
    printf '%s\n' "${ratios[@]}"
    echo
  fi
  echo "## jetproof's report (last round)"
  echo
  echo '```'
  if [ -n "$base_bin" ]; then
    printf '%s\n\n' "${raw[-2]}"
  fi
  printf '%s\n' "${raw[-1]}"
  echo '```'
} >"$out"
echo "wrote $out" >&2
