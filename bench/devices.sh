#!/usr/bin/env bash
# Devices (issue 21): a performance test on a loop device against the same job on a file of the
# backing file system, in the same run; and `jetproof probe` on a loop device against fio.
#
# What runs (root; loop devices with direct I/O to their backing files, so the backing file
# system's page cache is not what is measured):
#   1. a loop device over a sparse image in DIR, an ext4 file system on it, mounted; the job's
#      databases and logs on it ("loop");
#   2. the same job with its databases and logs in a directory of DIR itself ("file");
#      both initialised, then ROUNDS performance tests of each, alternating which goes first;
#      from result.json: achieved transactional IOPS, db_read and log_write averages, and the
#      device's own view of the window (totals.devices: r/s, w/s, r_await, w_await, %util);
#   3. a second loop device over a PROBE_SIZE image filled with random bytes: `jetproof probe`
#      (random 32 KiB direct reads, queue depth 8, io_uring or std: auto) and fio with the same
#      shape (ioengine io_uring, else libaio), ROUNDS each, alternating.
#   4. ("raw") a third loop device over a sparse image in DIR (direct I/O to it), the database
#      on the raw device itself (docs/devices.md, "A database on a device"), its log in a
#      directory of DIR; beside it the same one-database job with the database in a file of
#      DIR ("raw-file"): both on the same backing file system, ROUNDS alternating.
#   5. ("log") the log on a raw loop device of its own (docs/devices.md, "A log on a device"),
#      the database in a file of DIR ("log-raw"); the database and its log sharing one raw loop
#      device ("shared"); and the same job with database and log in DIR ("log-file"); ROUNDS,
#      the order rotating each round.
# SECTIONS (default "fs raw probe") picks which of 1-2 ("fs"), 4 ("raw"), 3 ("probe") and 5
# ("log") run.
#
# Usage: bench/devices.sh [DIR]   (default /var/tmp/jetproof-bench-devices; removed after)
# Environment: SECTIONS (fs raw probe), RAW_DEVICE_SIZE (1G), DB_SIZE (default 256MiB), DURATION (30s), ROUNDS (2), PROBE_SIZE (1G),
#   PROBE_SECONDS (10), JETPROOF_BIN (default: build release), OUT (default
#   bench/results/<date>-devices.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
ensure_fio
db_size=${DB_SIZE:-256MiB}
duration=${DURATION:-30s}
rounds=${ROUNDS:-2}
probe_size=${PROBE_SIZE:-1G}
probe_seconds=${PROBE_SECONDS:-10}
dir=${1:-/var/tmp/jetproof-bench-devices}
out=${OUT:-$(fresh_results "$here/results" devices)}
sections=" ${SECTIONS:-fs raw probe} "
has() { [[ "$sections" == *" $1 "* ]]; }
if [ "$(id -u)" != 0 ]; then
  echo "devices.sh: needs root (losetup, mount)" >&2
  exit 2
fi
if [ -e "$dir" ]; then
  echo "devices.sh: $dir exists; give a new directory (it is removed after)" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin=${JETPROOF_BIN:-}
if [ -z "$bin" ]; then
  (cd "$here/.." && cargo build --release -p jetproof >&2)
  bin=$here/../target/release/jetproof
fi

loop_db= loop_probe= loop_raw= loop_log= loop_shared=
cleanup() {
  mountpoint -q "$dir/mnt" 2>/dev/null && umount "$dir/mnt"
  [ -n "$loop_log" ] && losetup -d "$loop_log" 2>/dev/null
  [ -n "$loop_shared" ] && losetup -d "$loop_shared" 2>/dev/null
  [ -n "$loop_raw" ] && losetup -d "$loop_raw" 2>/dev/null
  [ -n "$loop_db" ] && losetup -d "$loop_db" 2>/dev/null
  [ -n "$loop_probe" ] && losetup -d "$loop_probe" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

loop_for() { # FILE -> loop device with direct I/O to its backing file when the kernel allows
  losetup -f --show --direct-io=on "$1" 2>/dev/null || losetup -f --show "$1"
}

row() { # RESULT.JSON KIND ROUND -> one Markdown row
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
def avg(cls):
    n = sum(i.get(cls, {}).get("count", 0) for i in r["instances"])
    s = sum(i.get(cls, {}).get("count", 0) * i.get(cls, {}).get("avg_latency_ms", 0) for i in r["instances"])
    return s / n if n else 0.0
devs = r.get("totals", {}).get("devices", [])
d = devs[0] if devs else {}
dev = "; ".join(f"{x['device']}: {x['r_s']:.0f} r/s {x['w_s']:.0f} w/s r_await {x['r_await_ms']:.2f} w_await {x['w_await_ms']:.2f} util {x['util_percent']:.0f}%" for x in devs)
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r.get('achieved_iops') or 0:.0f} | {avg('db_read'):.3f} | {avg('log_write'):.3f} | {r['verdict']} | {dev} |")
PY
}

