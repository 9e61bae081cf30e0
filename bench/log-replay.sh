#!/usr/bin/env bash
# Replay-read speed of jetproof's log on this machine's disk: N generations of 1 MiB written
# through the log, then read back with the replay reader (large sequential direct reads, every
# frame's checksums verified; records are not applied, that is recovery's work). Reports seconds
# per 1 MiB log file (the seeds: 1.7-2.3 s per log on spinning arrays, including apply) and CPU µs
# per record, against fio's 1 MiB sequential direct read of the same amount in the same run.
#
# Usage: bench/log-replay.sh      (results in bench/results/<date>-log-replay.md)
# Environment:
#   JETPROOF_BENCH_DIR  directory on the disk under test (default /var/tmp/jetproof-bench-log)
#   GENERATIONS         generations to write and read (default 256)
#   ROUNDS              repetitions (default 3)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${JETPROOF_BENCH_DIR:-/var/tmp/jetproof-bench-log}
GENERATIONS=${GENERATIONS:-256}
ROUNDS=${ROUNDS:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DATE=$(date -u +%Y-%m-%d)
OUT=$ROOT/bench/results/$DATE-log-replay.md

mkdir -p "$ROOT/bench/results" "$DIR"
touch "$OUT"
if ! command -v fio >/dev/null; then
    echo "fio missing: installing it with apt-get" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get install -y fio; else sudo apt-get install -y fio; fi
fi

echo "building the benchmark (release)" >&2
(cd "$ROOT" && cargo build --release -p jetproof-log --example replay)
BIN=$CARGO_TARGET_DIR/release/examples/replay
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
FIO_CMD="fio --name=ref-read --directory=$DIR --rw=read --bs=1m --direct=1 --size=${GENERATIONS}m --ioengine=sync --output-format=json"
JP_WRITE="$BIN --dir $DIR --generations $GENERATIONS --phase write"
JP_READ="$BIN --dir $DIR --phase read"
ROWS=""
RAW=""
for round in $(seq 1 "$ROUNDS"); do
    # Write the log first, then let fio run while the device absorbs those writes, then read.
    echo "round $round: $JP_WRITE" >&2
    written=$($JP_WRITE)
    echo "$written" >&2
    sync
    echo "round $round: fio" >&2
    fio_mib_s=$($FIO_CMD | python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
print("%.0f" % (job["read"]["bw_bytes"] / 1048576))')
    rm -f "$DIR"/ref-read.*
    echo "round $round: $JP_READ" >&2
    line=$($JP_READ)
    echo "$line" >&2
    records_written=$(sed -n 's/.*\brecords_written=\([^ ]*\).*/\1/p' <<<"$written")
    records_read=$(sed -n 's/.*\brecords=\([^ ]*\).*/\1/p' <<<"$line")
    if [ "$records_written" != "$records_read" ]; then
        echo "read $records_read records, wrote $records_written" >&2
        exit 1
    fi
    RAW+="$line"$'\n'
    field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$line"; }
    ROWS+="| $round | $(field generations_read) | $(field records) | $(field seconds_per_log_file) s | $(field read_mib_per_s) | $fio_mib_s | $(field cpu_us_per_record) µs | $(field cpu_share) | $(field mean_read_kib) KiB |"$'\n'
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

{
    echo "# Log replay read speed, $DATE"
    echo
    echo "Reading back ${GENERATIONS} generations of 1 MiB with jetproof's replay reader: whole-file"
    echo "direct reads, every frame's CRC-32C and position checked, records copied out, not applied."
    echo "Records are 40-6000 bytes (80% under 600), like per-page operations."
    echo
    echo "## Machine"
    echo
    echo "- jetproof commit: $(cd "$ROOT" && git rev-parse --short HEAD)"
    echo "- host: $(hostname), kernel $(uname -r), nproc $(nproc), memory $(free -h | awk '/Mem:/ {print $2}')"
    echo "- file system under test: $(df -T "$DIR" | awk 'NR==2 {print $2 " on " $1}') ($DIR)"
    echo "- load average before/after: $LOAD_BEFORE / $LOAD_AFTER (shared machine)"
    echo
    echo "## Commands"
    echo
    echo '```'
    echo "bench/log-replay.sh   # GENERATIONS=$GENERATIONS ROUNDS=$ROUNDS"
    echo "$FIO_CMD"
    echo "$JP_WRITE"
    echo "$JP_READ"
    echo '```'
    echo
    echo "## Results"
    echo
    echo "| round | files | records | seconds per 1 MiB log file | log read MiB/s | fio 1 MiB direct read MiB/s | CPU per record | CPU busy share | mean read |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    printf "%s" "$ROWS"
    echo
    echo '```'
    printf "%s" "$RAW"
    echo '```'
} >"$OUT"
echo "wrote $OUT" >&2
