"""Power-loss test of the server's write path: every crash state at every fsync boundary.

A kill -9 (server/tests/crash.rs) keeps every write the process made; a power cut keeps only
what reached the disk. This test follows the method of Pillai et al., "All File Systems Are
Not Created Equal" (OSDI 2014, the ALICE tool): record what the real server does to its data
directory, then build the directory states a crash could leave, and check each one.

1. Record. The real `ditto-server serve` runs under strace (file writes, truncations, fsyncs,
   renames, unlinks, mkdirs) while a client uploads bundles, commits versions and deletes one,
   noting the wall-clock time at which each answer arrived.
2. Replay. The trace is applied to a model of the directory tree. Per file, the model keeps
   the content as of its last fsync/fdatasync (durable) and the writes since (pending); per
   directory, the entries as of its last fsync (durable) and as they are now. POSIX promises
   no more: a new name or a rename survives only an fsync of its directory.
3. Crash states. At every fsync boundary (just before and just after each fsync), three
   states are materialised into a fresh directory:
   - `lost`: durable content and durable names only (every unsynced write lost);
   - `kept`: everything written so far (the kill -9 case);
   - `mixed`: durable names, and a random subset of each file's pending writes (writes reach
     the disk in any order between two fsyncs).
4. Check. The server is started on each state (its startup recovery runs), and everything
   acknowledged before the crash instant must be there: each acknowledged bundle's chunks
   are served byte-identical, each acknowledged version is listed with its manifest, a deleted
   version stays deleted; then `ditto-server check default` must pass.

The SQLite shared-memory file (`-shm`) is memory-mapped, not written with write calls, and is
rebuilt by SQLite from the WAL; crash states leave it out.

Usage: powerloss.py SERVER_BINARY [--seed N] [--keep DIR]
"""

import argparse
import hashlib
import json
import os
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


def make_bundle(chunks):
    """A bundle (docs/FORMAT.md) of raw (codec 0) chunks."""
    out = bytearray(b"DTB1" + struct.pack("<HHII", 1, 0, len(chunks), 0))
    for raw in chunks:
        out += hashlib.sha1(raw).digest() + bytes(4) + struct.pack("<II", len(raw), len(raw))
        out += raw
    return bytes(out)


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
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def run_workload(client, rng):
    """Uploads, commits and a delete; returns what was acknowledged and when."""
    acks = {"bundles": [], "versions": [], "deleted": []}
    versions = []
    # Small versions, then one of 5 MiB: containers take 4 MiB, so the last one opens a new
    # container mid-bundle.
    for v in range(4):
        if v < 3:
            chunks = [rng.randbytes(rng.randint(200, 6000)) for _ in range(4)]
        else:
            chunks = [rng.randbytes(1 << 20) for _ in range(5)]
        for part in (chunks[:2], chunks[2:]):
            status, _ = client.call("POST", "/bundles", make_bundle(part), "application/x-ditto-bundle")
            assert status == 200, f"bundle answered {status}"
            acks["bundles"].append((time.time(), part))
        manifest = {
            "source": "powerloss",
            "time": 1700000000000 + v,
            "entries": [
                {
                    "path": f"f{i}.bin",
                    "kind": "file",
                    "size": len(c),
                    "mtime": 1700000000000,
                    "recipe": [hashlib.sha1(c).hexdigest()],
                }
                for i, c in enumerate(chunks)
            ],
        }
        status, body = client.call("POST", "/versions", json.dumps(manifest).encode())
        assert status == 201, f"commit answered {status}: {body[:200]!r}"
        vid = json.loads(body)["id"]
        acks["versions"].append((time.time(), vid))
        versions.append(vid)
    sent = time.time()
    status, _ = client.call("DELETE", f"/versions/{versions[0]}")
    assert status == 200, f"delete answered {status}"
    acks["deleted"].append((sent, time.time(), versions[0]))
    return acks


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


def plain_path(s):
    """Decodes a path strace printed in angle brackets with -xx (no quotes)."""
    return c_string(f'"{s}"').decode()


def fd_of(arg):
    return int(arg.split("<", 1)[0])


def parse_trace(path):
    """Yields (time, name, args, result, result_path) in the order the calls started."""
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

    def current(self, keep=None):
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
        self.pending = []


class Model:
    """The data directory as the trace changes it; `root` exists before the trace starts."""

    def __init__(self, root, drop_syncs=None):
        self.root = root
        self.drop_syncs = drop_syncs
        self.dirs = {root: {"now": {}, "durable": {}}}
        self.inodes = {}
        self.fds = {}  # fd -> ("f", inode id, path, position) | ("d", path)
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
        elif name in ("write", "pwrite64"):
            h = self.fds.get(fd_of(a[0]))
            if h is None or result == "?" or int(result) < 0:
                return
            data = c_string(a[1])[: int(result)]
            if name == "pwrite64":
                self.inodes[h[1]].pending.append(("w", int(a[3]), data))
            else:
                self.inodes[h[1]].pending.append(("w", h[3], data))
                h[3] += len(data)
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

    def materialise(self, out, mode, rng):
        """Writes a crash state of the data directory into `out` (which exists, empty)."""

        def walk(src, dst):
            entries = self.dirs[src]["now" if mode == "kept" else "durable"]
            for name, (kind, ref) in entries.items():
                if name.endswith("-shm"):
                    continue
                target = os.path.join(dst, name)
                if kind == "d":
                    os.mkdir(target)
                    walk(ref, target)
                else:
                    ino = self.inodes[ref]
                    if mode == "kept":
                        data = ino.current()
                    elif mode == "lost":
                        data = ino.durable
                    else:
                        picks = [rng.random() < 0.5 for _ in ino.pending]
                        data = ino.current(lambda i: picks[i])
                    with open(target, "wb") as f:
                        f.write(data)

        walk(self.root, out)


