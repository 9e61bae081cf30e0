#!/usr/bin/env bash
# The files of the .deb that the binary makes itself (issue 37): the manual pages
# (`jetproof man`, one per command, gzipped as Debian ships them) and the shell completions
# (`jetproof completions`), written under target/deb-extras/ where crates/cli/Cargo.toml's
# [package.metadata.deb] assets pick them up. Run after `cargo build --release -p jetproof`,
# before `cargo deb -p jetproof --no-build`.
#   bash deploy/deb/extras.sh [BINARY] [TARGET_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${2:-${CARGO_TARGET_DIR:-target}}"
bin="${1:-$target/release/jetproof}"
out="$target/deb-extras"
rm -rf "$out"
mkdir -p "$out/man" "$out/completions"
"$bin" man | gzip -9n > "$out/man/jetproof.1.gz"
# Every command has its page, jetproof-run(1) and so on: the names from `jetproof --help`.
for command in $("$bin" --help | awk '/^Commands:/{on=1; next} on && NF==0{exit} on{print $1}'); do
  [[ "$command" == help ]] && continue
  "$bin" man "$command" | gzip -9n > "$out/man/jetproof-$command.1.gz"
done
"$bin" completions bash > "$out/completions/jetproof"
"$bin" completions zsh > "$out/completions/_jetproof"
"$bin" completions fish > "$out/completions/jetproof.fish"
ls "$out/man" | wc -l | xargs echo "deb extras: manual pages:"
