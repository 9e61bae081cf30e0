# Shared helpers of the benchmark scripts: machine notes and fio installation.
# Source it: . "$(dirname "$0")/lib.sh"

ensure_fio() {
  if ! command -v fio >/dev/null 2>&1; then
    echo "installing fio (the reference tool) ..." >&2
    (apt-get update -qq && apt-get install -y -qq fio) >/dev/null
  fi
}

# Machine notes in Markdown, for the directory the data sits in ($1).
machine_notes() {
  local dir=$1
  echo "## Machine"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- nproc: $(nproc)"
  echo "- memory: $(free -h | awk '/Mem:/ {print $2}') total"
  echo "- kernel: $(uname -r)"
  echo "- file system of $dir: $(df -T "$dir" | awk 'NR==2 {print $2 " on " $1}')"
  echo "- fio: $(fio --version 2>/dev/null || echo missing)"
  echo "- jetproof: $(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "Shared machine: absolute figures drift from run to run; compare the ratios."
  echo
}

# fio bandwidth in MB/s (10^6) of one job; args: fio options...
fio_mb_per_sec() {
  fio --output-format=json "$@" 2>/dev/null | python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
print("%.1f" % ((job["read"]["bw_bytes"] + job["write"]["bw_bytes"]) / 1e6))'
}

# Reverses the bash array named $1 in place on even rounds ($2): rounds alternate which of the
# builds or engines goes first, so a drift within a round favours none of them every time.
alternate_order() {
  local -n items=$1
  local i j t
  (($2 % 2 == 0)) || return 0
  for ((i = 0, j = ${#items[@]} - 1; i < j; i++, j--)); do
    t=${items[i]}
    items[i]=${items[j]}
    items[j]=$t
  done
}

# The results file for today's run of NAME: bench/results/<date>-NAME.md, or, when a run of the
# same day already wrote that file, <date>-NAME-2.md, -3 ... (a rerun never replaces figures an
# earlier run wrote; a note or the journal may cite them). Args: the results directory, NAME.
fresh_results() {
  local dir=$1 name=$2 base n=2
  base="$dir/$(date -u +%Y-%m-%d)-$name"
  if [[ ! -e $base.md ]]; then echo "$base.md"; return; fi
  while [[ -e $base-$n.md ]]; do n=$((n + 1)); done
  echo "$base-$n.md"
}
