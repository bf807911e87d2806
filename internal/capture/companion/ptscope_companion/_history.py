"""Which steps record a Python stack with every allocation (stack windows).

Gathering a stack per allocation is what makes allocator history expensive:
on a CPU-bound step it costs a fifth or more of the step time. The trace
itself (address, size, time, the module path in user_metadata) costs close
to nothing. So the history is recorded for the whole run, and stacks only
for the steps where they pay ("windows"):

  warmup    the set-up before the first step and the first `warmup` steps:
            parameters, optimizer state, DDP buckets and the first steps'
            peaks, whose blocks keep their stacks in every later snapshot;
  periodic  one step whenever the last stacked step is about to leave the
            history ring (max_entries), so the ring holds a stacked
            steady-state step for the end or OOM snapshot, but at most every
            32nd step: a stacked step costs a CPU-bound run about 40% of a
            step, so this keeps their share of the run under about 1.3%
            (rings shorter than 32 steps then hold a stacked step only part
            of the time; a larger max_entries or --record-steps gives more);
  peak      the step after one that raised the peak (max_memory_allocated)
            by more than 0.5%, or after one that reserved more than 90% of
            the device, with a gap that doubles each time (a leak that raises
            the peak every step costs log2(steps) windows, not every step).

Stacks are switched by calling _record_memory_history again with the same
arguments but another `context`; PyTorch keeps the ring then only where
its signature has `clear_history` (older versions clear the ring on every
call), so elsewhere stacks stay on for the whole run. Pure logic: no torch."""

PERIODIC_GAP = 32  # periodic windows at most every 32nd step (their cost, see above)
PEAK_RISE = 1.005  # a step raised the peak when it passed the best so far by 0.5%
CAPACITY = 0.90  # reserved/total above which the run is close to running out


class Windows:
    """Decides, at each step boundary, whether the next step records stacks.

    mode: "auto" (warm-up, periodic and peak windows), "all" (every step) or
    "steps" (the set-up before step 0 and the 0-based step ranges given)."""

    def __init__(self, mode="auto", ranges=(), warmup=3, max_entries=100000, device_total=0):
        self.mode = mode if mode in ("auto", "all", "steps") else "auto"
        self.ranges = [(int(a), int(b)) for a, b in ranges]
        self.warmup = max(0, int(warmup))
        self.max_entries = max(1, int(max_entries))
        self.device_total = int(device_total or 0)
        self.best_peak = 0
        self.entries_at_window_start = 0  # trace entries when the last stacked step began
        self.per_step = 0  # trace entries of the last step
        self.last_entries = 0
        self.gap = 1  # steps to wait before the next peak window
        self.last_periodic = -PERIODIC_GAP
        self.next_peak_ok = 0  # first step a peak window may cover
        self.windows = []  # {"first_step", "last_step", "reason", "start_time_us", "end_time_us"}
        self.on = False

    def initial(self):
        """Whether the set-up before the first step records stacks."""
        return True

    def _requested(self, step):
        return any(a <= step <= b for a, b in self.ranges)

    def decide(self, step, entries, peak, reserved_peak):
        """Called when step `step` is about to begin (all steps before it are
        done); entries is the running count of trace entries, peak and
        reserved_peak the allocator's peak counters. Returns (on, reason)."""
        self.per_step = max(0, entries - self.last_entries) if step > 0 else entries
        self.last_entries = entries
        rose = self.best_peak > 0 and peak > self.best_peak * PEAK_RISE
        self.best_peak = max(self.best_peak, peak)
        if self.mode == "all":
            return True, "all"
        if self.mode == "steps":
            return self._requested(step), "requested"
        if step < self.warmup:
            return True, "warmup"
        near = self.device_total > 0 and reserved_peak > CAPACITY * self.device_total
        if (rose or (near and self.gap < 64)) and step >= self.next_peak_ok:
            self.next_peak_ok = step + self.gap
            self.gap *= 2
            return True, "peak" if rose else "capacity"
        # the last stacked step leaves the ring once max_entries newer entries
        # were recorded; stack the next step before the one after it would
        # push the last window out
        if (entries - self.entries_at_window_start + 2 * self.per_step >= self.max_entries
                and step - self.last_periodic >= PERIODIC_GAP):
            self.last_periodic = step
            return True, "periodic"
        return False, ""

    def begin(self, step, on, reason, entries, now_us):
        """Record the decision for step; returns True when stacks must switch."""
        changed = on != self.on
        if on:
            self.entries_at_window_start = entries
            w = self.windows[-1] if self.windows else None
            if w is not None and w["end_time_us"] is None and w["reason"] == reason:
                w["last_step"] = step  # the window goes on
            else:
                if w is not None and w["end_time_us"] is None:
                    w["end_time_us"] = now_us
                self.windows.append({"first_step": step, "last_step": step, "reason": reason,
                                     "start_time_us": now_us, "end_time_us": None})
        elif self.on and self.windows and self.windows[-1]["end_time_us"] is None:
            self.windows[-1]["end_time_us"] = now_us
        self.on = on
        return changed

    def start_setup(self, now_us):
        """The set-up window (before step 0) begins."""
        self.on = True
        self.windows.append({"first_step": -1, "last_step": -1, "reason": "setup",
                             "start_time_us": now_us, "end_time_us": None})
