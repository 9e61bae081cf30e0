#!/usr/bin/env bash
# Group commit of jetproof's log on this machine's disk: durable commits per second with 1, 4 and
# 16 concurrent committers against the number of log writes (each write + fdatasync) they needed,
# with fio's 4 KiB fdatasync sequential write measured in the same run as the reference for what
# the device gives one serial durable writer.
#
# Usage: bench/log-group-commit.sh            (results in bench/results/<date>-log-group-commit.md)
# Environment:
#   JETPROOF_BENCH_DIR  directory on the disk under test (default /var/tmp/jetproof-bench-log)
#   RUN_SECONDS         seconds per measurement (default 5)
#   ROUNDS              rounds of (fio, then jetproof with each committer count) (default 3);
#                       the disk and CPUs are shared, so rounds show how much the figures move
#   COMMITTERS          comma-separated committer counts (default 1,4,16)
#   PAYLOAD_BYTES       record payload per commit (default 300)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${JETPROOF_BENCH_DIR:-/var/tmp/jetproof-bench-log}
RUN_SECONDS=${RUN_SECONDS:-5}
ROUNDS=${ROUNDS:-3}
COMMITTERS=${COMMITTERS:-1,4,16}
PAYLOAD_BYTES=${PAYLOAD_BYTES:-300}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DATE=$(date -u +%Y-%m-%d)
OUT=$ROOT/bench/results/$DATE-log-group-commit.md

# Check the output path and the tools before any work starts.
mkdir -p "$ROOT/bench/results" "$DIR"
touch "$OUT"
if ! command -v fio >/dev/null; then
    echo "fio missing: installing it with apt-get" >&2
    if [ "$(id -u)" -eq 0 ]; then apt-get install -y fio; else sudo apt-get install -y fio; fi
fi
command -v python3 >/dev/null || { echo "python3 is needed to read fio's JSON" >&2; exit 1; }

echo "building the benchmark (release)" >&2
(cd "$ROOT" && cargo build --release -p jetproof-log --example group_commit)
BIN=$CARGO_TARGET_DIR/release/examples/group_commit

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

fio_run() { # $1: name, $2: extra flags; prints IOPS and mean fdatasync latency (us)
    local json
    json=$(fio --name="$1" --directory="$DIR" --rw=write --bs=4k --fdatasync=1 --size=64m \
        --runtime="$RUN_SECONDS" --time_based --ioengine=sync $2 --output-format=json)
    rm -f "$DIR/$1".*
    python3 -c '
import json, sys
job = json.loads(sys.argv[1])["jobs"][0]
print("%.0f %.0f" % (job["write"]["iops"], job["sync"]["lat_ns"]["mean"] / 1000))' "$json"
}

FIO_CMD="fio --name=ref --directory=$DIR --rw=write --bs=4k --fdatasync=1 --size=64m --runtime=$RUN_SECONDS --time_based --ioengine=sync --output-format=json"
JP_CMD="$BIN --dir $DIR --committers $COMMITTERS --seconds $RUN_SECONDS --payload-bytes $PAYLOAD_BYTES"
FIO_ROWS=""
JP_ROWS=""
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round: fio reference (buffered, as --rw=write --bs=4k --fdatasync=1)" >&2
    line=$(fio_run ref-buffered "")
    read -r iops sync_us <<<"$line"
    echo "round $round: fio reference (direct)" >&2
    line=$(fio_run ref-direct "--direct=1")
    read -r direct_iops direct_sync_us <<<"$line"
    echo "round $round: fio reference (direct, 4 jobs each syncing its own file)" >&2
    line=$(fio_run ref-direct4 "--direct=1 --numjobs=4 --group_reporting")
    read -r jobs4_iops jobs4_sync_us <<<"$line"
    FIO_ROWS+="| $round | $iops | $sync_us µs | $direct_iops | $direct_sync_us µs | $jobs4_iops | $jobs4_sync_us µs |"$'\n'
    echo "round $round: jetproof log: $JP_CMD" >&2
    results=$($JP_CMD)
    echo "$results" >&2
    while read -r line; do
        [ -n "$line" ] || continue
        JP_ROWS+="$round $direct_iops $line"$'\n'
    done <<<"$results"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

field() { # $1: line, $2: key
    sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" <<<"$1"
}

{
    echo "# Log group commit, $DATE"
    echo
    echo "Durable commits per second of jetproof's log with N concurrent committers, each appending"
    echo "one ${PAYLOAD_BYTES}-byte record and waiting for it to be durable, against the log writes"
    echo "(write + fdatasync) issued. Direct I/O, 1 MiB generation files, 256 KiB log buffer."
    echo
    echo "## Machine"
    echo
    echo "- jetproof commit: $(cd "$ROOT" && git rev-parse --short HEAD)"
    echo "- host: $(hostname), kernel $(uname -r), nproc $(nproc)"
    echo "- memory: $(free -h | awk '/Mem:/ {print $2}')"
    echo "- file system under test: $(df -T "$DIR" | awk 'NR==2 {print $2 " on " $1}') ($DIR)"
    echo "- load average before/after: $LOAD_BEFORE / $LOAD_AFTER (the machine is shared; other"
    echo "  engineers' builds run at the same time, so absolute figures are noisy)"
    echo
    echo "## Commands"
    echo
    echo '```'
    echo "bench/log-group-commit.sh   # RUN_SECONDS=$RUN_SECONDS ROUNDS=$ROUNDS COMMITTERS=$COMMITTERS PAYLOAD_BYTES=$PAYLOAD_BYTES"
    echo "$FIO_CMD"
    echo "$FIO_CMD --direct=1"
    echo "$FIO_CMD --direct=1 --numjobs=4 --group_reporting"
    echo "$JP_CMD"
    echo '```'
    echo
    echo "## Reference: fio, 4 KiB sequential writes, fdatasync after each"
    echo
    echo "| round | buffered IOPS | buffered mean fdatasync | direct IOPS | direct mean fdatasync | direct, 4 jobs: IOPS | 4 jobs: mean fdatasync |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    printf "%s" "$FIO_ROWS"
    echo
    echo "## jetproof log (direct I/O)"
    echo
    echo "The last column compares durable commits/s with what fio's one serial durable writer"
    echo "got in the same round, just before."
    echo
    echo "| round | committers | durable commits/s | log writes/s | commits per log write | mean commit latency | mean fdatasync per log write | mean log write | commits/s ÷ fio direct IOPS |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    while read -r round direct_iops line; do
        [ -n "$line" ] || continue
        commits=$(field "$line" commits_per_s)
        ratio=$(python3 -c "print('%.2f' % ($commits / max($direct_iops, 1)))")
        echo "| $round | $(field "$line" committers) | $commits | $(field "$line" log_writes_per_s) | $(field "$line" commits_per_write) | $(field "$line" mean_commit_latency_us) µs | $(field "$line" mean_fdatasync_us) µs | $(field "$line" mean_write_bytes) B | $ratio |"
    done <<<"$JP_ROWS"
    echo
    echo "Raw output (round, fio direct IOPS, benchmark line):"
    echo
    echo '```'
    printf "%s" "$JP_ROWS"
    echo '```'
} >"$OUT"
echo "wrote $OUT" >&2
