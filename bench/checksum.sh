#!/usr/bin/env bash
# jetproof checksum against fio on the same database files, in the same run.
#
# Target (issue 2): `jetproof checksum` reads at >= 80% of fio's sequential direct read bandwidth
# (1 MiB blocks). Both read every database file at once, one stream per file, with direct I/O:
#   fio:      one job per file, --rw=read --bs=1M --direct=1 --ioengine=psync (one read in flight
#             per file, as jetproof's reader thread); plus a libaio queue-depth-8 run for the
#             device's ceiling, reported beside it.
#   jetproof: `jetproof checksum JOB` (release build), which also verifies every page.
# The page cache is dropped before every read pass (when run as root), although direct I/O
# bypasses it anyway.
#
# Usage: bench/checksum.sh [DATA_DIR]
#   DATA_DIR  where the databases live: put it on the disk under test
#             (default: $JETPROOF_BENCH_DIR/checksum, or /var/tmp/jetproof-bench/checksum)
# Environment: DATABASES (2), DB_SIZE (2GiB), PAGE_SIZE (32KiB), RUNS (3),
#              CPU_BENCH=0 to skip the in-memory checksum speed table.
# Writes bench/results/<date>-checksum.md.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:-${JETPROOF_BENCH_DIR:-/var/tmp/jetproof-bench}/checksum}
DATABASES=${DATABASES:-2}
DB_SIZE=${DB_SIZE:-2GiB}
PAGE_SIZE=${PAGE_SIZE:-32KiB}
RUNS=${RUNS:-3}
CPU_BENCH=${CPU_BENCH:-1}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
REPORT=$ROOT/bench/results/$(date -u +%Y-%m-%d)-checksum.md

if ! command -v fio >/dev/null; then
    echo "fio is missing: installing it" >&2
    apt-get install -y fio || { apt-get update && apt-get install -y fio; }
fi

(cd "$ROOT" && cargo build --release -q -p jetproof)
BIN=$CARGO_TARGET_DIR/release/jetproof

mkdir -p "$DIR"
cd "$DIR"
cat >job.toml <<EOF
[storage]
data_dir = "$DIR/jetproof-data"
databases = $DATABASES
db_size = "$DB_SIZE"
page_size = "$PAGE_SIZE"
direct_io = true
EOF

if [ ! -f "$DIR/jetproof-data/db$DATABASES/db$DATABASES.jpdb" ]; then
    echo "creating $DATABASES databases of $DB_SIZE in $DIR (jetproof init)" >&2
    "$BIN" init job.toml --recreate --out "$DIR/init-results" >&2
fi
FILES=()
for n in $(seq 1 "$DATABASES"); do
    FILES+=("$DIR/jetproof-data/db$n/db$n.jpdb")
done

