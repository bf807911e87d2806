"""The pure rules of the companion's --simulate-world-size (no torch needed):
run by TestSimulateRules as `python3 simulate_rules.py COMPANION_DIR`."""
import os
import sys
import tempfile

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "companion")
from ptscope_companion import _simulate as s  # noqa: E402


def check(got, want, what):
    if got != want:
        raise SystemExit("%s: got %r, want %r" % (what, got, want))


# 4 ranks x 2 local experts; rank 1 routed [3,1, 5,0, 2,2, 4,4] (21 token slots).
counts = [3, 1, 5, 0, 2, 2, 4, 4]
# every source rank sends rank 1 what rank 1 sends its own experts 2,3: [5,0]
check(s.alike_counts(counts, 4, 1), [5, 0] * 4, "alike counts, rank 1")
check(s.alike_counts(counts, 4, 3), [4, 4] * 4, "alike counts, rank 3")
# the mean per expert is 4*21/8 = 10.5; with factor 3 the hottest of rank 1's
# experts (expert 2, receiving 4*5 = 20) receives ceil(31.5) = 32 in all, 8 per source
got = s.alike_counts(counts, 4, 1, 3)
check(got, [8, 0] * 4, "imbalance 3")
check(sum(got[0::2]), 32, "hottest expert total")
# already hotter than asked (20 >= 1.2*10.5): unchanged
check(s.alike_counts(counts, 4, 1, 1.2), [5, 0] * 4, "imbalance below the current")
# ceil(3.25*4) = 13 does not split evenly over 4 sources: 4,3,3,3
check(s.alike_counts([1, 1, 1, 1], 4, 0, 3.25), [4, 3, 3, 3], "uneven spread")
check(s.alike_counts([1, 2, 3], 2, 0), None, "counts not divisible by the ranks")
check(s.split_sizes(12, 4), [3, 3, 3, 3], "even split")
check(s.split_sizes(10, 4), None, "uneven without sizes")
check(s.split_sizes(10, 2, [7, 3]), [7, 3], "given sizes")
check(s.offsets([7, 3, 2]), [0, 7, 10], "offsets")


# PyTorch 2.11's signatures: the replacement accepts what the original does
def recv_object_list(object_list, src=None, group=None, device=None, group_src=None, use_batch=False):
    pass


bind = s.binder(recv_object_list)
a = bind(([None],), {"src": 1, "device": "cuda:0", "use_batch": True})
check((a["object_list"], a["src"], a["use_batch"], a["group"]), ([None], 1, True, None), "binding 2.11 keywords")
try:
    bind(([None],), {"bogus": 1})
    raise SystemExit("an unknown keyword was accepted")
except TypeError:
    pass
check(s.first_param(recv_object_list, "x"), "object_list", "first parameter")

# the mailbox: rank 0 sends twice to rank 1; rank 1 (a later process) reads both in order
with tempfile.TemporaryDirectory() as d:
    root = os.path.join(d, "box")
    s.Mailbox(root).put("p2p", 0, 1, ["first"])
    sender = s.Mailbox(root)
    sender.put("p2p", 0, 1, ["a"])  # a fresh process numbers from 0 again: overwrites
    sender.put("p2p", 0, 1, ["b"])
    rx = s.Mailbox(root)
    check(rx.get("p2p", 0, 1), (True, ["a"]), "first message")
    check(rx.get("p2p", 0, 1), (True, ["b"]), "second message")
    check(rx.get("p2p", 0, 1), (False, None), "no third message")
    check(rx.get("p2p", 2, 1), (False, None), "nothing from rank 2")
    check(s.Mailbox(None).put("p2p", 0, 1, [1]), False, "no bundle, no mailbox")



# tensor broadcasts: a small tensor's source keeps it in the mailbox; a rank
# simulated later in the same group reads it (Megatron's do_train flags from
# rank 0); large tensors, other shapes and unknown senders read zeros.
class FakeTensor:
    def __init__(self, vals, dtype="torch.int64", shape=None, esize=8):
        self.vals, self.dtype, self.esize = list(vals), dtype, esize
        self.shape = tuple(shape or (len(vals),))

    def numel(self):
        return len(self.vals)

    def element_size(self):
        return self.esize

    def detach(self):
        return self

    def cpu(self):
        return self

    def reshape(self, *shape):
        return self

    def tolist(self):
        return list(self.vals)

    def copy_(self, other):
        self.vals = list(other.vals)

    def zero_(self):
        self.vals = [0] * len(self.vals)


class FakeTorchMod:
    Tensor = FakeTensor

    class no_grad:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    @staticmethod
    def tensor(vals, dtype=None):
        return FakeTensor(vals, dtype)


class FakeDist:
    def __init__(self, rank):
        self.rank = rank

    def get_rank(self):
        return self.rank

    def get_process_group_ranks(self, group):
        return group  # the tests pass a list of global ranks as the group


with tempfile.TemporaryDirectory() as d:
    root = os.path.join(d, "box")
    rank0 = s.Simulation(4, 0, mailbox=s.Mailbox(root))
    s._post_broadcast(rank0, FakeDist(0), FakeTorchMod, {"tensor": FakeTensor([1, 0, 0]), "src": 0, "group": None})
    big = FakeTensor([7] * 9000)  # 72,000 B: above BROADCAST_KEPT_BYTES, not kept
    s._post_broadcast(rank0, FakeDist(0), FakeTorchMod, {"tensor": big, "src": 0, "group": None})
    s._post_broadcast(rank0, FakeDist(0), FakeTorchMod, {"tensor": FakeTensor([5, 6]), "src": 0, "group": [0, 1]})
    rank1 = s.Simulation(4, 1, mailbox=s.Mailbox(root))
    flags = FakeTensor([0, 0, 0])
    s._post_broadcast(rank1, FakeDist(1), FakeTorchMod, {"tensor": flags, "src": 0, "group": None})
    check(flags.vals, [1, 0, 0], "flags broadcast by rank 0, replayed on rank 1")
    big1 = FakeTensor([3] * 9000)
    s._post_broadcast(rank1, FakeDist(1), FakeTorchMod, {"tensor": big1, "src": 0, "group": None})
    check(set(big1.vals), {0}, "a large broadcast reads zeros")
    tp = FakeTensor([9, 9, 9])  # rank 0 sent 2 values on this group: a different shape
    s._post_broadcast(rank1, FakeDist(1), FakeTorchMod, {"tensor": tp, "src": 0, "group": [0, 1]})
    check(tp.vals, [0, 0, 0], "a broadcast of another shape reads zeros")
    other = FakeTensor([4, 4])
    s._post_broadcast(rank1, FakeDist(1), FakeTorchMod, {"tensor": other, "src": 2, "group": [1, 2]})
    check(other.vals, [0, 0], "a broadcast from a rank not simulated before reads zeros")
    check(rank1.facts.get("broadcasts_replayed"), 1, "replays counted")

# every collective with a rule is one the companion counts or replaces
missing = [k for k in s.RULES if k not in s.COLLECTIVES]
check(missing, [], "rules for uncounted collectives")
print("simulate rules: ok")
