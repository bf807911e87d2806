"""The rules of `ptscope run --simulate-world-size` that need no torch: which
collectives are counted, how each faked collective's outputs are made, the
all-to-all count rule, and the mailbox through which simulated ranks of one
bundle pass what they send each other. _simulate applies them."""
import inspect
import math
import os
import pickle
import threading

from . import write_atomic

# torch.distributed functions counted (and named in error messages)
COLLECTIVES = (
    "all_gather", "all_gather_coalesced", "all_gather_into_tensor", "all_gather_object", "all_reduce",
    "all_reduce_coalesced", "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast",
    "broadcast_object_list", "gather", "gather_object", "irecv", "isend", "recv", "recv_object_list", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "scatter", "scatter_object_list", "send", "send_object_list",
    "monitored_barrier", "_reduce_scatter_base", "_all_gather_base",
)

# How each faked collective's outputs are made: the run's output lists the
# rules of the collectives the program called (simulation.json "faked").
RULES = {
    "all_gather": "every rank's chunk is this rank's shard",
    "all_gather_into_tensor": "every rank's chunk is this rank's shard",
    "_all_gather_base": "every rank's chunk is this rank's shard",
    "all_gather_coalesced": "every rank's chunk is this rank's shard",
    "all_reduce": "the result is this rank's own value",
    "all_reduce_coalesced": "the result is this rank's own value",
    "reduce": "the result is this rank's own value",
    "reduce_scatter": "the result is this rank's own chunk",
    "reduce_scatter_tensor": "the result is this rank's own chunk",
    "_reduce_scatter_base": "the result is this rank's own chunk",
    "gather": "the gathered list keeps what it held",
    "broadcast": "a tensor broadcast from another rank: what that rank broadcast when it was simulated earlier in "
                 "this bundle (tensors up to 64 KiB), else zeros",
    "scatter": "a tensor scattered from another rank reads zeros",
    "recv": "received tensors read zeros",
    "irecv": "received tensors read zeros",
    "all_to_all_single": "every source rank sends this rank what this rank sends itself (all ranks route alike)",
    "all_to_all": "every source rank sends this rank what this rank sends itself (all ranks route alike)",
    "all_gather_object": "every rank's object is this rank's",
    "gather_object": "every rank's object is this rank's",
    "scatter_object_list": "this rank gets its own entry of the source's list",
    "broadcast_object_list": "from another rank: what that rank broadcast when it was simulated earlier in this "
                             "bundle, else this rank's list unchanged",
    "send_object_list": "kept in the bundle for the rank that receives it",
    "recv_object_list": "what the sending rank sent when it was simulated earlier in this bundle "
                        "(--simulate-rank all runs the ranks in order), else the last list this rank sent "
                        "(every pipeline boundary alike)",
}
IMBALANCE_RULE = ("; integer counts split evenly (tokens per expert): the hottest expert of this rank receives "
                  "%g x the mean tokens per expert")


# ------------------------------------------------------------ pure rules (no torch)
def split_sizes(total, n, sizes=None):
    """The dim-0 sizes of n chunks: sizes when given (non-empty), else an even split of total."""
    if sizes:
        return [int(s) for s in sizes]
    if n <= 0 or total % n:
        return None
    return [total // n] * n


def offsets(sizes):
    out, o = [], 0
    for s in sizes:
        out.append(o)
        o += s
    return out


def alike_counts(counts, n, me, factor=1.0):
    """What an all_to_all of per-expert token counts returns on rank me of n
    when every rank routed like this one: counts holds this rank's counts for
    all n*L experts (rank r hosts experts r*L..r*L+L-1); the result holds, for
    each source rank r, the counts r sends to me's L experts, which are this
    rank's own counts for them. With factor > 1 the hottest of me's experts
    receives ceil(factor x the mean tokens per expert) in all (spread over the
    sources), when it did not already: the mean is what all ranks route divided
    by the experts, n*sum(counts) / (n*L)."""
    counts = [int(c) for c in counts]
    if n <= 0 or len(counts) % n:
        return None
    L = len(counts) // n
    mine = counts[me * L:(me + 1) * L]
    out = [list(mine) for _ in range(n)]
    if factor and factor > 1 and L > 0:
        target = int(math.ceil(factor * sum(counts) / L - 1e-9))
        hot = max(range(L), key=lambda j: mine[j])
        if n * mine[hot] < target:
            base, rem = divmod(target, n)
            for r in range(n):
                out[r][hot] = base + (1 if r < rem else 0)
    return [v for row in out for v in row]


class Mailbox:
    """Objects one simulated rank sends another (send_object_list,
    broadcast_object_list), kept in the bundle: `--simulate-rank all` runs the
    ranks one after another, so a later rank reads what an earlier one sent.
    Files: <dir>/<kind>_<src>_<dst>_<seq>.pkl, seq counting per (kind, src, dst)."""

    def __init__(self, root):
        self.root = root
        self.seq = {}
        self.lock = threading.Lock()

    def _next(self, key):
        with self.lock:
            n = self.seq.get(key, 0)
            self.seq[key] = n + 1
            return n

    def _path(self, kind, src, dst, seq):
        return os.path.join(self.root, "%s_%s_%s_%d.pkl" % (kind, src, dst, seq))

    def put(self, kind, src, dst, obj):
        seq = self._next(("put", kind, src, dst))
        if not self.root:
            return False
        os.makedirs(self.root, exist_ok=True)
        write_atomic(self._path(kind, src, dst, seq), pickle.dumps(obj, protocol=4))
        return True

    def get(self, kind, src, dst):
        """(True, obj) when the sender's seq-th message is there, else (False, None)."""
        seq = self._next(("get", kind, src, dst))
        if not self.root:
            return False, None
        try:
            with open(self._path(kind, src, dst, seq), "rb") as f:
                return True, pickle.load(f)
        except FileNotFoundError:
            return False, None


def binder(fn):
    """bind(args, kwargs) -> the named arguments of a call of fn, defaults
    applied, as fn's own signature in this PyTorch reads them (a keyword fn
    lacks raises TypeError, as fn would)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None

    def bind(args, kwargs):
        if sig is None:
            if args:
                raise TypeError("cannot bind positional arguments without a signature")
            return dict(kwargs)
        b = sig.bind(*args, **kwargs)
        b.apply_defaults()
        return dict(b.arguments)

    return bind


def first_param(fn, default):
    try:
        return next(iter(inspect.signature(fn).parameters))
    except Exception:
        return default
