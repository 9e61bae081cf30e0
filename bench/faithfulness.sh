#!/usr/bin/env bash
# Faithfulness of the I/O shape (issue 5): runs the performance test paced at the seeds' rate and
# prints, per instance, the four shape figures the reference reports give
# (../shared/reference/seed-transactional-io.json) beside the seeds' ranges:
#   database reads per database write, database write average bytes,
#   log writes per database write, log write average bytes;
# and a seventh, the database's growth per transactional I/O (the reports' Initial and Final
# Database Size over their achieved IOPS x duration: 241-446 bytes; issue 23), with beside it the
# growth per byte of log written (0.20-0.28 in the reports: a figure the job's scale does not set);
# and, beside them, the database extension writes (class `db_extend`, kept out of `db_write`),
# the log's own summary line from the test log, and optionally the log's anatomy (records and
# bytes by type and page-change kind, from the example `log_anatomy` of jetproof-instance).
#
# The job (docs/faithfulness.md): 2 databases of DB_SIZE (32 KiB pages), 4 sessions each, cache
# CACHE_MIN / CACHE_MAX (by default the job's defaults, 32 MiB / 256 MiB, over 16 GiB databases:
# the cache holds 1.6%, as the issue asks; 32 GiB of free space needed. The quick variant of
# earlier sessions, DB_SIZE=2GiB CACHE_MIN=8MiB CACHE_MAX=32MiB, holds the same share but misses
# the mailbox tails the larger cache keeps, so its log-write count is not comparable), target
# 300 transactional IOPS (2000 mailboxes x 0.15), DURATION, direct I/O, default mix; the log is kept (log.keep_files) so
# its anatomy can be read. Each round initialises fresh databases, so every run starts from the
# same freshly loaded state. Per instance it also prints the database I/Os and log writes per
# transaction and the cache hit share: the log's shape follows from how many commits each
# database I/O carries (docs/faithfulness.md).
#
# Before/after: with BASE_JETPROOF set (a `jetproof` binary built from an earlier commit), every
# round runs it and the current build, interleaved; compare within rounds (the machine is shared).
#
# Usage: bench/faithfulness.sh [DIR]   (default ./bench-faith-data; removed after)
# Environment: ROUNDS (2), DURATION (600s: a freshly loaded database carries a transient for the first minutes, docs/faithfulness.md), DB_SIZE (16GiB), CACHE_MIN (32MiB), CACHE_MAX (256MiB),
# LOG_SECTOR (log.sector_size; unset: the job's default, 4KiB), BASE_JETPROOF, BASE_LABEL (before),
# NOW_JETPROOF (a binary to measure instead of building the working tree), NOW_LABEL (now),
# ANATOMY (1: also run log_anatomy on each run's logs; ANATOMY_BIN: a built log_anatomy binary),
# SEEDS (the reference JSON), DATABASES (2: each database gets 1,000 mailboxes at 0.15 IOPS and its own
# cache, so DATABASES=1 measures the same per-database load on half the disk space),
# OUT (default bench/results/<date>-faithfulness.md),
# SHAPE (default | low-load). low-load (issue 36): the Lenovo S3200 report's shape
# (jobs/four-copy-low-load.toml) at a reduced scale: 4 databases of DB_SIZE (2GiB here), 750
# mailboxes at 0.16 IOPS (120 target), 2 sessions, 4 copies, cache 32/256 MiB each, DURATION
# (1200s unless set); its figures are printed against the Lenovo report's performance test (its four
# instances) and growth against its performance and stress tests, with the log replication reads.
# Both shapes print the replication sender's reads (size, rate, and bytes read per byte the log
# writes carry: 0.68-0.96 in the two-copy reports, 1.25-1.29 at Lenovo's four copies).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
dir=${1:-$PWD/bench-faith-data}
rounds=${ROUNDS:-2}
shape=${SHAPE:-default}
case $shape in
  default)
    databases=${DATABASES:-2}
    mailboxes=$((databases * 1000))
    iops_per_mailbox=0.15
    threads=4
    copies=1
    duration=${DURATION:-600s}
    db_size=${DB_SIZE:-16GiB}
    ;;
  low-load)
    databases=${DATABASES:-4}
    mailboxes=750
    iops_per_mailbox=0.16
    threads=2
    copies=4
    # 1200 s: the warm-up's dirty pages are written before the window, and with copies the
    # checkpoint depth is 100 MiB, which this shape's log (~190 KB/s per instance) reaches only
    # ~9 minutes in; a 180 s window saw almost no database writes (2026-12-07).
    duration=${DURATION:-1200s}
    db_size=${DB_SIZE:-2GiB}
    ;;
  *) echo "SHAPE must be default or low-load, not '$shape'" >&2; exit 2 ;;
