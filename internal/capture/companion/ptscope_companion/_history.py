"""Which steps record the allocator history, and with it a Python stack per
allocation (stack windows).

PyTorch builds a trace entry for every allocation and free while its
allocator history is enabled, before it looks at anything else; on a
CPU-bound step that alone costs a few percent, and a Python stack per
allocation a fifth or more. So by default (history mode "windows") the
history is enabled only inside windows, each window is saved as a snapshot
of its own when it ends (disabling the history empties PyTorch's ring), and
between windows only cheap counters run (phases, live samples):

  setup     the set-up before the first step and the first `warmup` steps:
            parameters, optimizer state, DDP buckets and the first steps'
            peaks; their blocks keep their stacks in every later snapshot;
  peak      the step after one that raised the peak (max_memory_allocated)
            by more than 0.5%, with a gap that doubles each time (a leak that
            raises the peak every step costs log2(steps) windows, not every
            step);
  capacity  the step after one that reserved more than 90% of the memory the
            process may use, again with a doubling gap;
  periodic  one steady-state step at doubling gaps (steps 16, 32, 64, ...),
            only while the windows after the set-up have cost less than
            BUDGET of the run's time since its first step (a window's cost
            is its steps' time and its snapshot's).

History mode "run" (the earlier default) records the history for the whole
run and switches only the stacks: then a periodic window comes whenever the
last stacked step is about to leave the history ring (max_entries), at most
every 32nd step, and the switch needs PyTorch's `clear_history` (older
versions clear the ring on every call, so stacks stay on for the whole run).
Pure logic: no torch."""

PERIODIC_GAP = 32  # mode "run": periodic windows at most every 32nd step
PERIODIC_FIRST = 16  # mode "windows": the first periodic window, then doubling gaps
BUDGET = 0.01  # mode "windows": periodic windows while the windows cost less than this share
PEAK_RISE = 1.005  # a step raised the peak when it passed the best so far by 0.5%
CAPACITY = 0.90  # reserved/total above which the run is close to running out


class Windows:
    """Decides, at each step boundary, whether the next step records stacks.

    mode: "auto" (warm-up, periodic and peak windows), "all" (every step) or
    "steps" (the set-up before step 0 and the 0-based step ranges given)."""

    def __init__(self, mode="auto", ranges=(), warmup=3, max_entries=100000, device_total=0, windowed=False,
                 budget=BUDGET):
        self.mode = mode if mode in ("auto", "all", "steps") else "auto"
        self.windowed = bool(windowed)  # history only inside windows (mode "windows")
        self.next_periodic = PERIODIC_FIRST
        self.first_step_us = None  # when step 0 began
        self.spent_us = 0  # what the windows after the set-up cost
        self.window_cost_us = 0  # the estimated cost of one more one-step window
        self.budget = float(budget) if budget and budget > 0 else BUDGET
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

    def decide(self, step, entries, peak, reserved_peak, now_us=0):
        """Called when step `step` is about to begin (all steps before it are
        done); entries is the running count of trace entries, peak and
        reserved_peak the allocator's peak counters. Returns (on, reason)."""
        if self.first_step_us is None:
            self.first_step_us = now_us
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
        if self.windowed:
            if step >= self.next_periodic:
                self.next_periodic = max(step + 1, 2 * self.next_periodic)
                if self.spent_us + self.window_cost_us <= self.budget * max(0, now_us - self.first_step_us):
                    return True, "periodic"
            return False, ""
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

    def closed(self, cost_us, one_step_us, setup):
        """A window of mode "windows" ended and was saved: cost_us is what it
        cost (its steps and its snapshot), one_step_us what one more
        one-step window would (a step of it and its snapshot)."""
        if not setup:
            self.spent_us += max(0, int(cost_us))
        self.window_cost_us = max(0, int(one_step_us))

    def start_setup(self, now_us):
        """The set-up window (before step 0) begins."""
        self.on = True
        self.windows.append({"first_step": -1, "last_step": -1, "reason": "setup",
                             "start_time_us": now_us, "end_time_us": None})
