#!/usr/bin/env python3
"""Takes the GPU machine's paths out of recorded PyTorch artifacts kept as test data.

Usage: scripts/scrub_paths.py FILE...   (rewritten in place; reports what changed)

FILE is a snapshot pickle (.pickle, or .pickle.xz) or a text file (.json,
.jsonl, .log, .txt, .golden). A frame's file under the repository's working copy
becomes relative to it (scripts/..., examples/...), one under a Python
environment starts at site-packages/ (how analyze tells torch's and
libraries' frames apart is unchanged), and the companion's cache becomes
~/.cache/ptscope/. A pickle is decoded with Python's pickle (our own test
data: plain dicts, lists and strings) and written again with the protocol it
had and the same objects shared, so that only the paths' bytes change; a
.xz file is compressed again at preset 9e.

scripts/pack_trainer_bundles.py uses the same rules for the bundles it packs."""
import lzma
import pickle
import pickletools
import re
import sys

# In this order: a file inside a Python environment is the environment's,
# even if its own path holds examples/.
SCRUB = [
    (re.compile(r"^/\S*?/(site-packages|dist-packages)/"), r"\1/"),  # a Python environment
    (re.compile(r"^/\S*?/(?=(scripts/gpu/|examples/))"), ""),  # the working copy's root
    (re.compile(r"^/\S*?/\.cache/ptscope/"), "~/.cache/ptscope/"),  # the companion's cache
]

# The same rules inside text, where a path need not start the string; then
# the GPU machine's own folders in logs and manifests: the copy of the
# checkout where a command ran (its .gpu/<helper>/ folder) becomes ".", and
# a command's output folder ($OUT, or a scratch folder under /tmp) "$OUT".
_TEXT = [
    (re.compile(r"/(?:opt|root|home|work|tmp|usr)/[^\s\"']*?/(site-packages|dist-packages)/"), r"\1/"),
    (re.compile(r"/(?:opt|root|home|work)/[^\s\"']*?/(?=(scripts/gpu/|examples/))"), ""),
    (re.compile(r"/(?:opt|root|home|work|tmp)/[^\s\"']*?/\.gpu/[^/\s\"']+(?![^/\s\"'])"), "."),
    (re.compile(r"(?<![\w./-])/root/out(?![^/\s\"'])"), "$OUT"),
    (re.compile(r"(?<![\w./-])/tmp/[^/\s\"']+(?![^/\s\"'])"), "$OUT"),
]


def scrub_str(v):
    w = v
    for pat, to in SCRUB:
        w = pat.sub(to, w)
    return v if w == v else w


def scrub_obj(v, memo=None):
    """v with every string scrubbed; dicts, lists and tuples are rebuilt. An
    object shared in v is shared in the result and no other is, so that
    pickle writes the same memo references as before."""
    if memo is None:
        memo = {}
    if not isinstance(v, (str, dict, list, tuple)):
        return v
    got = memo.get(id(v))
    if got is not None:
        return got[1]
    if isinstance(v, str):
        out = scrub_str(v)
        memo[id(v)] = (v, out)
    elif isinstance(v, dict):
        out = {}
        memo[id(v)] = (v, out)
        for k, x in v.items():
            out[scrub_obj(k, memo)] = scrub_obj(x, memo)
    elif isinstance(v, list):
        out = []
        memo[id(v)] = (v, out)
        out.extend(scrub_obj(x, memo) for x in v)
    else:
        out = tuple(scrub_obj(x, memo) for x in v)
        memo[id(v)] = (v, out)
    return out


def protocol(data):
    if data[:1] == b"\x80":
        return data[1]
    return max(op.proto for op, _, _ in pickletools.genops(data))


def scrub_pickle(data):
    return pickle.dumps(scrub_obj(pickle.loads(data)), protocol=protocol(data))


def scrub_text(text):
    for pat, to in _TEXT:
        text = pat.sub(to, text)
    return text


def main(paths):
    for p in paths:
        with open(p, "rb") as f:
            raw = f.read()
        xz = p.endswith(".xz")
        data = lzma.decompress(raw) if xz else raw
        name = p[:-3] if xz else p
        if name.endswith(".pickle"):
            new = scrub_pickle(data)
        else:
            new = scrub_text(data.decode("utf-8")).encode("utf-8")
        if new == data:
            print("unchanged %s" % p)
            continue
        if xz:
            new = lzma.compress(new, preset=9 | lzma.PRESET_EXTREME)
        with open(p, "wb") as f:
            f.write(new)
        print("scrubbed %s: %d -> %d bytes" % (p, len(raw), len(new)))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1:])