rows=()
if has fs; then
# 1. ext4 on a loop device, room for the databases, their logs and the results.
truncate -s 2G "$dir/disk.img"
loop_db=$(loop_for "$dir/disk.img")
mkfs.ext4 -q -F "$loop_db"
mkdir -p "$dir/mnt"
mount "$loop_db" "$dir/mnt"
job() { # DATA_DIR -> job file
  cat <<EOF
[storage]
data_dir = "$1"
databases = 2
db_size = "$db_size"
direct_io = true
[run]
duration = "$duration"
sample_interval = "1s"
EOF
}
job "$dir/mnt/data" > "$dir/loop.toml"
job "$dir/file-data" > "$dir/file.toml"
for kind in loop file; do
  "$bin" init "$dir/$kind.toml" --out "$dir/init-$kind" >/dev/null
done

for round in $(seq 1 "$rounds"); do
  order="loop file"
  [ $((round % 2)) = 0 ] && order="file loop"
  for kind in $order; do
    res="$dir/run-$kind-$round"
    "$bin" run "$dir/$kind.toml" --test performance --out "$res" --quiet >/dev/null || true
    rows+=("$(row "$res/result.json" "$kind" "$round")")
  done
done
fi

# 4. the database on a raw loop device against the same job on a file of the same file system.
raw_rows=()
raw_ratio=
if has raw; then
  truncate -s "${RAW_DEVICE_SIZE:-1G}" "$dir/raw.img"
  loop_raw=$(loop_for "$dir/raw.img")
  raw_job() { # DATABASE_PATH LOG_DIR -> job file
    cat <<EOF
[storage]
db_size = "$db_size"
direct_io = true
allow_devices = true
[[storage.instance]]
name = "db1"
database_path = "$1"
log_path = "$2"
[run]
duration = "$duration"
sample_interval = "1s"
EOF
  }
  raw_job "$loop_raw" "$dir/raw-logs" > "$dir/raw.toml"
  mkdir -p "$dir/raw-file-data"
  raw_job "$dir/raw-file-data/db1.jpdb" "$dir/raw-file-logs" > "$dir/raw-file.toml"
  for kind in raw raw-file; do
    "$bin" init "$dir/$kind.toml" --out "$dir/init-$kind" >/dev/null
  done
  for round in $(seq 1 "$rounds"); do
    order="raw raw-file"
    [ $((round % 2)) = 0 ] && order="raw-file raw"
    for kind in $order; do
      res="$dir/run-$kind-$round"
      "$bin" run "$dir/$kind.toml" --test performance --out "$res" --quiet >/dev/null || true
      raw_rows+=("$(row "$res/result.json" "$kind" "$round")")
      cp "$res/result.json" "$dir/$kind-$round.json"
    done
  done
  raw_ratio=$(python3 - "$dir" "$rounds" <<'PY'
import json, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def load(k, r):
    return json.load(open(f"{d}/{k}-{r}.json"))
def avg(res, cls):
    n = sum(i.get(cls, {}).get("count", 0) for i in res["instances"])
    s = sum(i.get(cls, {}).get("count", 0) * i.get(cls, {}).get("avg_latency_ms", 0) for i in res["instances"])
    return s / n if n else 0.0
def ratio(a, b):
    return a / b if b else 0.0
for r in range(1, rounds + 1):
    raw, f = load("raw", r), load("raw-file", r)
    print(f"- round {r}: raw / file: achieved IOPS {ratio(raw.get('achieved_iops') or 0, f.get('achieved_iops') or 0):.2f}, "
          f"db_read avg {ratio(avg(raw, 'db_read'), avg(f, 'db_read')):.2f}, "
          f"log_write avg {ratio(avg(raw, 'log_write'), avg(f, 'log_write')):.2f}")
PY
)
fi

