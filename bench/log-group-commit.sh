#!/usr/bin/env bash
# Group commit of jetproof's log on this machine's disk: durable commits per second with 1, 4 and
# 16 concurrent committers against the number of log writes (each write + fdatasync) they needed,
# with fio's 4 KiB fdatasync sequential write measured in the same run as the reference for what
# the device gives one serial durable writer.
#
# Usage: bench/log-group-commit.sh            (results in bench/results/<date>-log-group-commit.md)
# Environment:
#   JETPROOF_BENCH_DIR  directory on the disk under test (default /var/tmp/jetproof-bench-log)
#   RUN_SECONDS         seconds per measurement (default 10)
#   COMMITTERS          comma-separated committer counts (default 1,4,16)
#   PAYLOAD_BYTES       record payload per commit (default 300)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${JETPROOF_BENCH_DIR:-/var/tmp/jetproof-bench-log}
RUN_SECONDS=${RUN_SECONDS:-10}
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
echo "fio reference (buffered, as --rw=write --bs=4k --fdatasync=1)" >&2
read -r FIO_IOPS FIO_SYNC_US < <(fio_run ref-buffered "")
echo "fio reference (direct)" >&2
read -r FIO_DIRECT_IOPS FIO_DIRECT_SYNC_US < <(fio_run ref-direct "--direct=1")

JP_CMD="$BIN --dir $DIR --committers $COMMITTERS --seconds $RUN_SECONDS --payload-bytes $PAYLOAD_BYTES"
echo "jetproof log: $JP_CMD" >&2
RESULTS=$($JP_CMD)
echo "$RESULTS" >&2
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
    echo "- host: $(hostname), kernel $(uname -r), nproc $(nproc)"
    echo "- memory: $(free -h | awk '/Mem:/ {print $2}')"
    echo "- file system under test: $(df -T "$DIR" | awk 'NR==2 {print $2 " on " $1}') ($DIR)"
    echo "- load average before/after: $LOAD_BEFORE / $LOAD_AFTER (the machine is shared; other"
    echo "  engineers' builds run at the same time, so absolute figures are noisy)"
    echo
    echo "## Commands"
    echo
    echo '```'
    echo "bench/log-group-commit.sh   # RUN_SECONDS=$RUN_SECONDS COMMITTERS=$COMMITTERS PAYLOAD_BYTES=$PAYLOAD_BYTES"
    echo "$FIO_CMD"
    echo "$FIO_CMD --direct=1"
    echo "$JP_CMD"
    echo '```'
    echo
    echo "## Reference: fio, 4 KiB sequential writes, fdatasync after each"
    echo
    echo "| fio | IOPS (= durable writes/s) | mean fdatasync latency |"
    echo "| --- | ---: | ---: |"
    echo "| buffered | $FIO_IOPS | ${FIO_SYNC_US} µs |"
    echo "| direct | $FIO_DIRECT_IOPS | ${FIO_DIRECT_SYNC_US} µs |"
    echo
    echo "## jetproof log"
    echo
    echo "| committers | durable commits/s | log writes/s | commits per log write | mean commit latency | mean log write | commits/s ÷ fio direct IOPS |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    while read -r line; do
        [ -n "$line" ] || continue
        commits=$(field "$line" commits_per_s)
        ratio=$(python3 -c "print('%.2f' % ($commits / max($FIO_DIRECT_IOPS, 1)))")
        echo "| $(field "$line" committers) | $commits | $(field "$line" log_writes_per_s) | $(field "$line" commits_per_write) | $(field "$line" mean_commit_latency_us) µs | $(field "$line" mean_write_bytes) B | $ratio |"
    done <<<"$RESULTS"
    echo
    echo "Raw output:"
    echo
    echo '```'
    echo "$RESULTS"
    echo '```'
} >"$OUT"
echo "wrote $OUT" >&2
