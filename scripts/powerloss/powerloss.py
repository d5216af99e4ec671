"""Power-loss test of the server's storage engine: every crash state at every fsync boundary.

A kill -9 (server/tests/crash.rs) keeps every write the process made; a power cut keeps only
what reached the disk. This test follows the method of Pillai et al., "All File Systems Are
Not Created Equal" (OSDI 2014, the ALICE tool): record what the real server does to its data
directory, then build the directory states a crash could leave, and check each one.

1. Record. The real `ditto-server serve` runs under strace (file writes, truncations, fsyncs,
   renames, unlinks, mkdirs) while a client drives everything that writes, moves or deletes
   data (docs/STORAGE.md): bundles uploaded; versions of two sources committed, each version
   of the first dropping chunks of the one before, so that after each commit the mover
   copies cold chunks out of active containers into archival ones, switches the index and
   unlinks the old files; dry-run prunes (they wait for the mover); a keep-last forget of
   the oldest versions (ICDA deletes archival containers whole); the delete of a middle
   version (mark and sweep, then compaction of the container it left sparse); a prune. The
   wall-clock times at which each request was sent and answered are noted.
2. Replay. The trace is applied to a model of the directory tree. Per file, the model keeps
   the content as of its last fsync/fdatasync (durable) and the writes since (pending); per
   directory, the entries as of its last fsync (durable) and as they are now. POSIX promises
   no more: a new name, a rename or an unlink survives only an fsync of its directory.
3. Crash states. At every fsync boundary (just before and just after each fsync), three
   states are materialised into a fresh directory:
   - `lost`: durable content and durable names only (every unsynced write lost);
   - `kept`: everything written so far (the kill -9 case);
   - `mixed`: durable names, and a random subset of each file's pending writes (writes reach
     the disk in any order between two fsyncs).
   A state with the same files and the same acknowledgements as one already checked is not
   checked again; `--jobs` states are checked at a time.
4. Check. The server is started on each state (its startup recovery runs, and its mover):
   - every version acknowledged and not removed by an acknowledged forget or delete is
     listed, with the recipes it was committed with, and every chunk of those recipes is
     served byte-identical (`chunks/get`), as is every acknowledged chunk that some such
     version, or no version yet, references;
   - a version whose removal was acknowledged stays removed; a removal in flight at the
     crash happened whole or not at all (a forget's versions all or none);
   - `ditto-server check default` passes.
   Then `POST prune` (recovery followed by a later garbage collection must converge): the same
   rules hold again, every container file in `repos/*/containers/` has an index row
   (`GET containers`, so no orphan survives), and `check` passes again.

The SQLite shared-memory file (`-shm`) is memory-mapped, not written with write calls, and is
rebuilt by SQLite from the WAL; crash states leave it out.

Usage: powerloss.py SERVER_BINARY [--seed N] [--keep DIR] [--save DIR | --replay DIR]
                    [--drop-syncs REGEX] [--drop-unlink-syncs REGEX] [--fail-fast] [--jobs N]
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import pickle
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# ------------------------------------------------------------------ workload

SOURCE_A, SOURCE_B = "powerloss", "powerloss-b"

# The versions, in commit order, as (source, chunks): `b*` chunks are big (5 of them fill a
# 4 MiB container; A1 fills two), `s*` small. Each version of A drops chunks of the one
# before, so the mover has cold chunks to evacuate after every commit but the first; B shares
# chunks with A. b6 and s4 become cold together (at A5), so one archival container takes
# both (s6 makes A5 start a new active container: the one holding b6 is then not the newest
# and can be evacuated); deleting A4 later kills b6 there while s4 stays live (B1), so that
# container is left sparse and compaction rewrites it. The forget (keep the last 2 of A)
# removes A1-A3, all older than B1: ICDA alone, by whole archival containers.
PLAN = [
    (SOURCE_A, "b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 s0 s1"),
    (SOURCE_A, "b2 b3 b4 b5 b6 b7 b8 b9 s1 b10 s2"),
    (SOURCE_A, "b4 b5 b6 b7 b8 b9 s1 b10 s3 b11"),
    (SOURCE_B, "b4 b8 s1 s4"),
    (SOURCE_A, "b6 b7 b8 b9 b10 s3 b11 s4 s5"),
    (SOURCE_B, "b4 b8 b12"),
    (SOURCE_A, "b7 b8 b9 b10 s3 b11 s5 b12 s6"),
]
# After these commits the client waits for the mover (a dry-run prune does, docs/API.md), so
# its moves are switched between commits and the layout does not depend on timing; after A3
# the next commit (B1) comes at once, and the mover's pass in progress is abandoned (its
# copies deleted) and starts over.
SETTLE = (0, 1, 3, 4, 5, 6)
# The version deleted from the middle of A's history (index in PLAN).
MIDDLE = 4


def make_bundle(chunks):
    """A bundle (docs/FORMAT.md) of raw (codec 0) chunks."""
    out = bytearray(b"DTB1" + struct.pack("<HHII", 1, 0, len(chunks), 0))
    for raw in chunks:
        out += hashlib.sha1(raw).digest() + bytes(4) + struct.pack("<II", len(raw), len(raw))
        out += raw
    return bytes(out)


def parse_bundle(body):
    """The (fingerprint hex, codec, payload) entries of a bundle, or None if malformed."""
    if len(body) < 16 or body[:4] != b"DTB1":
        return None
    (count,) = struct.unpack_from("<I", body, 8)
    out, at = [], 16
    for _ in range(count):
        if at + 32 > len(body):
            return None
        fp, codec = body[at : at + 20].hex(), body[at + 20]
        _, stored = struct.unpack_from("<II", body, at + 24)
        out.append((fp, codec, body[at + 32 : at + 32 + stored]))
        at += 32 + stored
    return out if at == len(body) else None


class Client:
    def __init__(self, url, token):
        self.base = f"{url}/api/v1/repos/default"
        self.token = token

    def call(self, method, path, body=None, ctype="application/json"):
        req = urllib.request.Request(f"{self.base}{path}", data=body, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if body is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def json(self, method, path, obj=None):
        body = None if obj is None else json.dumps(obj).encode()
        status, out = self.call(method, path, body)
        try:
            return status, json.loads(out)
        except ValueError:
            return status, {"raw": out[:200].decode("latin-1")}


def make_chunks(rng):
    names = sorted({n for _, v in PLAN for n in v.split()})
    return {
        n: rng.randbytes(rng.randint(600 << 10, 900 << 10) if n[0] == "b" else rng.randint(200, 6000))
        for n in names
    }


def run_workload(client, chunks):
    """Drives the server; returns what was acknowledged and when.

    acks = {"bundles": [(t_ack, [(fp hex, raw)])], "versions": [(t_sent, t_ack, id, source, recipes)],
            "removals": [(t_sent, t_ack, what, [id])]}; `recipes` is {path: [fp hex]}.
    """
    acks = {"bundles": [], "versions": [], "removals": []}
    fp = {n: hashlib.sha1(raw).hexdigest() for n, raw in chunks.items()}
    uploaded, ids = set(), []
    for v, (source, names) in enumerate(PLAN):
        names = names.split()
        new = [n for n in names if n not in uploaded]
        # One bundle per version: A1's spans two containers.
        status, body = client.call(
            "POST", "/bundles", make_bundle([chunks[n] for n in new]), "application/x-ditto-bundle"
        )
        assert status == 200, f"bundle answered {status}: {body[:200]!r}"
        acks["bundles"].append((time.time(), [(fp[n], chunks[n]) for n in new]))
        uploaded.update(new)
        recipes = {f"{n}.bin": [fp[n]] for n in names}
        manifest = {
            "source": source,
            "time": 1700000000000 + v * 3600_000,
            "entries": [
                {"path": p, "kind": "file", "size": len(chunks[p[:-4]]), "mtime": 1700000000000, "recipe": r}
                for p, r in recipes.items()
            ],
        }
        sent = time.time()
        status, body = client.json("POST", "/versions", manifest)
        assert status == 201, f"commit answered {status}: {body}"
        acks["versions"].append((sent, time.time(), body["id"], source, recipes))
        ids.append(body["id"])
        if v in SETTLE:
            status, dry = client.json("POST", "/prune", {"dry_run": True})
            assert status == 200, f"prune dry run answered {status}: {dry}"

    # The dry run waits for the mover; the mover must have evacuated containers by now.
    status, dry = client.json("POST", "/prune", {"dry_run": True})
    assert status == 200, f"prune dry run answered {status}: {dry}"
    status, stats = client.json("GET", "/stats")
    mover = stats["layout"]["mover"]
    assert mover["containers_evacuated"] >= 2 and stats["layout"]["archival_containers"] >= 2, (
        f"the workload did not make the mover work: {stats['layout']}"
    )

    a_ids = [i for i, (s, _) in zip(ids, PLAN) if s == SOURCE_A]
    sent = time.time()
    status, rep = client.json("POST", "/forget", {"policy": {"keep_last": 2}, "source": SOURCE_A})
    assert status == 200, f"forget answered {status}: {rep}"
    removed = sorted(r["id"] for r in rep["remove"])
    acks["removals"].append((sent, time.time(), "forget", a_ids[:-2]))
    assert removed == a_ids[:-2], f"forget removed {removed}, expected {a_ids[:-2]}"
    assert rep["prune"]["containers_icda"] >= 1 and not rep["prune"]["sweep"], (
        f"the forget did not delete by ICDA alone: {rep['prune']}"
    )

    sent = time.time()
    status, rep = client.json("DELETE", f"/versions/{ids[MIDDLE]}")
    assert status == 200, f"delete answered {status}: {rep}"
    acks["removals"].append((sent, time.time(), "delete", [ids[MIDDLE]]))
    # The delete answers no prune report; the mover was idle, so the containers evacuated
    # meanwhile are compaction's.
    status, stats = client.json("GET", "/stats")
    assert stats["layout"]["mover"]["containers_evacuated"] > mover["containers_evacuated"], (
        f"the delete's prune compacted nothing: {stats['layout']}"
    )

    status, rep = client.json("POST", "/prune", {})
    assert status == 200, f"prune answered {status}: {rep}"
    summary = (
        f"mover evacuated {mover['containers_evacuated']} containers into {mover['containers_written']} "
        f"({mover['passes_abandoned']} passes abandoned) before the forget; "
        f"{stats['layout']['archival_containers']} archival and "
        f"{stats['layout']['active_containers']} active containers at the end"
    )
    return acks, summary


# ------------------------------------------------------------------ trace parsing

CALL = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+|\?)(?:<([^>]*)>)?")
UNFINISHED = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(\w+)\((.*) <unfinished \.\.\.>$")
RESUMED = re.compile(r"^(\d+)\s+\d+\.\d+\s+<\.\.\. (\w+) resumed>(.*)\)\s+=\s+(-?\d+|\?)(?:<([^>]*)>)?")
TRACED = "openat,open,creat,write,pwrite64,writev,pwritev,pwritev2,lseek,ftruncate,truncate,fallocate,fsync,fdatasync,sync,syncfs,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir,close,dup,dup2,dup3,fcntl"


def split_args(s):
    """Splits a strace argument list at top-level commas."""
    out, depth, cur, in_str, esc = [], 0, [], False, False
    for ch in s:
        if in_str:
            cur.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if cur:
        out.append("".join(cur).strip())
    return out


def c_string(arg):
    """Decodes a strace string argument printed with -xx (every byte as \\xHH)."""
    m = re.match(r'^"(.*)"(\.\.\.)?$', arg, re.S)
    if not m:
        raise ValueError(f"not a string argument: {arg[:80]}")
    if m.group(2):
        raise ValueError("strace truncated a string: raise -s")
    body = m.group(1)
    out = bytearray()
    i = 0
    while i < len(body):
        if body.startswith("\\x", i):
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif body[i] == "\\":
            out += {"n": b"\n", "t": b"\t", "\\": b"\\", '"': b'"'}[body[i + 1]]
            i += 2
        else:
            out += body[i].encode()
            i += 1
    return bytes(out)


def write_args(args):
    """(fd, data, offset or None) of a write/pwrite64 argument list; container writes are
    megabytes long, so the string is cut out and hex-decoded in one go when it is pure \\xHH."""
    i, j = args.index(', "'), args.rindex('"')
    rest = args[j + 1 :]
    if rest.startswith("..."):
        raise ValueError("strace truncated a string: raise -s")
    body = args[i + 3 : j]
    try:
        data = bytes.fromhex(body.replace("\\x", "")) if len(body) % 4 == 0 else None
    except ValueError:
        data = None
    if data is None or len(data) * 4 != len(body):
        data = c_string(args[i + 2 : j + 1])
    tail = [x.strip() for x in rest.split(",") if x.strip()]
    return fd_of(args[:i]), data, int(tail[1]) if len(tail) > 1 else None


def plain_path(s):
    """Decodes a path strace printed in angle brackets with -xx (no quotes)."""
    return c_string(f'"{s}"').decode()


def fd_of(arg):
    return int(arg.split("<", 1)[0])


def parse_trace(path):
    """Returns [(time, name, args, result, result_path)] in the order the calls started."""
    pending = {}
    calls = []
    with open(path, encoding="latin-1") as f:
        for line in f:
            line = line.rstrip("\n")
            m = UNFINISHED.match(line)
            if m:
                pending[m.group(1)] = (float(m.group(2)), m.group(3), m.group(4), len(calls))
                calls.append(None)
                continue
            m = RESUMED.match(line)
            if m:
                t, name, args, slot = pending.pop(m.group(1))
                assert name == m.group(2), line[:200]
                calls[slot] = (t, name, args + m.group(3), m.group(4), m.group(5))
                continue
            m = CALL.match(line)
            if m:
                calls.append((float(m.group(2)), m.group(3), m.group(4), m.group(5), m.group(6)))
    return [c for c in calls if c is not None]


# ------------------------------------------------------------------ the model


class Inode:
    def __init__(self):
        self.durable = b""
        self.pending = []  # ("w", offset, bytes) | ("t", length)
        self.synced = 0  # writes and truncations in `durable`

    def current(self, keep=None):
        if not self.pending:
            return self.durable
        data = bytearray(self.durable)
        for i, op in enumerate(self.pending):
            if keep is not None and not keep(i):
                continue
            if op[0] == "w":
                _, off, b = op
                if len(data) < off:
                    data += bytes(off - len(data))
                data[off : off + len(b)] = b
            else:
                del data[op[1] :]
                if len(data) < op[1]:
                    data += bytes(op[1] - len(data))
        return bytes(data)

    def sync(self):
        self.durable = self.current()
        self.synced += len(self.pending)
        self.pending = []


class Model:
    """The data directory as the trace changes it; `root` exists before the trace starts."""

    def __init__(self, root, drop_syncs=None, drop_unlink_syncs=None):
        self.root = root
        self.drop_syncs = drop_syncs
        self.drop_unlink_syncs = drop_unlink_syncs
        self.dirs = {root: {"now": {}, "durable": {}}}
        self.inodes = {}
        self.fds = {}  # fd -> ["f", inode id, path, position] | ("d", path)
        self.next_ino = 0

    def inside(self, p):
        return p == self.root or p.startswith(self.root + "/")

    def lookup(self, p):
        d, name = os.path.split(p)
        return self.dirs.get(d, {"now": {}})["now"].get(name)

    def new_file(self, p):
        d, name = os.path.split(p)
        self.next_ino += 1
        self.inodes[self.next_ino] = Inode()
        self.dirs[d]["now"][name] = ("f", self.next_ino)
        return self.next_ino

    def apply(self, name, args, result, result_path):
        if name in ("write", "pwrite64"):
            if result == "?" or int(result) < 0:
                return
            fd, data, offset = write_args(args)
            h = self.fds.get(fd)
            if h is None:
                return
            data = data[: int(result)]
            if name == "pwrite64":
                self.inodes[h[1]].pending.append(("w", offset, data))
            else:
                self.inodes[h[1]].pending.append(("w", h[3], data))
                h[3] += len(data)
            return
        a = split_args(args)
        if name in ("openat", "open", "creat"):
            if result == "?" or int(result) < 0:
                return
            path = plain_path(result_path) if result_path else c_string(a[1] if name == "openat" else a[0]).decode()
            if not self.inside(path):
                return
            flags = a[2] if name == "openat" else (a[1] if name == "open" else "O_CREAT|O_TRUNC")
            if path in self.dirs:
                self.fds[int(result)] = ("d", path)
                return
            entry = self.lookup(path)
            ino = entry[1] if entry else self.new_file(path)
            if "O_TRUNC" in flags and entry:
                self.inodes[ino].pending.append(("t", 0))
            pos = len(self.inodes[ino].current()) if "O_APPEND" in flags else 0
            self.fds[int(result)] = ["f", ino, path, pos]
        elif name in ("dup", "dup2", "dup3") or (name == "fcntl" and "F_DUPFD" in args):
            src = self.fds.get(fd_of(a[0]))
            if src is not None and result != "?" and int(result) >= 0:
                self.fds[int(result)] = src
        elif name == "close":
            self.fds.pop(fd_of(a[0]), None)
        elif name == "lseek":
            h = self.fds.get(fd_of(a[0]))
            if h is not None and int(result) >= 0:
                h[3] = int(result)
        elif name == "ftruncate":
            h = self.fds.get(fd_of(a[0]))
            if h is not None and int(result) == 0:
                self.inodes[h[1]].pending.append(("t", int(a[1])))
        elif name in ("fsync", "fdatasync"):
            h = self.fds.get(fd_of(a[0]))
            if h is None or int(result) != 0:
                return
            if self.drop_syncs and re.search(self.drop_syncs, h[2] if h[0] == "f" else h[1]):
                return
            if h[0] == "d":
                d = self.dirs[h[1]]
                # A directory fsync that only makes removals durable (every name it holds now
                # is durable already, with the same target).
                only_unlinks = all(d["durable"].get(k) == v for k, v in d["now"].items())
                if only_unlinks and self.drop_unlink_syncs and re.search(self.drop_unlink_syncs, h[1]):
                    return
                d["durable"] = dict(d["now"])
            else:
                self.inodes[h[1]].sync()
        elif name in ("rename", "renameat", "renameat2"):
            if int(result) != 0:
                return
            if name == "rename":
                src, dst = c_string(a[0]).decode(), c_string(a[1]).decode()
            else:
                src, dst = c_string(a[1]).decode(), c_string(a[3]).decode()
            if not self.inside(dst):
                return
            (sd, sn), (dd, dn) = os.path.split(src), os.path.split(dst)
            self.dirs[dd]["now"][dn] = self.dirs[sd]["now"].pop(sn)
        elif name in ("unlink", "unlinkat"):
            if int(result) != 0:
                return
            p = c_string(a[0] if name == "unlink" else a[1]).decode()
            if self.inside(p):
                d, n = os.path.split(p)
                self.dirs[d]["now"].pop(n, None)
        elif name in ("mkdir", "mkdirat"):
            if int(result) != 0:
                return
            p = c_string(a[0] if name == "mkdir" else a[1]).decode()
            if self.inside(p):
                d, n = os.path.split(p)
                self.dirs[d]["now"][n] = ("d", p)
                self.dirs[p] = {"now": {}, "durable": {}}
        elif name in ("writev", "pwritev", "pwritev2", "fallocate", "truncate", "rmdir", "sync", "syncfs"):
            if any(self.inside(plain_path(x)) for x in re.findall(r"<([^>]*)>", args)):
                raise RuntimeError(f"{name} on the data directory is not modelled: {args[:200]}")

    def crash_state(self, mode, rng):
        """A crash state of the data directory: (key, entries). Equal keys mean equal files:
        a file's content is fixed by its inode and which of its writes and truncations count
        (the first n, or the durable ones and a subset of those pending)."""
        entries = []

        def walk(src, rel):
            for name, (kind, ref) in sorted(self.dirs[src]["now" if mode == "kept" else "durable"].items()):
                if name.endswith("-shm"):
                    continue
                if kind == "d":
                    entries.append((f"{rel}{name}", "d", None, None))
                    walk(ref, f"{rel}{name}/")
                    continue
                ino = self.inodes[ref]
                if mode == "kept":
                    picks = (True,) * len(ino.pending)
                elif mode == "lost":
                    picks = ()
                else:
                    picks = tuple(rng.random() < 0.5 for _ in ino.pending)
                if all(picks):
                    sel = (ino.synced + len(picks), ())
                elif not any(picks):
                    sel = (ino.synced, ())
                else:
                    sel = (ino.synced, picks)
                entries.append((f"{rel}{name}", "f", ref, sel))

        walk(self.root, "")
        return tuple(entries), entries

    def materialise(self, out, entries):
        """Writes a crash state into `out` (which exists, empty)."""
        for rel, kind, ref, sel in entries:
            target = os.path.join(out, rel)
            if kind == "d":
                os.mkdir(target)
                continue
            ino, (upto, picks) = self.inodes[ref], sel
            if picks:
                data = ino.current(lambda i: picks[i])
            else:
                data = ino.current(lambda i: ino.synced + i < upto)
            with open(target, "wb") as f:
                f.write(data)


# ------------------------------------------------------------------ checking a crash state


def start_server(binary, data_dir):
    """Starts the server on `data_dir`; its stderr (recovery's report) goes to `data_dir`.log."""
    env = dict(os.environ, PORT="0", DATA_DIR=data_dir, WEB_DIR="web/dist")
    with open(data_dir + ".log", "wb") as err:
        proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.PIPE, stderr=err)
    line = proc.stdout.readline().decode()
    m = re.search(r"Open (http://[^/]+)/#token=([0-9a-f]+)", line)
    if not m:
        proc.kill()
        proc.wait()
        with open(data_dir + ".log", encoding="utf-8", errors="replace") as f:
            raise RuntimeError(f"server did not start: {line!r} {f.read()[-2000:]}")
    return proc, m.group(1), m.group(2)


