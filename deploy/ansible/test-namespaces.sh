#!/usr/bin/env bash
# A real multi-host run of deploy/ansible/jetproof.yml on one machine (issue 16): three hosts
# as Linux network namespaces made here, each reached over SSH by the real playbook through
# `ProxyCommand ip netns exec NS sshd -i` (sshd in inetd mode inside the namespace, as
# OpenSSH's own regression tests reach their sshd), with keys made here and each host's own
# data and results paths. It runs a short performance test through jetproof.yml on all three
# with one start time, aggregates on the "controller" (this shell), and checks:
#   - every host's measured part started within 100 ms of the start time;
#   - the aggregate's achieved IOPS equal the sum of the hosts';
#   - every class's merged count equals the sum of the hosts' counts;
#   - every class's aggregate p99 equals the p99 of one histogram of all hosts' I/Os, built
#     here (Python) by adding every instance's buckets.
# Then the whole ESRP set from a solution file at rehearsal scale through solution.yml and
# `jetproof esrp` (esrp --verify in the playbook, check-esrp.py here; below).
#
# Needs root (ip netns), ansible-core and openssh-server (Debian packages; .ci/run installs
# them). JETPROOF: the binary to deploy (default: target/release/jetproof, else target/debug).
# JETPROOF_NS_START_DELAY: seconds from picking a start time to it (default 15; a machine
# loaded by other work needs more: the hosts must all be started by then).
# JETPROOF_NS_SOLUTION_ONLY=1 skips the single tests (jetproof.yml) and runs only the whole set.
# JETPROOF_NS_KEEP=DIR copies the whole set's solution, results and document there before the
# namespaces and files are removed (to read them after a failure).
# Usage: deploy/ansible/test-namespaces.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
for tool in ip ansible-playbook ssh ssh-keygen python3; do
  command -v "$tool" >/dev/null || { echo "test-namespaces: $tool is missing" >&2; exit 2; }