# ------------------------------------------------------------------ checking a crash state


def start_server(binary, data_dir):
    env = dict(os.environ, PORT="0", DATA_DIR=data_dir, WEB_DIR="web/dist")
    proc = subprocess.Popen([binary, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    m = re.search(r"Open (http://[^/]+)/#token=([0-9a-f]+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r} {proc.stderr.read().decode()[-2000:]}")
    return proc, m.group(1), m.group(2)


def check_state(binary, data_dir, acks, t_crash):
    """Everything acknowledged before `t_crash` is present; returns a list of failures."""
    failures = []
    proc, url, token = start_server(binary, data_dir)
    try:
        c = Client(url, token)
        for t, chunks in acks["bundles"]:
            if t >= t_crash:
                continue
            for raw in chunks:
                fp = hashlib.sha1(raw).hexdigest()
                status, body = c.call("GET", f"/chunks/{fp}")
                if status != 200 or body != raw:
                    failures.append(f"acknowledged chunk {fp[:12]} answered {status}")
        status, body = c.call("GET", "/versions")
        listed = {v["id"] for v in json.loads(body)["versions"]} if status == 200 else set()
        if status != 200:
            failures.append(f"versions list answered {status}")
        # A delete in flight at the crash may or may not have happened; an acknowledged one has.
        deleted = {vid for _, t, vid in acks["deleted"] if t < t_crash}
        in_flight = {vid for sent, t, vid in acks["deleted"] if sent < t_crash <= t}
        for t, vid in acks["versions"]:
            if t < t_crash and vid not in deleted | in_flight:
                status, _ = c.call("GET", f"/versions/{vid}")
                if vid not in listed or status != 200:
                    failures.append(f"acknowledged version {vid} lost (get answered {status})")
        for vid in deleted & listed:
            failures.append(f"deleted version {vid} came back")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    env = dict(os.environ, DATA_DIR=data_dir)
    chk = subprocess.run([binary, "check", "default"], env=env, capture_output=True, text=True)
    if chk.returncode != 0:
        failures.append("check failed: " + (chk.stdout + chk.stderr).strip().replace("\n", " | ")[:600])
    return failures


# ------------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", help="keep the recorded trace and failing states here")
    ap.add_argument(
        "--drop-syncs",
        metavar="REGEX",
        help="model fsyncs of matching paths as never made (shows the test catches a missing fsync)",
    )
    args = ap.parse_args()
    binary = os.path.abspath(args.server)
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="ditto-powerloss-")
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
    acks = run_workload(Client(m.group(1), m.group(2)), rng)
    # Killing strace would leave the server running, detached: kill the server (the first
    # process in the trace) and strace ends with it.
    with open(trace, encoding="latin-1") as f:
        server_pid = int(f.readline().split()[0])
    os.kill(server_pid, signal.SIGKILL)
    proc.wait()

    calls = parse_trace(trace)
    model = Model(root, args.drop_syncs)
    syncs = [i for i, c in enumerate(calls) if c[1] in ("fsync", "fdatasync")]
    cuts = sorted({i for s in syncs for i in (s, s + 1)} | {len(calls)})
    print(f"powerloss: {len(calls)} calls traced, {len(syncs)} fsyncs, {len(cuts)} crash points x 3 states")
    failures, states, applied = [], 0, 0
    for cut in cuts:
        while applied < cut:
            t, name, a, result, rpath = calls[applied]
            model.apply(name, a, result, rpath)
            applied += 1
        t_crash = calls[cut][0] if cut < len(calls) else float("inf")
        for mode in ("lost", "kept", "mixed"):
            out = tempfile.mkdtemp(prefix="state-", dir=work)
            model.materialise(out, mode, rng)
            states += 1
            bad = check_state(binary, out, acks, t_crash)
            if bad:
                where = f"crash before call {cut} ({calls[cut][1] if cut < len(calls) else 'end'}), state {mode}"
                failures.append((where, bad))
                print(f"FAIL {where}: " + "; ".join(bad[:5]))
                if args.keep:
                    shutil.copytree(out, os.path.join(args.keep, f"cut{cut}-{mode}"))
            shutil.rmtree(out)
    if args.keep:
        shutil.copy(trace, os.path.join(args.keep, "trace.log"))
    shutil.rmtree(work)
    acked = sum(len(v) for v in acks.values())
    print(f"powerloss: {states} crash states checked against {acked} acknowledged operations, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