def expectations(acks, t_crash):
    """What must hold after a crash at `t_crash`: (versions that must be live with their
    recipes, removals that must have happened, removals in flight, chunks that must be served)."""
    removed, in_flight, gone = set(), [], set()
    for sent, t, what, vids in acks["removals"]:
        if t < t_crash:
            removed.update(vids)
        elif sent < t_crash:
            in_flight.append((what, vids))
        if sent < t_crash:
            gone.update(vids)
    live = {vid: recipes for _, t, vid, _, recipes in acks["versions"] if t < t_crash and vid not in gone}
    # A chunk may go only once every version that references it is removed (or its removal
    # is in flight); one no version references yet is pending, kept for the grace period.
    refs = {}
    for sent, _, vid, _, recipes in acks["versions"]:
        if sent < t_crash:
            for r in recipes.values():
                for fp in r:
                    refs.setdefault(fp, set()).add(vid)
    chunks = {}
    for t, sent_chunks in acks["bundles"]:
        if t < t_crash:
            for fp, raw in sent_chunks:
                if not refs.get(fp) or not refs[fp] <= gone:
                    chunks[fp] = raw
    for recipes in live.values():
        for r in recipes.values():
            for fp in r:
                assert fp in chunks, "a live version references a chunk that was never acknowledged"
    return live, removed, in_flight, chunks