esac
cache_min=${CACHE_MIN:-32MiB}
cache_max=${CACHE_MAX:-256MiB}
log_sector=${LOG_SECTOR:-}
sector_line=""
if [[ -n $log_sector ]]; then sector_line="sector_size = \"$log_sector\""; fi
seeds=${SEEDS:-$here/../../shared/reference/seed-transactional-io.json}
out=${OUT:-$here/results/$(date -u +%Y-%m-%d)-faithfulness$([[ $shape == default ]] || echo "-$shape").md}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
target="${CARGO_TARGET_DIR:-$here/../target}"
if [[ -n ${NOW_JETPROOF:-} ]]; then
  jetproof=$NOW_JETPROOF
else
  (cd "$here/.." && cargo build --release -q -p jetproof)
  jetproof="$target/release/jetproof"
fi
anatomy=""
if [[ -n ${ANATOMY_BIN:-} ]]; then
  anatomy=$ANATOMY_BIN
elif [[ ${ANATOMY:-1} == 1 ]]; then
  (cd "$here/.." && cargo build --release -q -p jetproof-instance --example log_anatomy)
  anatomy="$target/release/examples/log_anatomy"
fi
variants=("${NOW_LABEL:-now} $jetproof")
if [[ -n ${BASE_JETPROOF:-} ]]; then
  variants=("${BASE_LABEL:-before} $BASE_JETPROOF" "${variants[@]}")
fi
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)")

job() {
  cat <<JOB
[simulation]
mailboxes = $mailboxes
iops_per_mailbox = $iops_per_mailbox
copies_per_database = $copies
[storage]
data_dir = "$dir/data"
databases = $databases
db_size = "$db_size"
direct_io = true
[workload]
threads = $threads
[cache]
min_size = "$cache_min"
max_size = "$cache_max"
[log]
keep_files = true
$sector_line
[run]
duration = "$duration"
sample_interval = "5s"
JOB
}

