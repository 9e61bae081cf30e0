#!/usr/bin/env bash
# CPU cost of the storage engine per page operation, with the in-memory backend (no device):
# random gets on a database 8x larger than the cache (each miss reads a page, verifies its ECC
# checksum and evicts another), replaces, inserts, and cache-hit gets. Fixed seed (42).
#
# Usage: bench/engine-cpu.sh            (DB_MIB=256 CACHE_MIB=32 OPS=100000 PAGE_SIZE=32768)
# Target (issue 2): one core drives >= 50,000 page reads/s through the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p jetproof-engine --example engine_cpu
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(hostname): nproc $(nproc), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "# DB_MIB=${DB_MIB:-256} CACHE_MIB=${CACHE_MIB:-32} OPS=${OPS:-100000} PAGE_SIZE=${PAGE_SIZE:-32768}"
# One core for the sessions' work: pin to CPU 0 when taskset is available (the flush thread
# shares it, so the figure includes flushing).
if command -v taskset >/dev/null; then
    exec taskset -c 0 "$CARGO_TARGET_DIR/release/examples/engine_cpu"
else
    exec "$CARGO_TARGET_DIR/release/examples/engine_cpu"
fi