# 5. the log on a raw loop device (its own, or shared with the database) against files.
log_rows=()
log_ratio=
if has log; then
  truncate -s "${RAW_DEVICE_SIZE:-1G}" "$dir/log.img"
  loop_log=$(loop_for "$dir/log.img")
  truncate -s "${RAW_DEVICE_SIZE:-1G}" "$dir/shared.img"
  loop_shared=$(loop_for "$dir/shared.img")
  log_job() { # DATABASE_PATH LOG_PATH DATA_DIR -> job file
    cat <<EOF
[storage]
db_size = "$db_size"
direct_io = true
allow_devices = true
data_dir = "$3"
[[storage.instance]]
name = "db1"
database_path = "$1"
log_path = "$2"
[run]
duration = "$duration"
sample_interval = "1s"
EOF
  }
  mkdir -p "$dir/log-raw-data" "$dir/log-file-data"
  log_job "$dir/log-raw-data/db1.jpdb" "$loop_log" "$dir/log-raw-data" > "$dir/log-raw.toml"
  log_job "$loop_shared" "$loop_shared" "$dir/shared-data" > "$dir/shared.toml"
  log_job "$dir/log-file-data/db1.jpdb" "$dir/log-file-logs" "$dir/log-file-data" > "$dir/log-file.toml"
  for kind in log-raw shared log-file; do
    "$bin" init "$dir/$kind.toml" --out "$dir/init-$kind" >/dev/null
  done
  for round in $(seq 1 "$rounds"); do
    case $((round % 3)) in
      1) order="log-raw shared log-file" ;;
      2) order="shared log-file log-raw" ;;
      0) order="log-file log-raw shared" ;;
    esac
    for kind in $order; do
      res="$dir/run-$kind-$round"
      "$bin" run "$dir/$kind.toml" --test performance --out "$res" --quiet >/dev/null || true
      log_rows+=("$(row "$res/result.json" "$kind" "$round")")
      cp "$res/result.json" "$dir/$kind-$round.json"
    done
  done
  log_ratio=$(python3 - "$dir" "$rounds" <<'PY'
import json, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def load(k, r):
    return json.load(open(f"{d}/{k}-{r}.json"))
def avg(res, cls):
    n = sum(i.get(cls, {}).get("count", 0) for i in res["instances"])
    s = sum(i.get(cls, {}).get("count", 0) * i.get(cls, {}).get("avg_latency_ms", 0) for i in res["instances"])
    return s / n if n else 0.0
def ratio(a, b):
    return a / b if b else 0.0
for r in range(1, rounds + 1):
    f = load("log-file", r)
    for k in ("log-raw", "shared"):
        x = load(k, r)
        print(f"- round {r}: {k} / log-file: achieved IOPS {ratio(x.get('achieved_iops') or 0, f.get('achieved_iops') or 0):.2f}, "
              f"db_read avg {ratio(avg(x, 'db_read'), avg(f, 'db_read')):.2f}, "
              f"log_write avg {ratio(avg(x, 'log_write'), avg(f, 'log_write')):.2f}")
PY
)
fi

probe_rows=()
if has probe; then
# 3. probe against fio on a loop device full of random bytes.
head -c "$probe_size" /dev/urandom > "$dir/probe.img"
loop_probe=$(loop_for "$dir/probe.img")
engine=io_uring
fio --name=check --filename="$loop_probe" --rw=randread --bs=32k --ioengine=io_uring --direct=1 \
  --runtime=1 --time_based --output-format=json >/dev/null 2>&1 || engine=libaio
