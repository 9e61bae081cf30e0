#!/usr/bin/env bash
# jetproof against fio where the storage is faster than the CPU (issue 38): RAM-backed storage,
# ext4 on a loop device over a file in tmpfs, direct I/O (jetproof refuses tmpfs itself, which
# keeps direct-I/O data in memory: docs/io.md). Both tools run on the same file system in the same
# run, so their ratio says how much of the machine's CPU jetproof needs for what fio does.
#
# It makes the file system, then runs bench/ceiling.sh on it (unpaced performance tests at each
# session count and engine; after each session count fio's psync random 32 KiB mix with as many
# jobs, at the read share jetproof measured, and with LOG_STREAM=1 that mix with jetproof's log
# stream beside it), and removes the file system again. Per point: transactional IOPS and CPU µs
# per transactional I/O of jetproof, fio's IOPS and CPU µs per I/O, and both ratios, from the
# same run. Targets (issue 38): IOPS ≥ 0.8 × fio's at the same cores, CPU per I/O ≤ 2 × fio's.
# With ENGINE_FLOOR=1 (the default here) each point also runs the same job in memory (no device:
# bench/ceiling.sh's ENGINE_FLOOR): jetproof's CPU per transactional I/O when the storage costs
# only a memory copy, beside fio's, to tell the engine's own cost from its I/O path's.
#
# Needs root (losetup, mkfs.ext4, mount) and the memory the file system's files take (the image is
# sparse: the databases, their growth, logs and fio's files, ~6 GiB with the defaults and ~11 GiB
# with BASE_JETPROOF by the end of a run).
#
# Usage: sudo bench/fast-storage.sh
# Environment: IMAGE_SIZE (bytes; default: room for the files above and 2 GiB), SESSIONS ("4 16 64": total sessions, 2, 8 and 32 per database),
# DB_SIZE (1GiB), DATABASES (2), DURATION (30s), CACHE_MAX (32MiB: the built-in job's cache),
# ENGINES ("std io_uring"), ROUNDS (1), LOG_STREAM (1), ENGINE_FLOOR (1), MEM_BENCH, JETPROOF, BASE_JETPROOF, LABEL and
# OUT (default bench/results/<date>-fast-storage.md): as bench/ceiling.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ $(id -u) != 0 ]]; then
  echo "bench/fast-storage.sh needs root: it makes a loop device and mounts it" >&2
  exit 2
fi
for tool in losetup mkfs.ext4 mount umount; do
  command -v "$tool" >/dev/null || { echo "bench/fast-storage.sh needs $tool" >&2; exit 2; }
done
image=$(mktemp /dev/shm/jetproof-fast-storage.XXXXXX)
mnt=$(mktemp -d /tmp/jetproof-fast-storage.XXXXXX)
loop=
cleanup() {
  cd /
  if mountpoint -q "$mnt"; then umount "$mnt"; fi
  if [[ -n $loop ]]; then losetup -d "$loop"; fi
  rm -f "$image"
  rmdir "$mnt"
}
trap cleanup EXIT
# Room for the databases (twice with BASE_JETPROOF, whose runs get databases of their own) and
# fio's files of the same size, three times as much again for the databases' growth over the
# runs (they are made once and reused, and an unpaced run on RAM grows each by ~0.25 GiB in 30 s),
# and 2 GiB for logs and results. The image is sparse: memory holds only what was written.
size=${IMAGE_SIZE:-$(python3 -c "
import sys
t = sys.argv[1]
u = {'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}
db = int(float(t[:-3]) * u[t[-3:]]) * int(sys.argv[2])
print(db * (3 if sys.argv[3] else 2) * 4 + (2 << 30))" "${DB_SIZE:-1GiB}" "${DATABASES:-2}" "${BASE_JETPROOF:-}")}
truncate -s "$size" "$image"
loop=$(losetup --find --show --direct-io=on "$image")
mkfs.ext4 -q "$loop"
mount "$loop" "$mnt"
echo "RAM-backed ext4: $loop (direct I/O) over $image, mounted at $mnt" >&2

export SESSIONS=${SESSIONS:-4 16 64}
export DB_SIZE=${DB_SIZE:-1GiB}
export CACHE_MAX=${CACHE_MAX:-32MiB}
export DURATION=${DURATION:-30s}
export ENGINE_FLOOR=${ENGINE_FLOOR:-1}
export OUT=${OUT:-$here/results/$(date -u +%Y-%m-%d)-fast-storage.md}
export TITLE="fast storage: jetproof and fio on RAM-backed ext4 ($loop over tmpfs, direct I/O)"
"$here/ceiling.sh" "$mnt/bench"
