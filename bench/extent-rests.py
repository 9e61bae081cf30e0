#!/usr/bin/env python3
"""How a jetproof database's owned extents lie (issue 23, docs/faithfulness.md, "Growth per
Jetstress batch"): reads the space maps of a closed database file and prints how many 16-page
owned extents are full, wholly free and partly used, and for the partly used ones how many free
pages follow their last page in use (the rest, its owner's room for later splits: a mailbox
whose last extent has no rest takes a new extent at its first split).

Usage: bench/extent-rests.py DATABASE_FILE [PAGE_SIZE]   (PAGE_SIZE: 32768 by default)

The layout read here is the engine's (crates/engine/src/space.rs): one map page per group of
(page size - 80) * 8 pages, at page 2 for the first group and at the group's first page for the
others; bit p of a map (after its 80-byte header) set when page p of the group is in use."""
import collections
import os
import sys

HEADER_SIZE = 80
HEADER_PAGES = 2
OWNED_EXTENT_PAGES = 16


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    path = sys.argv[1]
    page_size = int(sys.argv[2]) if len(sys.argv) == 3 else 32768
    per_map = (page_size - HEADER_SIZE) * 8
    pages = os.path.getsize(path) // page_size
    maps = []
    with open(path, "rb") as f:
        for group in range((pages + per_map - 1) // per_map):
            f.seek((HEADER_PAGES if group == 0 else group * per_map) * page_size)
            maps.append(f.read(page_size)[HEADER_SIZE:])

    def used(page):
        bits = maps[page // per_map]
        bit = page % per_map
        return (bits[bit // 8] >> (bit % 8)) & 1 == 1

    rests = collections.Counter()
    full = free = 0
    for extent in range(0, pages - pages % OWNED_EXTENT_PAGES, OWNED_EXTENT_PAGES):
        state = [used(p) for p in range(extent, extent + OWNED_EXTENT_PAGES)]
        if all(state):
            full += 1
        elif not any(state):
            free += 1
        else:
            last = max(i for i, u in enumerate(state) if u)
            rests[OWNED_EXTENT_PAGES - 1 - last] += 1
    print(f"{path}: {pages} pages; owned extents: {full} full, {free} wholly free, "
          f"{sum(rests.values())} partly used")
    print("| free pages after the last page in use | partly used extents |")
    print("| ---: | ---: |")
    for rest in range(1, OWNED_EXTENT_PAGES):
        print(f"| {rest} | {rests[rest]} |")


if __name__ == "__main__":
    main()