def check_served(c, live, removed, in_flight, chunks, seen_listed):
    """The versions and chunks the server answers against the expectations; returns the
    failures and the removed-or-not outcome of each removal in flight."""
    failures = []
    status, body = c.json("GET", "/versions")
    if status != 200:
        return [f"versions list answered {status}"], seen_listed
    listed = {v["id"] for v in body["versions"]}
    for vid, recipes in live.items():
        status, body = c.json("GET", f"/versions/{vid}")
        if vid not in listed or status != 200:
            failures.append(f"acknowledged version {vid} lost (get answered {status})")
            continue
        got = {e["path"]: e.get("recipe", []) for e in body["manifest"]["entries"]}
        if got != recipes:
            failures.append(f"version {vid} answers other recipes than it was committed with")
        if body.get("damaged"):
            failures.append(f"version {vid} is damaged ({body.get('damaged_chunks')} chunks)")
    for vid in sorted(removed & listed):
        failures.append(f"removed version {vid} came back")
    outcome = []
    for what, vids in in_flight:
        there = sorted(set(vids) & listed)
        if there and there != sorted(vids):
            failures.append(f"{what} in flight removed only part of {vids}: {there} still listed")
        outcome.append(tuple(there))
    if seen_listed is not None and outcome != seen_listed:
        failures.append(f"the removals in flight changed outcome after the prune: {seen_listed} -> {outcome}")
    fps = sorted(chunks)
    status, body = c.call("POST", "/chunks/get", json.dumps({"fingerprints": fps, "decode": True}).encode())
    if status != 200:
        try:
            err = json.loads(body)
            lost = err.get("missing", []) + err.get("damaged", [])
        except ValueError:
            lost = []
        failures.append(
            f"chunks/get of {len(fps)} acknowledged chunks answered {status}: "
            + ", ".join(fp[:12] for fp in lost[:6])
            + (f" (+{len(lost) - 6})" if len(lost) > 6 else "")
        )
    else:
        entries = parse_bundle(body)
        if entries is None or [e[0] for e in entries] != fps:
            failures.append("chunks/get answered a malformed bundle or other chunks")
        else:
            for fp, codec, payload in entries:
                if codec != 0 or payload != chunks[fp]:
                    failures.append(f"chunk {fp[:12]} served with other bytes")
    return failures, outcome