done
sshd=$(command -v sshd || echo /usr/sbin/sshd)
[[ -x $sshd ]] || { echo "test-namespaces: sshd is missing (apt-get install openssh-server)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "test-namespaces: needs root for ip netns" >&2; exit 2; }
target=${CARGO_TARGET_DIR:-$repo/target}
delay=${JETPROOF_NS_START_DELAY:-15}
jetproof=${JETPROOF:-}
if [[ -z $jetproof ]]; then
  if [[ -x $target/release/jetproof ]]; then jetproof=$target/release/jetproof; else jetproof=$target/debug/jetproof; fi
fi
[[ -x $jetproof ]] || { echo "test-namespaces: no jetproof binary ($jetproof); cargo build first" >&2; exit 2; }
# The playbook resolves a relative path against its own directory, not ours.
jetproof=$(realpath "$jetproof")

work=$(mktemp -d /tmp/jetproof-netns.XXXXXX)
tag="jpt$$"
hosts=(h1 h2 h3)
cleanup() {
  if [[ -n ${JETPROOF_NS_KEEP:-} ]]; then
    mkdir -p "$JETPROOF_NS_KEEP"
    cp -r "$work"/solution* "$work"/plan.json "$JETPROOF_NS_KEEP"/ 2>/dev/null || true
  fi
  for h in "${hosts[@]}"; do ip netns del "$tag-$h" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# sshd refuses to start without its privilege separation directory.
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/user_key"
cp "$work/user_key.pub" "$work/authorized_keys"
cat > "$work/sshd_config" <<CFG
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
CFG
: > "$work/known_hosts"
{
  echo "[jetproof]"
  for h in "${hosts[@]}"; do
    ns="$tag-$h"
    ip netns add "$ns"
    ip netns exec "$ns" ip link set lo up
    echo "$h $(cut -d' ' -f1,2 "$work/host_key.pub")" >> "$work/known_hosts"
    # Each part (the single tests, the whole set) on its own databases: {{jetproof_part}} (no spaces: INI splits on them).
    echo "$h ansible_host=$h jetproof_data_dir=$work/$h/{{jetproof_part}}/data jetproof_results_dir=$work/$h/{{jetproof_part}}/results jetproof_path=$work/$h/bin/jetproof" \
      "ansible_ssh_common_args='-o ProxyCommand=\"ip netns exec $ns $sshd -i -f $work/sshd_config\" -o UserKnownHostsFile=$work/known_hosts -o StrictHostKeyChecking=yes'"
  done
  echo
  echo "[jetproof:vars]"
  echo "ansible_user=root"
  echo "ansible_ssh_private_key_file=$work/user_key"
  echo "ansible_python_interpreter=$(command -v python3)"
  echo "jetproof_part=single"
} > "$work/inventory.ini"

export ANSIBLE_CONFIG=$here/ansible.cfg
# One connection per task (no ControlPersist master left behind in a namespace).
export ANSIBLE_SSH_ARGS="-o ControlMaster=no"
export ANSIBLE_LOCAL_TEMP=$work/ansible-local ANSIBLE_REMOTE_TEMP=$work/ansible-remote
export ANSIBLE_ASYNC_DIR=$work/ansible-async

play() { # test, extra -e ...
  local test=$1; shift
  ansible-playbook -i "$work/inventory.ini" "$here/jetproof.yml" \
    -e jetproof_binary="$jetproof" \
    -e jetproof_test="$test" -e jetproof_fetch_dir="$work/fetched/$test" \
    -e jetproof_databases=2 -e jetproof_db_size=8MiB -e jetproof_direct_io=false \
    -e jetproof_cache_min=512KiB -e jetproof_cache_max=1MiB -e jetproof_duration=3s \
    -e jetproof_sample_interval=500ms -e jetproof_start_delay="$delay" -e jetproof_poll_delay=1 \
    -e '{"jetproof_job_extra": "[thresholds]\ndb_read_avg_ms = 1000\ndb_read_max_ms = 10000\nlog_write_avg_ms = 1000\nlog_write_max_ms = 10000\npage_fault_stalls_per_sec = 1000\n"}' \
    -e jetproof_controller_binary="$jetproof" "$@"
}
single=(performance)
[[ ${JETPROOF_NS_SOLUTION_ONLY:-} == 1 ]] && single=()
for test in "${single[@]}"; do
  echo "== $test on ${hosts[*]} (namespaces $tag-*) =="
  play "$test"
  python3 - "$work/fetched/$test" "${hosts[@]}" <<'PY'
import json, math, os, sys
from datetime import datetime

fetched, hosts = sys.argv[1], sys.argv[2:]

def when(text):
    return datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()

def top(key):
    return key if key < 256 else key + (1 << (key.bit_length() - 8)) - 1

agg = json.load(open(os.path.join(fetched, "aggregate", "result.json")))
results = {h: json.load(open(os.path.join(fetched, h, "result.json"))) for h in hosts}
failures = []
for h, r in results.items():
    skew = (when(r["measured_start"]) - when(r["requested_start"])) * 1000
    if not (0 <= skew < 100) or abs(skew - r["start_skew_ms"]) > 1:
        failures.append(f"{h}: started {skew:.1f} ms after the start time")
    if r["host"]["name"] != h:
        failures.append(f"{h}: host name {r['host']['name']}")
starts = {r["requested_start"] for r in results.values()}
if len(starts) != 1:
    failures.append(f"not one start time: {starts}")
if agg["aggregate"] is not True or [x["name"] for x in agg["hosts"]] != sorted(hosts):
    failures.append("aggregate hosts")
if agg["test"] != results[hosts[0]]["test"]:
    failures.append("aggregate test")
iops = [r["achieved_iops"] for r in results.values() if r.get("achieved_iops") is not None]
if iops and abs(agg["achieved_iops"] - sum(iops)) > 1e-9 * sum(iops):
    failures.append(f"achieved IOPS {agg['achieved_iops']} != {sum(iops)}")
for cls, total in agg["totals"].items():
    count, buckets, lo, hi = 0, {}, None, 0
    for r in results.values():
        for inst in r["instances"]:
            c = inst.get(cls)
            if not isinstance(c, dict):
                continue
            count += c["count"]
            h = c["histogram"]["latency"]
            for k, n in h["buckets"]:
                buckets[k] = buckets.get(k, 0) + n
            lo = h["min_ns"] if lo is None else min(lo, h["min_ns"])
            hi = max(hi, h["max_ns"])
    if total["count"] != count:
        failures.append(f"{cls}: merged count {total['count']} != {count}")
    n = sum(buckets.values())
    rank = min(max(math.ceil(0.99 * n), 1), n)
    seen, p99 = 0, hi
    for k in sorted(buckets):
        seen += buckets[k]
        if seen >= rank:
            p99 = min(max(top(k), lo), max(hi, lo))
            break
    if total["p99_ms"] != p99 / 1e6:
        failures.append(f"{cls}: aggregate p99 {total['p99_ms']} != {p99 / 1e6}")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"ok: {len(hosts)} hosts started within 100 ms of {starts.pop()}; IOPS, counts and p99 of "
      f"{len(agg['totals'])} classes agree with the hosts' ({agg['test']})")
PY
done

# The whole set from a solution file (issue 32, item 11): `plan --write-solution` for the three
# hosts (2 databases each, 2 copies, 10 MiB databases), edited as a solution's reader would for
# this machine (buffered I/O on /tmp, caches far below the databases, small log files, lenient
# latency thresholds: three hosts share two loaded cores) and given a seconds-long rehearsal
# scale; then solution.yml at that scale: every test on all three hosts with one start time per
# test, results fetched to RESULTS/HOST/TEST/, esrp and esrp --verify on the controller; then
# check-esrp.py checks esrp.md against the hosts' result.json files apart from jetproof.
echo "== the whole set from a solution file on ${hosts[*]}, at rehearsal scale =="
sizing=(--mailboxes 96 --iops-per-mailbox 0.5 --headroom 0 --servers 3 --databases-per-server 2
  --copies 2 --mailbox-size 640KiB)
"$jetproof" plan "${sizing[@]}" --write-solution "$work/solution.toml" --hosts h1,h2,h3 >/dev/null
"$jetproof" plan "${sizing[@]}" --json > "$work/plan.json"
python3 - "$work/solution.toml" <<'PY'
import re, sys
path = sys.argv[1]
lines = open(path).read().splitlines()
def put(table, key, value):
    """Sets `key = value` in [table] (the section as `plan --write-solution` writes it)."""
    start = lines.index(f"[{table}]")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    for i in range(start + 1, end):
        if re.match(rf"{re.escape(key)} *=", lines[i]):
            lines[i] = f"{key} = {value}"
            return
    lines.insert(end if lines[end - 1].strip() else end - 1, f"{key} = {value}")
put("job.storage", "direct_io", "false")
put("job.cache", "min_size", '"512KiB"')
put("job.cache", "max_size", '"1MiB"')
put("job.workload", "threads", "1")
put("job.log", "file_size", '"64KiB"')
put("job.log", "buffer_size", '"64KiB"')
for key, value in [("db_read_avg_ms", 1000), ("db_read_max_ms", 10000), ("log_write_avg_ms", 1000),
                   ("log_write_max_ms", 10000), ("page_fault_stalls_per_sec", 1000)]:
    put("job.thresholds", key, f"{value}.0")
put("rehearsal", "performance", '"3s"')
put("rehearsal", "stress", '"3s"')
put("rehearsal", "soft_recovery_log_files", "4")
put("rehearsal", "sample_interval", '"500ms"')
open(path, "w").write("\n".join(lines) + "\n")
PY
ansible-playbook -i "$work/inventory.ini" "$here/solution.yml" \
  -e jetproof_binary="$jetproof" -e jetproof_controller_binary="$jetproof" \
  -e jetproof_solution="$work/solution.toml" -e jetproof_rehearsal=true \
  -e jetproof_results="$work/solution-results" -e jetproof_esrp_out="$work/solution-esrp" \
  -e jetproof_start_delay="$delay" -e jetproof_poll_delay=1 -e jetproof_part=solution
python3 "$here/check-esrp.py" "$work/solution-results" "$work/solution-esrp/esrp.md" \
  "$work/plan.json" performance,stress,backup,soft-recovery "${hosts[@]}"
echo "test-namespaces: pass"