for round in $(seq 1 "$rounds"); do
  for tool in probe fio; do
    if [ "$tool" = probe ]; then
      "$bin" probe --path "$loop_probe" --allow-device --block-size 32KiB --queue-depth 8 \
        --duration "${probe_seconds}s" --json > "$dir/probe.json"
      probe_rows+=("$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
print("| jetproof probe (%s) | %s | %.0f | %.1f | %.3f | %.3f |" % (p["backend"], sys.argv[2], p["iops"], p["mb_per_sec"], p["avg_latency_ms"], p["p99_latency_ms"]))' "$dir/probe.json" "$round")")
    else
      fio --name=randread --filename="$loop_probe" --rw=randread --bs=32k --iodepth=8 \
        --ioengine=$engine --direct=1 --runtime="$probe_seconds" --time_based \
        --output-format=json > "$dir/fio.json" 2>/dev/null
      probe_rows+=("$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
p99 = j["clat_ns"]["percentile"].get("99.000000", 0) / 1e6
print("| fio (%s) | %s | %.0f | %.1f | %.3f | %.3f |" % (sys.argv[3], sys.argv[2], j["iops"], j["bw_bytes"] / 1e6, j["lat_ns"]["mean"] / 1e6, p99))' "$dir/fio.json" "$round" "$engine")")
    fi
  done
done
fi

{
  echo "# Devices: sections${sections%% } of bench/devices.sh ($(date -u +%Y-%m-%d))"
  echo
  machine_notes "$dir"
  if has raw; then
  echo "## Performance test: the database on the raw loop device against a file on the same file system"
  echo
  echo "Job: 1 database of $db_size, direct I/O, $duration window, its log in a directory of $dir, defaults otherwise."
  echo "\"raw\": the database from byte 0 of \`$loop_raw\` (over the sparse \`$dir/raw.img\`, direct I/O to it: $(cat /sys/block/$(basename "$loop_raw")/loop/dio 2>/dev/null || echo unknown));"
  echo "\"raw-file\": the same job with the database in a file of $dir's file system. Rounds alternate which goes first."
  echo "Command: \`SECTIONS=\"${sections# }\" bench/devices.sh\` (DB_SIZE=$db_size DURATION=$duration ROUNDS=$rounds)."
  echo
  echo "| target | round | achieved IOPS | db_read avg (ms) | log_write avg (ms) | verdict | the device's view of the window (totals.devices) |"
  echo "| --- | ---: | ---: | ---: | ---: | --- | --- |"
  printf '%s\n' "${raw_rows[@]}"
  echo
  echo "$raw_ratio"
  echo
  fi
  if has log; then
  echo "## Performance test: the log on a raw loop device (its own, or shared with the database) against files"
  echo
  echo "Job: 1 database of $db_size, direct I/O, $duration window, defaults otherwise (1 MiB log files)."
  echo "\"log-raw\": the log in the log region of \`$loop_log\` (over the sparse \`$dir/log.img\`, direct I/O to it: $(cat /sys/block/$(basename "$loop_log")/loop/dio 2>/dev/null || echo unknown)), the database in a file of $dir;"
  echo "\"shared\": the database and its log on \`$loop_shared\` (the shared layout: 64 log slots, the database region from 66 MiB);"
  echo "\"log-file\": the database and its log in files of $dir. The order rotates each round."
  echo "Command: \`SECTIONS=\"${sections# }\" bench/devices.sh\` (DB_SIZE=$db_size DURATION=$duration ROUNDS=$rounds)."
  echo
  echo "| target | round | achieved IOPS | db_read avg (ms) | log_write avg (ms) | verdict | the device's view of the window (totals.devices) |"
  echo "| --- | ---: | ---: | ---: | ---: | --- | --- |"
  printf '%s\n' "${log_rows[@]}"
  echo
  echo "$log_ratio"
  echo
  fi
  if has fs; then
  echo "## Performance test: ext4 on a loop device against files on the backing file system"
  echo
  echo "Job: 2 databases of $db_size, direct I/O, $duration window, defaults otherwise."
  echo "\"loop\": \`$loop_db\` (over \`$dir/disk.img\`, direct I/O to it: $(cat /sys/block/$(basename "$loop_db")/loop/dio 2>/dev/null || echo unknown)), ext4, mounted;"
  echo "\"file\": a directory of $dir's file system. Rounds alternate which goes first."
  echo "Command: \`bench/devices.sh\` (DB_SIZE=$db_size DURATION=$duration ROUNDS=$rounds)."
  echo
  echo "| target | round | achieved IOPS | db_read avg (ms) | log_write avg (ms) | verdict | the device's view of the window (totals.devices) |"
  echo "| --- | ---: | ---: | ---: | ---: | --- | --- |"
  printf '%s\n' "${rows[@]}"
  echo
  fi
  if has probe; then
  echo "## probe against fio on a loop device"
  echo
  echo "\`$loop_probe\` over a $probe_size image of random bytes (direct I/O to it: $(cat /sys/block/$(basename "$loop_probe")/loop/dio 2>/dev/null || echo unknown)); random 32 KiB direct reads, queue depth 8, ${probe_seconds} s each, alternating."
  echo "Commands: \`jetproof probe --path $loop_probe --allow-device --block-size 32KiB --queue-depth 8 --duration ${probe_seconds}s --json\`;"
  echo "\`fio --name=randread --filename=$loop_probe --rw=randread --bs=32k --iodepth=8 --ioengine=$engine --direct=1 --runtime=$probe_seconds --time_based\`."
  echo
  echo "| tool | round | IOPS | MB/s | avg latency (ms) | p99 (ms) |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${probe_rows[@]}"
  echo
  fi
} > "$out"
echo "wrote $out"
