#!/usr/bin/env bash
# Memory of `jetproof run --test performance` against the issue's bound (issue 5 target:
# resident set <= the sum of the cache maxima + 10% + 64 MiB), for several page sizes and cache
# sizes, with the current build and (optionally) an earlier one in the same rounds.
#
# Each run: DATABASES databases of DB_SIZE (direct I/O, larger than the cache, so the warm-up
# fills the cache to its maximum before the measured window), the performance test for
# DURATION, peak resident set from /usr/bin/time. Reported: the peak, the peak less the caches'
# maxima (what jetproof holds besides its page buffers), the bound and peak / bound.
#
# There is no reference tool for this figure (fio holds a few I/O buffers, not a cache): the
# issue's bound is the reference, and BASE_JETPROOF gives the before/after ratio in the same
# rounds.
#
# Usage: bench/cache-memory.sh [DIR]   (default ./bench-data; removed after)
# Environment: PAGE_SIZES ("8KiB 32KiB"), CACHES ("64MiB 256MiB": cache maximum per instance),
# DATABASES (2), DB_SIZE (1GiB), THREADS (4), DURATION (10s), ROUNDS (2), BASE_JETPROOF
# (optional), BASE_LABEL (before), NOW_JETPROOF (default: build the working tree), NOW_LABEL
# (now), OUT (default bench/results/<date>-cache-memory.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
dir=${1:-$PWD/bench-data}
page_sizes=${PAGE_SIZES:-8KiB 32KiB}
caches=${CACHES:-64MiB 256MiB}
databases=${DATABASES:-2}
db_size=${DB_SIZE:-1GiB}
threads=${THREADS:-4}
duration=${DURATION:-10s}
rounds=${ROUNDS:-2}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
notes=$(machine_notes "$dir"; echo "- load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)")
if [[ -n ${NOW_JETPROOF:-} ]]; then
  jetproof=$NOW_JETPROOF
else
  (cd "$here/.." && cargo build --release -q -p jetproof)
  jetproof="${CARGO_TARGET_DIR:-$here/../target}/release/jetproof"
fi
builds=("${NOW_LABEL:-now}=$jetproof")
if [[ -n ${BASE_JETPROOF:-} ]]; then
  builds=("${BASE_LABEL:-before}=$BASE_JETPROOF" "${builds[@]}")
fi
out=${OUT:-$(fresh_results "$here/results" cache-memory)}

job() { # $1: page size, $2: cache maximum
  # Records of the default size (2,400 bytes) need pages of 16 KiB or more; smaller pages take
  # records of a quarter page, the most the job accepts.
  local record=
  case $1 in 4KiB) record='record_size = "1KiB"' ;; 8KiB) record='record_size = "2KiB"' ;; esac
  cat <<JOB
[storage]
data_dir = "$dir/data-$1"
databases = $databases
db_size = "$db_size"
page_size = "$1"
direct_io = true
[workload]
threads = $threads
$record
[cache]
min_size = "8MiB"
max_size = "$2"
[run]
duration = "$duration"
sample_interval = "5s"
JOB
}

rows=()
for page in $page_sizes; do
  job "$page" 64MiB >"$dir/job.toml"
  "$jetproof" init "$dir/job.toml" --out "$dir/init" >/dev/null
  rm -rf "$dir/init"
  for ((round = 1; round <= rounds; round++)); do
    for cache in $caches; do
      job "$page" "$cache" >"$dir/job.toml"
      # Alternate which build goes first from round to round.
      order=("${builds[@]}")
      if ((round % 2 == 0)); then
        order=()
        for ((i = ${#builds[@]} - 1; i >= 0; i--)); do order+=("${builds[i]}"); done
      fi
      for build in "${order[@]}"; do
        label=${build%%=*}
        binary=${build#*=}
        echo "round $round: $label, $page pages, $cache cache ..." >&2
        # Exit 1 is a failed verdict (a latency threshold on a busy machine): still measured.
        /usr/bin/time -f "%M" -o "$dir/time.txt" \
          "$binary" run "$dir/job.toml" --test performance --out "$dir/results" >/dev/null ||
          [[ $? == 1 ]]
        rss_kb=$(tail -n 1 "$dir/time.txt")
        rm -rf "$dir/results" "$dir/time.txt"
        rows+=("$round $label $page $cache $rss_kb")
      done
    done
  done
  rm -rf "$dir/data-$page"
done
rm -f "$dir/job.toml"

{
  echo "# Memory of a performance run against the bound, $(date +%F)"
  echo
  echo "## Machine"
  echo
  echo "$notes"
  echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "## Commands"
  echo
  echo '```'
  echo "bench/cache-memory.sh   # PAGE_SIZES=\"$page_sizes\" CACHES=\"$caches\" DATABASES=$databases DB_SIZE=$db_size THREADS=$threads DURATION=$duration ROUNDS=$rounds"
  for build in "${builds[@]}"; do echo "# ${build%%=*}: ${build#*=}"; done
  echo "# per page size: jetproof init job.toml (databases of $db_size, direct I/O)"
  echo "# per round, cache size and build: /usr/bin/time -f %M jetproof run job.toml --test performance   # cache min 8MiB, max CACHE"
  echo '```'
  echo
  echo "## Figures"
  echo
  echo "Peak: the run's peak resident set. Besides the caches: the peak less the caches' maxima"
  echo "($databases × the cache maximum; the warm-up fills each cache to its maximum before the"
  echo "measured window). Bound: $databases × cache × 1.1 + 64 MiB."
  echo
  # Both tables from the rows, in one pass: the rows' figures, then (with two builds) the
  # medians of what each build holds besides its caches and their ratio.
  printf '%s\n' "${rows[@]}" | python3 -c '
import re, statistics, sys
n, builds = int(sys.argv[1]), sys.argv[2:]
def mib(size):
    k, u = re.fullmatch(r"(\d+)(KiB|MiB|GiB)", size).groups()
    return int(k) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[u]
print("| round | build | page size | cache max per instance | peak MiB | besides the caches, MiB | bound MiB | peak ÷ bound |")
print("| ---: | --- | --- | --- | ---: | ---: | ---: | ---: |")
besides = {}
for line in sys.stdin:
    round_, label, page, cache, rss_kb = line.split()
    peak, caches = int(rss_kb) / 1024, mib(cache) * n
    bound = caches * 1.1 + 64
    print("| %s | %s | %s | %s | %.1f | %.1f | %.1f | %.2f |" % (round_, label, page, cache, peak, peak - caches, bound, peak / bound))
    besides.setdefault((page, cache), {}).setdefault(label, []).append(peak - caches)
if len(builds) > 1:
    base, now = builds
    print()
    print("## %s against %s" % (now, base))
    print()
    print("Memory besides the caches, median over the rounds, and the ratio %s ÷ %s." % (now, base))
    print()
    print("| page size | cache max per instance | %s MiB | %s MiB | ratio |" % (base, now))
    print("| --- | --- | ---: | ---: | ---: |")
    for (page, cache), v in besides.items():
        b, w = statistics.median(v[base]), statistics.median(v[now])
        print("| %s | %s | %.1f | %.1f | %.2f |" % (page, cache, b, w, w / b))
' "$databases" "${builds[@]%%=*}"
} >"$out"
echo "wrote $out" >&2
