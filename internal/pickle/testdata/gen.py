"""Writes the pickle test vectors in this folder. Run: python3 gen.py
(Python's own pickler, protocols 0-5, plus hand-made TorchScript-style bytes.)"""
import os, pickle

here = os.path.dirname(os.path.abspath(__file__))

def w(name, data):
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)

nums = [0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**47 + 5, 2**63 - 1, 2**63,
        2**64 - 1, 2**70, -2**40, -2**63, -2**63 - 1, 1.5, -0.25, True, False, None]
for p in range(0, 6):
    w(f"nums_p{p}.pickle", pickle.dumps(nums, protocol=p))
    L = [1, "two"]
    w(f"shared_p{p}.pickle", pickle.dumps({"a": L, "b": [L, L], "t": (L, 3)}, protocol=p))
    rec = []
    rec.append(rec)
    w(f"recursive_p{p}.pickle", pickle.dumps(rec, protocol=p))
    w(f"strings_p{p}.pickle", pickle.dumps(["héllo ✓", b"\x00\xff", "x" * (70000 if p in (0, 4) else 10), ""], protocol=p))
    w(f"containers_p{p}.pickle", pickle.dumps({(1, 2): {3, 4}, "f": frozenset([5]), "e": (), "big": list(range(2500))}, protocol=p))

class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/ptscope_pwned",))
w("evil_p4.pickle", pickle.dumps({"x": Evil()}, protocol=4))
w("evil_p0.pickle", pickle.dumps([Evil()], protocol=0))
w("bytearray_p5.pickle", pickle.dumps(bytearray(b"abc"), protocol=5))

# TorchScript C++ pickler style (protocol 2, BINPUT memo, restore_type_tag wrapper).
ts = (b"\x80\x02ctorch.jit._pickle\nrestore_type_tag\nq\x00"
      b"}q\x01(X\x01\x00\x00\x00aq\x02ctorch.jit._pickle\nbuild_intlist\nq\x03]q\x04(K\x01K\x02e\x85q\x05Rq\x06"
      b"X\x01\x00\x00\x00bq\x07\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80u"
      b"X\x0e\x00\x00\x00Dict[str, Any]q\x08\x86q\tRq\n.")
w("torchscript_p2.pickle", ts)
