#!/usr/bin/env bash
# Benchmark of `jetproof aggregate` (issue 16 targets): 16 hosts x 5 instances (the Hitachi ESRP
# report's shape) under 1 s, 1,000 hosts x 5 instances under 10 s, wall clock of the whole
# command (reading every result.json, checking, merging, writing result.json and report.md).
#
# The results are generated (bench/aggregate-gen.py, fixed seed) from the top level of a real
# result.json of this build (a 2 s performance test run here), with histograms as dense as a
# two-hour run's (a few hundred non-empty buckets per main class). No reference tool aggregates
# Jetstress or jetproof results, so the nearest reference is measured in the same rounds: the
# same files read and merged by Python's json module (bench/aggregate-reference.py: counts,
# rates, bucket merge, p99), and `jq` summing `achieved_iops` and the db_read counts (reading
# only, no merge). The figures are checked against each other: every class's count and p99 of
# jetproof's aggregate must equal Python's.
#
# Memory (issue 32): peak RSS by `/usr/bin/time -v` ("Maximum resident set size"), target
# <= 64 MB at 1,000 hosts (aggregate merges as it reads). References for memory: jq reading
# the same files (`jq -s`, which holds them all), and, with OLD_JETPROOF, a binary of the code
# before (which held every host's parsed result).
#
# Usage: bench/aggregate.sh [DIR]   (default ./bench-data; the generated results are removed after)
# Environment: SHAPES (default "16 1000": hosts, 5 instances each), INSTANCES (5), ROUNDS (3),
# NOW_JETPROOF (a binary to measure instead of building the working tree), OLD_JETPROOF (a
# binary of the code before, measured beside it), OUT (default bench/results/<date>-aggregate.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
dir=${1:-$PWD/bench-data}
shapes=${SHAPES:-16 1000}
instances=${INSTANCES:-5}
rounds=${ROUNDS:-3}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
work="$dir/aggregate-bench"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "- python: $(python3 --version 2>&1)"; echo "- jq: $(jq --version 2>&1)")
if [[ -n ${NOW_JETPROOF:-} ]]; then
  jetproof=$NOW_JETPROOF
else
  (cd "$here/.." && cargo build --release -q -p jetproof)
  jetproof="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
fi

# The template: a real result.json of this build.
(cd "$work" && "$jetproof" run --test performance --data-dir data --databases 2 --db-size 8MiB \
  --duration 2s --out template >/dev/null 2>&1)
rm -rf "$work/data"

seconds() { # command...; prints wall seconds
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null
  end=$(date +%s.%N)
  python3 -c "print('%.3f' % ($end - $start))"
}
peak_rss_mb() { # command...; prints the peak resident set size in MB (/usr/bin/time -v)
  /usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}'
}
median() { python3 -c "import statistics,sys; print('%.3f' % statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

rows=""
checks=""
for hosts in $shapes; do
  set_dir="$work/h$hosts"
  python3 "$here/aggregate-gen.py" "$set_dir" "$hosts" "$instances" "$work/template/result.json"
  size=$(du -sm "$set_dir" | cut -f1)
  j=() p=() q=()
  for round in $(seq "$rounds"); do
    rm -rf "$work/agg"
    j+=("$(seconds "$jetproof" aggregate "$set_dir" --out "$work/agg")")
    p+=("$(seconds python3 "$here/aggregate-reference.py" "$set_dir")")
    q+=("$(seconds sh -c "jq -s '{iops: (map(.achieved_iops) | add), reads: (map(.instances[].db_read.count) | add)}' $set_dir/*/result.json")")
  done
  rss=$(peak_rss_mb "$jetproof" aggregate "$set_dir" --out "$work/agg-rss")
  rm -rf "$work/agg-rss"
  jq_rss=$(peak_rss_mb jq -s '{iops: (map(.achieved_iops) | add)}' "$set_dir"/*/result.json)
  old="-"
  if [[ -n ${OLD_JETPROOF:-} ]]; then
    old="$(seconds "$OLD_JETPROOF" aggregate "$set_dir" --out "$work/agg-old") s, $(rm -rf "$work/agg-old"; peak_rss_mb "$OLD_JETPROOF" aggregate "$set_dir" --out "$work/agg-old") MB"
    rm -rf "$work/agg-old"
  fi
  python3 "$here/aggregate-reference.py" "$set_dir" > "$work/reference.json"
  check=$(python3 - "$work/agg/result.json" "$work/reference.json" <<'PY'
import json, sys
agg = json.load(open(sys.argv[1]))
ref = json.load(open(sys.argv[2]))
bad = []
for key, r in ref.items():
    if not isinstance(r, dict):
        continue
    t = agg["totals"][key]
    if t["count"] != r["count"] or t["p99_ms"] != r["p99_ms"] or abs(t["ops_per_sec"] - r["ops_per_sec"]) > 1e-6 * r["ops_per_sec"]:
        bad.append(f"{key}: jetproof {t['count']} {t['p99_ms']} python {r['count']} {r['p99_ms']}")
if abs(agg["achieved_iops"] - ref["achieved_iops"]) > 1e-6 * ref["achieved_iops"]:
    bad.append("achieved_iops")
print("agree: every class's count, rate and p99, and the achieved IOPS" if not bad else "DISAGREE: " + "; ".join(bad))
PY
)
  jm=$(median "${j[@]}"); pm=$(median "${p[@]}"); qm=$(median "${q[@]}")
  ratio=$(python3 -c "print('%.1f' % ($pm / max($jm, 1e-3)))")
  rows+="| $hosts x $instances | $size MB | $jm (${j[*]}) | $pm (${p[*]}) | $qm (${q[*]}) | $ratio | $rss MB | $jq_rss MB | $old |"$'\n'
  checks+="- $hosts hosts: $check"$'\n'
  rm -rf "$set_dir"
done

out=${OUT:-$(fresh_results "$here/results" aggregate)}
{
  echo "# jetproof aggregate: time to combine many hosts' results"
  echo
  echo "Command: \`bench/aggregate.sh $*\` (SHAPES=\"$shapes\", INSTANCES=$instances, ROUNDS=$rounds)"
  echo
  echo "$notes"
  echo "## Wall seconds, median of $rounds rounds (each round's figure in brackets)"
  echo
  echo "Targets (issue 16): 16 x 5 under 1 s, 1,000 x 5 under 10 s. No tool aggregates Jetstress"
  echo "or jetproof results; the nearest references read the same files: Python's json module"
  echo "doing the same merge (counts, rates, buckets, p99), and jq only summing two figures."
  echo
  echo "Memory target (issue 32): jetproof's peak RSS <= 64 MB at 1,000 hosts."
  echo
  echo "| hosts x instances | JSON read | jetproof aggregate (s) | Python json, same merge (s) | jq, two sums only (s) | Python ÷ jetproof | jetproof peak RSS | jq -s peak RSS | old code (OLD_JETPROOF): s, peak RSS |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s' "$rows"
  echo
  echo "## Checks"
  echo
  printf '%s' "$checks"
} > "$out"
cat "$out"