def run_check(binary, data_dir, when):
    env = dict(os.environ, DATA_DIR=data_dir)
    chk = subprocess.run([binary, "check", "default"], env=env, capture_output=True, text=True)
    if chk.returncode != 0:
        return ["check " + when + " failed: " + (chk.stdout + chk.stderr).strip().replace("\n", " | ")[:600]]
    return []


def container_files(data_dir):
    """The ids of the container files in the data directory."""
    ids, repos = set(), os.path.join(data_dir, "repos")
    for repo in os.listdir(repos) if os.path.isdir(repos) else []:
        d = os.path.join(repos, repo, "containers")
        if os.path.isdir(d):
            ids.update(int(n[:-4]) for n in os.listdir(d) if n.endswith(".dct"))
    return ids


def container_rows(c):
    """The ids of the containers the index of the repository holds."""
    status, body = c.json("GET", "/containers?chunks=false")
    if status != 200:
        raise RuntimeError(f"containers list answered {status}: {body}")
    return {ct["id"] for ct in body["containers"]}


def check_state(binary, data_dir, acks, t_crash):
    """Everything acknowledged before `t_crash` is present, before and after a prune; returns
    a list of failures."""
    live, removed, in_flight, chunks = expectations(acks, t_crash)
    try:
        proc, url, token = start_server(binary, data_dir)
    except RuntimeError as e:
        return [str(e)]
    try:
        c = Client(url, token)
        failures, outcome = check_served(c, live, removed, in_flight, chunks, None)
        # The server runs: `check` reads what its startup recovery (and its mover) left.
        failures += run_check(binary, data_dir, "after recovery")
        status, rep = c.json("POST", "/prune", {})
        if status != 200:
            failures.append(f"prune after recovery answered {status}: {rep}")
        else:
            more, _ = check_served(c, live, removed, in_flight, chunks, outcome)
            failures += [f"after prune: {f}" for f in more]
            # A mover pass still running (the one the server kicks at startup) may hold new
            # files whose rows it has not switched in yet: an orphan is one that stays.
            for _ in range(4):
                orphans = container_files(data_dir) - container_rows(c)
                if not orphans:
                    break
                time.sleep(0.5)
            else:
                failures.append(f"container files without a row after prune: {sorted(orphans)}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    failures += run_check(binary, data_dir, "after prune")
    return failures


# ------------------------------------------------------------------ main


def record(binary, work, seed):
    """Runs the workload against the server under strace; returns (trace, root, acks, summary)."""
    root = os.path.join(work, "data")
    os.mkdir(root)
    trace = os.path.join(work, "trace.log")
    env = dict(os.environ, PORT="0", DATA_DIR=root, WEB_DIR="web/dist")
    proc = subprocess.Popen(
        ["strace", "-f", "-ttt", "-xx", "-s", "16777216", "-y", "-e", f"trace={TRACED}", "-o", trace,
         binary, "serve"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    line = proc.stdout.readline().decode()
    m = re.search(r"Open (http://[^/]+)/#token=([0-9a-f]+)", line)
    assert m, f"server under strace did not start: {line!r}"
    try:
        acks, summary = run_workload(Client(m.group(1), m.group(2)), make_chunks(random.Random(seed)))
    finally:
        # Killing strace would leave the server running, detached: kill the server (the first
        # process in the trace) and strace ends with it.
        with open(trace, encoding="latin-1") as f:
            server_pid = int(f.readline().split()[0])
        os.kill(server_pid, signal.SIGKILL)
        proc.wait()
    return trace, root, acks, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="keep the trace and the failing states (as the crash left them) here")
    ap.add_argument("--save", metavar="DIR", help="keep the recorded trace and acknowledgements for --replay")
    ap.add_argument("--replay", metavar="DIR", help="replay what --save kept instead of recording")
    ap.add_argument(
        "--drop-syncs",
        metavar="REGEX",
        help="model fsyncs of matching paths as never made (shows the test catches a missing fsync)",
    )
    ap.add_argument(
        "--drop-unlink-syncs",
        metavar="REGEX",
        help="model fsyncs of matching directories that only make unlinks durable as never made",
    )
    ap.add_argument("--fail-fast", action="store_true", help="stop at the first failing crash state")
    ap.add_argument("--jobs", type=int, default=2, help="crash states checked at a time (default 2)")
    args = ap.parse_args()
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    binary = os.path.abspath(args.server)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="ditto-powerloss-", dir=shm)
    t0 = time.time()
    try:
        if args.replay:
            with open(os.path.join(args.replay, "acks.pickle"), "rb") as f:
                root, acks, summary = pickle.load(f)
            trace = os.path.join(args.replay, "trace.log")
        else:
            trace, root, acks, summary = record(binary, work, args.seed)
            if args.save:
                os.makedirs(args.save, exist_ok=True)
                shutil.copy(trace, os.path.join(args.save, "trace.log"))
                with open(os.path.join(args.save, "acks.pickle"), "wb") as f:
                    pickle.dump((root, acks, summary), f)
        print(f"powerloss: workload: {summary}")
        failures, states = replay(binary, work, trace, root, acks, args)
        if args.keep:
            shutil.copy(trace, os.path.join(args.keep, "trace.log"))
    finally:
        shutil.rmtree(work)
    acked = sum(len(v) for v in acks.values())
    print(
        f"powerloss: {states} crash states checked against {acked} acknowledged operations, "
        f"{len(failures)} failed ({time.time() - t0:.0f} s)"
    )
    sys.exit(1 if failures else 0)


def replay(binary, work, trace, root, acks, args):
    calls = parse_trace(trace)
    model = Model(root, args.drop_syncs, args.drop_unlink_syncs)
    syncs = [i for i, c in enumerate(calls) if c[1] in ("fsync", "fdatasync")]
    cuts = sorted({i for s in syncs for i in (s, s + 1)} | {len(calls)})
    print(f"powerloss: {len(calls)} calls traced, {len(syncs)} fsyncs, {len(cuts)} crash points x 3 states")
    rng = random.Random(args.seed)
    failures, seen, queue = [], set(), []

    def check(out, t_crash, where):
        try:
            return where, out, check_state(binary, out, acks, t_crash)
        except Exception as e:  # a crash of the checker itself is a failure of the state
            return where, out, [f"checking the state raised {e!r}"]

    def collect(fut):
        where, out, bad = fut.result()
        if bad:
            failures.append((where, bad))
            print(f"FAIL {where}: " + "; ".join(bad[:5]), flush=True)
            if args.keep:
                # The state as the crash left it, and the server's report on it.
                shutil.copytree(out + ".orig", os.path.join(args.keep, os.path.basename(out)))
                if os.path.exists(out + ".log"):
                    shutil.copy(out + ".log", args.keep)
        shutil.rmtree(out)
        if args.keep:
            shutil.rmtree(out + ".orig")
        if os.path.exists(out + ".log"):
            os.remove(out + ".log")

    # States are materialised in trace order and checked by `jobs` servers at a time; a few
    # wait on disk, no more.
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        applied = 0
        for cut in cuts:
            while applied < cut:
                t, name, a, result, rpath = calls[applied]
                model.apply(name, a, result, rpath)
                applied += 1
            t_crash = calls[cut][0] if cut < len(calls) else float("inf")
            # The acknowledgements (and requests in flight) the crash instant separates.
            acked = tuple(
                (sent < t_crash, t < t_crash)
                for sent, t in [(t, t) for t, _ in acks["bundles"]]
                + [(s, t) for s, t, *_ in acks["versions"]]
                + [(s, t) for s, t, *_ in acks["removals"]]
            )
            for mode in ("lost", "kept", "mixed"):
                where = f"cut{cut}-{mode} (crash before call {cut}, {calls[cut][1] if cut < len(calls) else 'end'})"
                state, entries = model.crash_state(mode, rng)
                if (state, acked) in seen:
                    continue
                seen.add((state, acked))
                out = os.path.join(work, f"cut{cut}-{mode}")
                os.mkdir(out)
                model.materialise(out, entries)
                if args.keep:
                    shutil.copytree(out, out + ".orig")
                queue.append(pool.submit(check, out, t_crash, where))
                while len(queue) > 2 * args.jobs or (queue and queue[0].done()):
                    collect(queue.pop(0))
                if failures and args.fail_fast:
                    break
            if failures and args.fail_fast:
                break
        for fut in queue:
            collect(fut)
    return failures, len(seen)


if __name__ == "__main__":
    main()