drop_caches() {
    sync
    if [ -w /proc/sys/vm/drop_caches ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

fio_args=(--rw=read --bs=1M --direct=1 --group_reporting --output-format=json)
for f in "${FILES[@]}"; do
    fio_args+=(--name="$(basename "$f")" --filename="$f")
done
fio_mib() { python3 -c 'import json,sys; print("%.1f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"] / 2**20))'; }

results=()
all_qd1=(); all_qd8=(); all_ours=()
for run in $(seq 1 "$RUNS"); do
    drop_caches
    fio_qd1=$(fio --ioengine=psync "${fio_args[@]}" | fio_mib)
    drop_caches
    fio_qd8=$(fio --ioengine=libaio --iodepth=8 "${fio_args[@]}" | fio_mib)
    drop_caches
    rm -rf "$DIR/checksum-results"
    "$BIN" checksum job.toml --out "$DIR/checksum-results" >"$DIR/checksum-stdout.txt"
    read -r ours seen bad <<<"$(python3 -c '
import json
t = json.load(open("'"$DIR"'/checksum-results/result.json"))["totals"]
# MiB/s from bytes and seconds (result.json's mb_per_sec is MB/s, 10^6 bytes, since 2026-11-26).
print("%.1f %d %d" % (t["checked_bytes"] / 2**20 / max(t["seconds"], 1e-9), t["pages_seen"], t["pages_bad"] + t["pages_correctable"] + t["pages_wrong_number"]))')"
    ratio=$(python3 -c "print('%.0f' % (100 * $ours / $fio_qd1))")
    ratio8=$(python3 -c "print('%.0f' % (100 * $ours / $fio_qd8))")
    echo "run $run: fio QD1 $fio_qd1 MiB/s, fio QD8 $fio_qd8 MiB/s, jetproof checksum $ours MiB/s ($ratio% of QD1, $ratio8% of QD8), $seen pages, $bad damaged" >&2
    results+=("| $run | $fio_qd1 | $fio_qd8 | $ours | $ratio% | $ratio8% | $seen | $bad |")
    all_qd1+=("$fio_qd1"); all_qd8+=("$fio_qd8"); all_ours+=("$ours")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
m_qd1=$(median "${all_qd1[@]}"); m_qd8=$(median "${all_qd8[@]}"); m_ours=$(median "${all_ours[@]}")
m_ratio=$(python3 -c "print('%.0f' % (100 * $m_ours / $m_qd1))")
m_ratio8=$(python3 -c "print('%.0f' % (100 * $m_ours / $m_qd8))")
results+=("| **median** | **$m_qd1** | **$m_qd8** | **$m_ours** | **$m_ratio%** | **$m_ratio8%** | | |")
echo "median: fio QD1 $m_qd1, fio QD8 $m_qd8, jetproof checksum $m_ours MiB/s ($m_ratio% of QD1, $m_ratio8% of QD8)" >&2

cpu_table=""
if [ "$CPU_BENCH" = 1 ]; then
    cpu_table=$(cd "$ROOT/bench/checksum-speed" && cargo run --release -q)
fi

fs_type=$(df -T "$DIR" | awk 'NR==2 {print $2 " on " $1}')
{
    echo "# checksum: jetproof checksum vs fio sequential read, $(date -u +%Y-%m-%d)"
    echo
    echo "Target: jetproof checksum >= 80% of fio's sequential direct read bandwidth (1 MiB reads) on"
    echo "the same files in the same run. Made by \`bench/checksum.sh\`."
    echo
    echo "## Machine"
    echo
    echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), nproc $(nproc)"
    echo "- Memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "- Kernel: $(uname -r)"
    echo "- Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine makes runs vary; compare the medians)"
    echo "- File system: $fs_type ($(lsblk -ndo NAME,ROTA,SIZE,MODEL "$(df "$DIR" | awk 'NR==2 {print $1}')" 2>/dev/null | tr -s ' ' || echo 'device details unavailable'))"
    echo "- fio: $(fio --version)"
    echo "- Data: $DATABASES databases of $DB_SIZE, $PAGE_SIZE pages, made by \`jetproof init\`, in $DIR"
    echo
    echo "## Commands"
    echo
    echo '```'
    echo "fio --ioengine=psync ${fio_args[*]}"
    echo "fio --ioengine=libaio --iodepth=8 ${fio_args[*]}"
    echo "jetproof checksum job.toml --out checksum-results   # job: direct_io = true, 1 MiB reads"
    echo '```'
    echo
    echo "## Results (MiB/s, all files together)"
    echo
    echo "| run | fio QD1 (psync) | fio QD8 (libaio) | jetproof checksum | vs QD1 | vs QD8 | pages seen | damaged |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    printf '%s\n' "${results[@]}"
    echo
    if [ -n "$cpu_table" ]; then
        echo "## Checksum CPU cost, one core, in memory (bench/checksum-speed)"
        echo
        echo "$cpu_table"
        echo
    fi
    echo "## jetproof checksum output (last run)"
    echo
    echo '```'
    cat "$DIR/checksum-stdout.txt"
    echo '```'
} >"$REPORT"
echo "wrote $REPORT" >&2
