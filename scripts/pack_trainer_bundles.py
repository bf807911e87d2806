#!/usr/bin/env python3
"""Packs real trainer bundles (scripts/gpu/trainers.sh) for testdata/bundles/trainers/.

Usage: scripts/pack_trainer_bundles.py TRAINERS_TAR_OR_DIR... [--out testdata/bundles/trainers]

Each input is a trainers_N.tar written by trainers.sh (holding NAME.tar.gz
per trainer), or a folder of those NAME.tar.gz. Each bundle becomes
OUT/NAME.tar.xz holding the bundle folder's files at its root, trimmed to
what the tests need: the profiler traces are dropped (and their names taken
out of manifest.json and process.json), the manifest's working directory is
".", and the bundle's own path in companion.log is made relative. Snapshots,
phases, tensor inventories, live samples and the facts the process measured
(facts.json) are kept as recorded."""
import io
import json
import lzma
import os
import re
import sys
import tarfile


def members(src):
    """(name, bytes of NAME.tar.gz) for every packed trainer in src."""
    if os.path.isdir(src):
        for f in sorted(os.listdir(src)):
            if f.endswith(".tar.gz"):
                with open(os.path.join(src, f), "rb") as fh:
                    yield f[:-len(".tar.gz")], fh.read()
        return
    with tarfile.open(src) as t:
        for m in t.getmembers():
            if m.name.endswith(".tar.gz"):
                yield os.path.basename(m.name)[:-len(".tar.gz")], t.extractfile(m).read()


def trim(files):
    """files: relative path -> bytes of one bundle; returns the trimmed map."""
    out = {}
    traces = [p for p in files if ".pt.trace.json" in p]
    for p, data in files.items():
        if p in traces or p.startswith(".ptscope"):
            continue
        base = os.path.basename(p)
        if p == "manifest.json":
            m = json.loads(data)
            m["cwd"] = "."
            m["files"] = [f for f in m.get("files") or [] if f not in traces]
            for r in m.get("ranks") or []:
                r["traces"] = []
            data = (json.dumps(m, indent=1) + "\n").encode()
        elif base == "process.json":
            pj = json.loads(data)
            pj["traces"] = []
            data = (json.dumps(pj, indent=1) + "\n").encode()
        elif base == "companion.log":
            data = re.sub(rb"/\S*/(rank\d+/)", rb"\1", data)
        out[p] = data
    return out


def main():
    args = sys.argv[1:]
    out = "testdata/bundles/trainers"
    if "--out" in args:
        i = args.index("--out")
        out = args[i + 1]
        del args[i:i + 2]
    os.makedirs(out, exist_ok=True)
    for src in args:
        for name, blob in members(src):
            files = {}
            with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as t:
                for m in t.getmembers():
                    if not m.isfile():
                        continue
                    rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
                    files[rel] = t.extractfile(m).read()
            files = trim(files)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
                for rel in sorted(files):
                    ti = tarfile.TarInfo(rel)
                    ti.size = len(files[rel])
                    ti.mtime = 0
                    ti.mode = 0o644
                    t.addfile(ti, io.BytesIO(files[rel]))
            path = os.path.join(out, name + ".tar.xz")
            with open(path, "wb") as f:
                f.write(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
            print("%s: %d files, %d bytes" % (path, len(files), os.path.getsize(path)))


if __name__ == "__main__":
    main()
