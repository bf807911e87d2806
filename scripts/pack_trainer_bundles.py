#!/usr/bin/env python3
"""Packs real trainer bundles (scripts/gpu/trainers.sh) for testdata/bundles/trainers/.

Usage: scripts/pack_trainer_bundles.py TRAINERS_TAR_OR_DIR... [--out testdata/bundles/trainers]
       scripts/pack_trainer_bundles.py --scrub PACKED.tar.xz...   (rewrite packed bundles in place)

Each input is a trainers_N.tar written by trainers.sh (holding NAME.tar.gz
per trainer), or a folder of those NAME.tar.gz. Each bundle becomes
OUT/NAME.tar.xz holding the bundle folder's files at its root, trimmed to
what the tests need: the profiler traces are dropped (and their names taken
out of manifest.json and process.json), the manifest's working directory is
".", and the bundle's own path in companion.log is made relative. Snapshots,
phases, tensor inventories, live samples and the facts the process measured
(facts.json) are kept as recorded, except for the GPU machine's paths in
them (scrub): a frame's file under the repository's working copy becomes
relative to it (scripts/..., examples/...), one under a Python environment
starts at site-packages/ (how analyze tells torch's and libraries' frames
apart is unchanged), the companion's cache becomes ~/.cache/ptscope/, and
the folders the bundle was written to are dropped. The snapshots are
rewritten by scripts/scrub_paths.py's rules."""
import io
import json
import lzma
import os
import re
import sys
import tarfile

from scrub_paths import scrub_pickle, scrub_text  # the same rules as for other test data


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


def scrub(files):
    """files: relative path -> bytes; the GPU machine's paths taken out."""
    out = {}
    for p, data in files.items():
        if p.endswith(".pickle"):
            data = scrub_pickle(data)
        elif p.endswith(".json") or p.endswith(".jsonl") or p.endswith(".log"):
            text = data.decode("utf-8", "replace")
            # the folders the bundle was written to, then the machine's paths
            text = re.sub(r"/(?:tmp|root|home|work)/\S*?/(?=(rank\d+/|companion\.log))", "", text)
            data = scrub_text(text).encode()
        out[p] = data
    return out


def pack(files, path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for rel in sorted(files):
            ti = tarfile.TarInfo(rel)
            ti.size = len(files[rel])
            ti.mtime = 0
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(files[rel]))
    with open(path, "wb") as f:
        f.write(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))


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
    if args[:1] == ["--scrub"]:
        for path in args[1:]:
            with tarfile.open(path) as t:
                files = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
            pack(scrub(files), path)
            print("%s: %d files, %d bytes" % (path, len(files), os.path.getsize(path)))
        return
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
            files = scrub(trim(files))
            path = os.path.join(out, name + ".tar.xz")
            pack(files, path)
            print("%s: %d files, %d bytes" % (path, len(files), os.path.getsize(path)))


if __name__ == "__main__":
    main()
