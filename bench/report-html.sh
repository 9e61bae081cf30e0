#!/usr/bin/env bash
# Benchmark of `jetproof report` (issue 17's target): report.html from a 24 h result in under 2 s,
# the page under 2 MB. Wall clock of the whole command: reading result.json and samples.csv,
# building every chart and table, writing the page.
#
# The 24 h result is generated (bench/report-html-gen.py, fixed seed) from a real result of this
# build (a 2 s stress run with its checksum pass: two instances, every I/O class the run had), its
# samples.csv stretched to 24 h at the sample interval of each shape (5 s, jetproof's default,
# and 1 s). No reference tool builds Jetstress's HTML report on Linux; the nearest reference is
# measured in the same rounds: Python's csv module reading the same samples.csv and computing the
# same per-interval series (bench/report-html-reference.py), without drawing anything.
#
# Usage: bench/report-html.sh [DIR]   (default ./bench-data; the generated results are removed after)
# Environment: INTERVALS (default "5 1"), ROUNDS (3), NOW_JETPROOF (a binary to measure instead
# of building the working tree), OUT (default bench/results/<date>-report-html.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
dir=${1:-$PWD/bench-data}
intervals=${INTERVALS:-5 1}
rounds=${ROUNDS:-3}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
work="$dir/report-html-bench"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "- python: $(python3 --version 2>&1)")
if [[ -n ${NOW_JETPROOF:-} ]]; then
  jetproof=$NOW_JETPROOF
else
  (cd "$here/.." && cargo build --release -q -p jetproof)
  jetproof="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
fi

(cd "$work" && "$jetproof" run --test stress --data-dir data --databases 2 --db-size 8MiB \
  --duration 2s --out template >/dev/null 2>&1)
rm -rf "$work/data"

seconds() { # command...; prints wall seconds
  local start end
  start=$(date +%s.%N)
  "$@" >/dev/null
  end=$(date +%s.%N)
  python3 -c "print('%.3f' % ($end - $start))"
}
median() { python3 -c "import statistics,sys; print('%.3f' % statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

rows=""
checks=""
for interval in $intervals; do
  set_dir="$work/day-$interval"
  python3 "$here/report-html-gen.py" "$work/template" "$set_dir" "$interval"
  lines=$(($(wc -l < "$set_dir/samples.csv") - 1))
  size=$(du -m "$set_dir/samples.csv" | cut -f1)
  j=() p=()
  for round in $(seq "$rounds"); do
    rm -rf "$work/page"
    j+=("$(seconds "$jetproof" report "$set_dir" --out "$work/page")")
    p+=("$(seconds python3 "$here/report-html-reference.py" "$set_dir/samples.csv")")
  done
  page=$(stat -c %s "$work/page/report.html")
  check=$(python3 - "$work/page/report.html" "$page" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
size = int(sys.argv[2])
drawn = [int(n) for n in re.findall(r'data-points="(\d+)"', html)]
bad = []
if size >= 2_000_000: bad.append(f"page {size} bytes")
if not drawn or max(drawn) > 1200 or min(drawn) == 0: bad.append(f"points {min(drawn)}..{max(drawn)}")
for chart in ("iops", "latency-db_read", "latency-log_write"):
    if f'data-chart="{chart}"' not in html: bad.append(f"no {chart} chart")
print(f"{len(drawn)} series, {min(drawn)} to {max(drawn)} points each; page {size} bytes" if not bad else "FAIL: " + "; ".join(bad))
PY
)
  reference=$(python3 "$here/report-html-reference.py" "$set_dir/samples.csv")
  jm=$(median "${j[@]}"); pm=$(median "${p[@]}")
  rows+="| ${interval} s | $lines | $size MB | $jm (${j[*]}) | $(python3 -c "print('%.2f' % ($page / 1e6))") MB | $pm (${p[*]}) |"$'\n'
  checks+="- ${interval} s: $check; Python's intervals and peak IOPS: $reference"$'\n'
  rm -rf "$set_dir"
done

out=${OUT:-$(fresh_results "$here/results" report-html)}
{
  echo "# jetproof report: report.html from a 24 h result"
  echo
  echo "Command: \`bench/report-html.sh $*\` (INTERVALS=\"$intervals\", ROUNDS=$rounds)"
  echo
  echo "$notes"
  echo "## Wall seconds, median of $rounds rounds (each round's figure in brackets)"
  echo
  echo "Target (issue 17): under 2 s, the page under 2 MB. No tool builds a Jetstress-style HTML"
  echo "report on Linux; the nearest reference reads the same samples.csv: Python's csv module"
  echo "computing the same per-interval series, drawing nothing."
  echo
  echo "| sample interval | samples.csv rows | samples.csv | jetproof report (s) | report.html | Python csv, same series (s) |"
  echo "|---|---:|---:|---:|---:|---:|"
  printf '%s' "$rows"
  echo
  echo "## Checks"
  echo
  printf '%s' "$checks"
} > "$out"
cat "$out"