rows=()
spaces=""
anatomies=""
accounting=""
for round in $(seq 1 "$rounds"); do
  for variant in "${variants[@]}"; do
    read -r label binary <<<"$variant"
    rm -rf "$dir/data" "$dir/results" "$dir/init"
    job >"$dir/job.toml"
    "$binary" init "$dir/job.toml" --out "$dir/init" >/dev/null
    "$binary" run "$dir/job.toml" --test performance --out "$dir/results" >/dev/null || true
    while IFS= read -r row; do rows+=("| $round | $label $row"); done < <(python3 - "$dir/results" "${duration%s}" <<'PY'
import json, sys
d = sys.argv[1]
secs = float(sys.argv[2])
r = json.load(open(d + "/result.json"))
logs = {}
for line in open(d + "/test.log"):
    if "Log of " in line:
        name = line.split("Log of ", 1)[1].split(":", 1)[0]
        logs[name] = line.split(": ", 2)[-1].strip()
for i in r["instances"]:
    rd, wr, lw = i.get("db_read", {}), i.get("db_write", {}), i.get("log_write", {})
    ext = i.get("db_extend", {})
    w = max(wr.get("count", 0), 1)
    t = max(i.get("transactions", 0), 1)
    hits, misses = i.get("cache_hits", 0), i.get("cache_misses", 0)
    growth = i.get("db_growth_bytes_per_transactional_io")
    # The pages in use grow by what splits take less what merges free: the rate the file grows
    # at once the free pages a fresh database holds are used up (docs/faithfulness.md).
    ios = rd.get("count", 0) + wr.get("count", 0)
    used = (i.get("db_used_final_bytes", 0) - i.get("db_used_initial_bytes", 0)) / max(ios, 1)
    # The file's growth per byte of log written: a figure the job's scale does not set (the
    # database I/Os a transaction costs depend on how much of the database the cache holds; the
    # log bytes and the growth a transaction makes do not). The reports: 0.20 - 0.28
    # (docs/faithfulness.md, "Growth per Jetstress batch").
    grown = i.get("db_size_final_bytes", 0) - i.get("db_size_initial_bytes", 0)
    per_log = grown / max(lw.get("bytes", 0), 1)
    # The replication sender's reads of closed generations (class `replication_read`): size
    # and rate, beside the Lenovo report's "Log Replication I/O Performance".
    rep = i.get("replication_read", {})
    # Bytes the copies read per byte the log writes carry: a figure of the log's shape, not of
    # its rate (the reports: 0.68 - 0.96 with two copies, 1.25 - 1.29 at Lenovo's four;
    # docs/journal/2026-12-02-low-load-replication.md).
    rep_per_log = rep.get("count", 0) * rep.get("avg_bytes", 0) / max(lw.get("bytes", 0), 1)
    print("| %s | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f | %.3f | %.1f%% | %d x %.0f KiB | %s | %.0f | %.3f | %.0f | %.2f | %.2f |" % (
        i["name"], r["achieved_iops"], rd.get("count", 0) / w, wr.get("avg_bytes", 0),
        lw.get("count", 0) / w, lw.get("avg_bytes", 0),
        (rd.get("count", 0) + wr.get("count", 0)) / t, lw.get("count", 0) / t,
        100.0 * hits / max(hits + misses, 1), ext.get("count", 0),
        ext.get("avg_bytes", 0) / 1024, "—" if growth is None else "%.0f" % growth, used,
        per_log, rep.get("avg_bytes", 0), rep.get("count", 0) / max(secs, 1), rep_per_log))
PY
)
    # The space accounting of each database over the window (result.json's `db_space`,
    # docs/results.md): where split pages came from, merges, growth, free space at the end.
    # Where the pages in use went, per transactional I/O and per transaction: the records'
    # net bytes (what no space management can avoid: the inserts' entries less the deletes'),
    # the interior pages splits added, and the free bytes left in the pages in use (the rest).
    accounting+=$(python3 - "$dir/results" "$round" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/result.json"))
# The page size the run used, as the job states it ("32KiB").
text = r["parameters"]["storage"]["page_size"]
page = int(text[:-3]) * 1024 if text.endswith("KiB") else int(text.rstrip("B"))
for i in r["instances"]:
    s = i.get("db_space")
    if not s or "leaf_bytes_added" not in s:
        continue
    ios = max(i.get("db_read", {}).get("count", 0) + i.get("db_write", {}).get("count", 0), 1)
    t = max(i.get("transactions", 0), 1)
    used = i.get("db_used_final_bytes", 0) - i.get("db_used_initial_bytes", 0)
    records = s["leaf_bytes_added"] - s["leaf_bytes_removed"]
    interior = s.get("interior_splits", 0) * page
    rest = used - records - interior
    print("| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %s |" % (
        sys.argv[2], sys.argv[3], i["name"], used / ios, records / ios, interior / ios,
        rest / ios, used / t, records / t, ios / t,
        "—" if used - interior <= 0 else "%.0f%%" % (100.0 * records / (used - interior))))
PY
)$'\n'
    spaces+=$(python3 - "$dir/results" "$round" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/result.json"))
for i in r["instances"]:
    s = i.get("db_space")
    if s:
        print("| %s | %s | %s | %s |" % (sys.argv[2], sys.argv[3], i["name"],
              ", ".join("%s %s" % (k, v) for k, v in s.items())))
PY
)$'\n'
    if [[ -n $anatomy ]]; then
      for logs in "$dir"/data/*/logs; do
        anatomies+=$'\n'"### Round $round, $label, $(basename "$(dirname "$logs")")"$'\n\n'
        anatomies+=$(grep -h "Log of $(basename "$(dirname "$logs")")" "$dir/results/test.log" | cut -d' ' -f2- || true)
        anatomies+=$'\n\n'"$("$anatomy" "$logs")"$'\n'
      done
    fi
  done
done
rm -rf "$dir/data" "$dir/results" "$dir/init" "$dir/job.toml"

seed_ranges=$(python3 - "$seeds" "$shape" <<'PY'
import json, sys
if sys.argv[2] == "low-load":
    # The Lenovo S3200 report (../shared/reference/seed-lenovo-s3200-exchange2013-esrp.txt), its
    # performance test's Transactional I/O Performance, the four instances (its columns print in
    # reverse order: db reads/s 23.10-23.41, db writes/s 10.63-11.09, db write avg 35,577-35,733 B,
    # log writes/s 2.85-2.98, log write avg 20,579-21,015 B); growth: Initial/Final Database Size
    # over achieved IOPS x duration, performance (136.444, 2 h) 598 B and stress (140.729, 24 h)
    # 362 B; Log Replication I/O Performance: 98,560-101,453 B at 0.76-0.78 reads/s, 1.25-1.29
    # bytes read per byte the log writes carry (each instance's reads/s x bytes over its log
    # writes/s x bytes).
    print("| Lenovo S3200 (low load) | | | | 2.10 – 2.17 | 35577 – 35733 | 0.27 – 0.27 | 20579 – 21015 | — | — | — | — | 362 – 598 | — | — | 98560 – 101453 | 0.76 – 0.78 | 1.25 – 1.29 |")
    sys.exit()
try:
    reps = json.load(open(sys.argv[1]))["reports"]
except OSError:
    print("| seeds | (reference file not found) | | | | | | | | | | | | | | | |")
    sys.exit()
def rng(k):
    v = [x[k] for x in reps]
    return min(v), max(v)
a, b = rng("db_read_write_ratio"); c, d = rng("db_write_avg_bytes")
e, f = rng("log_writes_per_db_write"); g, h = rng("log_write_avg_bytes")
# Growth per transactional I/O is not in the seeds' JSON: the reports' Initial and Final
# Database Size over achieved IOPS x duration (Infortrend 2 h and 24 h, Hitachi 2 h and 24 h:
# 241-446 bytes; issue 23, docs/faithfulness.md).
print("| seeds (%d reports) | | | | %.2f – %.2f | %.0f – %.0f | %.2f – %.2f | %.0f – %.0f | — | — | — | — | 241 – 446 | — | 0.20 – 0.28 | 229800 – 232562 | — | 0.68 – 0.96 |" % (
    len(reps), a, b, c, d, e, f, g, h))
PY
)

{
  echo "# Faithfulness: the I/O shape beside the reference reports"
  echo
  echo "\`bench/faithfulness.sh\` (SHAPE=$shape): the performance test paced at $mailboxes mailboxes"
  echo "x $iops_per_mailbox transactional IOPS, $databases database(s) of $db_size, $copies copies, 32 KiB pages, $threads sessions each, cache $cache_min min / $cache_max max,"
  echo "$duration measured, direct I/O, default mix, log sectors ${log_sector:-4KiB (default)}; fresh databases for every run. Variants: ${variants[*]}."
  echo
  echo "$notes"
  echo
  echo "## Shape figures per instance"
  echo
  echo "| round | variant | instance | achieved IOPS (both) | db reads per db write | db write avg bytes | log writes per db write | log write avg bytes | db I/Os per transaction | log writes per transaction | cache hits | db extension writes (\`db_extend\`) | db growth per transactional I/O (bytes) | pages in use, growth per transactional I/O (bytes) | db growth per log byte written | log replication read avg bytes | log replication reads/s | replication bytes read per log byte written |"
  echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  echo "$seed_ranges"
  printf '%s\n' "${rows[@]}"
  echo
  echo "## Space accounting per instance (result.json \`db_space\`, over the measured window)"
  echo
  echo "| round | variant | instance | db_space |"
  echo "| --- | --- | --- | --- |"
  printf '%s' "$spaces"
  echo
  echo "## Where the pages in use went (db_space: records' net bytes, interior splits)"
  echo
  echo "Pages in use grown = records' net bytes (leaf entries the changes added less those they removed) + interior pages (one per"
  echo "interior split) + free bytes left in pages in use (the rest). 'Records in leaf growth' is the records' net bytes over the"
  echo "leaves' growth (pages in use less interior pages): how full the space the leaves grew by is."
  echo
  echo "| round | variant | instance | pages in use per transactional I/O | records' net bytes per I/O | interior pages per I/O | free bytes left per I/O | pages in use per transaction | records' net bytes per transaction | db I/Os per transaction | records in leaf growth |"
  echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  printf '%s' "$accounting"
  if [[ -n $anatomies ]]; then
    echo
    echo "## What the log carries (log_anatomy)"
    echo "$anatomies"
  fi
} >"$out"
cat "$out"
