"""Rewrites a real allocator snapshot into the PyTorch 1.13/2.0 forms ptscope
must still read: a bare list of segments (no device_traces), blocks without
address/requested_size carrying `history: [{addr, real_size, frames}]`, the
`active_awaiting_free` spelling, and segments without requested_size,
segment_pool_id, is_expandable or frames. Standard library only.
Usage: python3 scripts/make_legacy_snapshot.py IN(.xz) OUT(.xz)"""
import lzma, pickle, sys

src, dst = sys.argv[1], sys.argv[2]
opener = lzma.open if src.endswith(".xz") else open
with opener(src, "rb") as f:
    snap = pickle.load(f)
segments = []
pending = 0
for seg in snap["segments"]:
    blocks = []
    for b in seg["blocks"]:
        nb = {"size": b["size"], "state": b["state"]}
        if b["state"] == "active_allocated":
            nb["history"] = [{"addr": b["address"], "real_size": b["requested_size"], "frames": b.get("frames", [])}]
            if pending < 2 and b["size"] >= 1 << 20:
                nb["state"] = "active_awaiting_free"  # the docstring's spelling
                pending += 1
        blocks.append(nb)
    segments.append({k: seg[k] for k in ("device", "address", "total_size", "allocated_size", "active_size", "stream", "segment_type")} | {"blocks": blocks})
with lzma.open(dst, "wb", preset=9) as f:
    pickle.dump(segments, f, protocol=2)
