#!/usr/bin/env python3
"""Frames with ONE base each (issue 17; docs/BENCHMARKS.md, "Frames with one base").

bench/frames.py let a frame reach every base its members' deltas name (a prefix of many
chunks, ~100 per frame). This probe gives each frame one base: an older frame (or the
dictionary), so that the index keeps one base edge per chunk and every chain reader reads
frames as it reads any delta (docs/FORMAT.md, "Codec 2, method 3"). Over the same data
directory (kept by `node bench/reduction.mjs --runs 1 --keep DIR` with DITTO_FRAMES=0),
each chunk belongs to the version whose manifest names it first; a member's *target* is the
frame its today's base sits in (walking down the base chain past frames too deep for
FRAMES_CAP), or the dictionary. MODE:
- `group`: members grouped by target, each group cut into frames of FRAME_KIB, each frame
  against its group's target;
- `majority`: the version's new chunks cut in first-use order, each frame against the target
  most of its members' raw bytes point to;
- `hybrid` (what the server builds): grouped as `group`, each frame then against the target
  most of its members point to once this version's earlier frames count.
NODICT=1 drops the dictionaries (targets and their bytes). Prints the chunk bytes (frames
at LEVEL, 21 + 20 bytes of header each; dictionaries as stored), the slices' 25 bytes each
apart, the frame count and depth, and the raw bytes reading the newest version decodes.

Usage: MODE=hybrid FRAMES_CAP=3 python3 bench/frames1.py DATA_DIR   (`pip install zstandard`)
"""
import collections
import os
import sqlite3
import sys
import time

import zstandard as zs

from bases import first_use, manifests
from levels import decode_all, prefix_dict

LEVEL = int(os.environ.get("LEVEL", "19"))
CAP = int(os.environ.get("FRAMES_CAP", "3"))
LIMIT = int(os.environ.get("FRAME_KIB", "1024")) << 10
MODE = os.environ.get("MODE", "hybrid")
NODICT = os.environ.get("NODICT") == "1"


def comp(content, prefix):
    wlog = max(20, (len(prefix) + len(content) - 1).bit_length())
    params = zs.ZstdCompressionParameters.from_level(
        LEVEL, source_size=len(content), window_log=min(wlog, 27), write_dict_id=False
    )
    if prefix:
        c = zs.ZstdCompressor(compression_params=params, dict_data=prefix_dict(prefix))
    else:
        c = zs.ZstdCompressor(compression_params=params)
    return len(c.compress(content))


def cut(members, raw):
    out, cur, size = [], [], 0
    for f in members:
        if cur and size + len(raw[f]) > LIMIT:
            out.append(cur)
            cur, size = [], 0
        cur.append(f)
        size += len(raw[f])
    if cur:
        out.append(cur)
    return out


def main(data_dir):
    db = sqlite3.connect(f"file:{data_dir}/ditto.sqlite3?mode=ro", uri=True)
    live = {bytes(fp) for (fp,) in db.execute("SELECT fp FROM chunks")}
    _, _, raw, stored, base = decode_all(data_dir, live)
    where, first = first_use(db)
    order = collections.defaultdict(list)
    for fp in first:
        order[where[fp][2]].append(fp)
    unnamed = live - set(where)
    kept = 0 if NODICT else sum(stored[f] for f in unnamed)
    frame_of, fdepth, fraw, fneeds = {}, [], [], []

    def target(f):
        b = base.get(f)
        while b is not None:
            if b in frame_of:
                if fdepth[frame_of[b]] + 1 <= CAP:
                    return ("frame", frame_of[b])
            elif b in raw and b not in where:
                return None if NODICT else ("chunk", b)
            b = base.get(b)
        return None

    def vote(m, fallback):
        votes = collections.Counter()
        for f in m:
            t = target(f)
            if t:
                votes[t] += len(raw[f])
        return votes.most_common(1)[0][0] if votes else fallback

    def emit(a, m):
        content = b"".join(raw[f] for f in m)
        if a is None:
            prefix, dep, need = b"", 0, set()
        elif a[0] == "frame":
            prefix, dep, need = fraw[a[1]], fdepth[a[1]] + 1, {a[1]}
        else:
            prefix, dep, need = raw[a[1]], 1, set()
        cost = comp(content, prefix) + 21 + (20 if prefix else 0)
        fdepth.append(dep)
        fraw.append(content)
        fneeds.append(need)
        for f in m:
            frame_of[f] = len(fdepth) - 1
        return cost

    t0 = time.time()
    per_v = []
    for vid in sorted(order):
        chunks = order[vid]
        vt = 0
        if MODE == "majority":
            for m in cut(chunks, raw):
                vt += emit(vote(m, None), m)
        else:
            groups = collections.OrderedDict()
            for f in chunks:
                groups.setdefault(target(f), []).append(f)
            for a, members in groups.items():
                for m in cut(members, raw):
                    vt += emit(vote(m, a) if MODE == "hybrid" else a, m)
        per_v.append(vt)
    newest = {bytes.fromhex(f) for e in manifests(db)[max(order)]["entries"] for f in e["recipe"]}
    seen, todo = set(), [frame_of[f] for f in newest if f in frame_of]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(fneeds[n])
    print(
        f"{MODE}, frames of {LIMIT >> 10} KiB, cap {CAP}, level {LEVEL}{', no dictionaries' if NODICT else ''}:"
        f" {sum(per_v) + kept} chunk bytes (+{25 * len(frame_of)} of slices), {len(fdepth)} frames,"
        f" deepest {max(fdepth)}, the newest version decodes {sum(len(fraw[n]) for n in seen)} B,"
        f" {time.time() - t0:.0f} s; per version {per_v}",
        flush=True,
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
