package memory

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/spillmem"
	"github.com/ptscope/ptscope/internal/units"
)

// Finding thresholds (documented in docs/analyze.md). A finding fires only
// where acting on it would change something that matters; each threshold's
// reason is beside it. Checked on every committed trainer bundle and
// fixture (TestFindingsCalibrated in internal/load): healthy runs get no
// finding above info, and the leak, OOM and fp32 runs' first finding names
// their problem.
const (
	// low-efficiency: a fifth or more of the reserved memory sat in cached
	// free blocks at the peak (a few percent is what a caching allocator
	// costs; the trainers measured 3-21%, expandable_segments recovers
	// most of the rest) ...
	minEfficiency = 0.80
	// ... and that is enough to matter: 1 GiB, or 2% of the device when
	// its size is known (on an 80 GB GPU the 200-300 MiB the healthy
	// trainers leave is no batch or sequence size anyone would pick). It
	// is a warning where memory is short: an OOM, or a peak reserved near
	// the device (nearCapacity).
	minCachedAtPeak      = 1 << 30
	minCachedAtPeakShare = 0.02
	// large-cached-free: what the allocator keeps cached after the last
	// entry is reused by the next step and costs nothing unless another
	// process needs the GPU; it is worth saying only when that is a large
	// part of the device (a quarter when known, else 10 GiB)
	largeCachedFree      = 10 << 30
	largeCachedFreeShare = 0.25
	largePendingFree     = 100 << 20
	// activations-dominate, optimizer-dominates: a category above half of
	// the peak, said only where memory is a constraint: the peak reserved
	// is half the device or more (or the device is unknown), so cutting it
	// lets a larger batch, sequence or model fit
	dominantShare       = 0.5
	memoryBoundShare    = 0.5
	nearCapacity        = 0.9  // peak reserved above 90% of the device
	beforeRecordingHigh = 0.3  // share of the peak allocated before recording
	noStackShare        = 0.25 // share of peak bytes without frames
	roundingWasteShare  = 0.05
	fp32ParamShare      = 0.9   // share of parameter bytes in fp32 for fp32-compute
	peakMissedShare     = 0.01  // the history's peak below the process's by more
	windowMissedShare   = 0.001 // the best window's peak below the run's by more
)

// memoryBound reports whether the peak reserved is a large share of the
// device (memoryBoundShare), so that cutting memory changes what fits;
// true when the device's size is unknown.
func (a *analyzer) memoryBound() bool {
	o := a.o.DeviceMemory
	return o <= 0 || float64(a.res.Peak.ReservedBytes) >= memoryBoundShare*float64(o)
}

// significant reports whether bytes of the device are enough to change
// what fits: at least min, or share of the device when its size is known.
func (a *analyzer) significant(bytes, min int64, share float64) bool {
	if o := a.o.DeviceMemory; o > 0 {
		return float64(bytes) >= share*float64(o)
	}
	return bytes >= min
}

// bytesAt is what category c held at the peak.
func (r *Result) bytesAt(c Category) int64 {
	for _, g := range r.Categories {
		if g.Category == c {
			return g.Bytes
		}
	}
	return 0
}

// findingList collects findings in the order the rules run: finding.Sort
// is stable, so that order breaks ties of severity and id.
type findingList []finding.Finding

// add appends fd pointing at at.
func (l *findingList) add(fd finding.Finding, at *finding.Ref) {
	fd.At = at
	*l = append(*l, fd)
}

// findings runs every rule group on the analysis, in a fixed order, and
// returns what they found, most severe first.
func (a *analyzer) findings() []finding.Finding {
	out := findingList{}
	a.historyFindings(&out)
	a.oomFindings(&out)
	a.capacityFindings(&out)
	a.patternFindings(&out)
	a.fragmentationFindings(&out)
	if a.res.Peak.AllocatedBytes > 0 {
		a.categoryFindings(&out)
		a.noStackFindings(&out)
	}
	a.precisionFindings(&out)
	a.coverageFindings(&out)
	finding.Sort(out)
	return out
}

// device is the result's device ordinal, for a finding's Ref.
func (a *analyzer) device() *int { return finding.Int(a.res.Device) }

// peakRef points at the peak in the timeline: its entry, time and step
// where known.
func (a *analyzer) peakRef() *finding.Ref {
	res, p := a.res, a.res.Peak
	ref := &finding.Ref{View: "timeline", Device: a.device()}
	if p.EventIndex >= 0 {
		ref.EventIndex = finding.Int(p.EventIndex)
		if res.HasTime {
			ref.TimeNS = finding.Int64(p.TimeNS)
		}
	}
	if p.Step >= 0 {
		ref.Step = finding.Int(p.Step)
	}
	return ref
}

// when names the instant a finding reads: with no history, peak and end
// are both the dump.
func (a *analyzer) when(history, dump string) string {
	if a.res.HasHistory {
		return history
	}
	return dump
}

// historyFindings says when the snapshot has no allocation history: a
// run recorded in windows that ran out of memory between them, or a dump
// without _record_memory_history.
func (a *analyzer) historyFindings(out *findingList) {
	res, B := a.res, units.Bytes
	if !res.HasHistory && a.o.Run != nil && len(res.OOMs) > 0 && res.OOMs[0].EventIndex < 0 {
		// a run recorded in windows that ran out of memory between them
		x := res.OOMs[0]
		out.add(finding.New("no-history", finding.Info, finding.Numbers{"allocated_bytes": float64(res.End.AllocatedBytes),
			"reserved_bytes": float64(res.End.ReservedBytes)},
			fmt.Sprintf("The out-of-memory error came outside the steps ptscope run recorded: its snapshot holds the blocks alive at the error (%s allocated, %s reserved), with stacks for those allocated inside a window, but no timeline leading to it.",
				B(res.End.AllocatedBytes), B(res.End.ReservedBytes)), recordOOMStep(res, x.Step)),
			&finding.Ref{View: "state", Device: a.device()})
	} else if !res.HasHistory {
		out.add(finding.New("no-history", finding.Info, finding.Numbers{"allocated_bytes": float64(res.End.AllocatedBytes),
			"reserved_bytes": float64(res.End.ReservedBytes)},
			fmt.Sprintf("No allocation history was recorded: the snapshot holds only the segments at dump time (%s allocated, %s reserved), so there is no peak, timeline, steps or leak analysis.",
				B(res.End.AllocatedBytes), B(res.End.ReservedBytes)),
			"Call torch.cuda.memory._record_memory_history(max_entries=100000) before the code to study (ptscope run does), then dump the snapshot."),
			&finding.Ref{View: "state", Device: a.device()})
	}
}

// oomFindings explains the out-of-memory errors: one outside the view (a
// run recorded in windows), an invalid snapshot, and each OOM in the
// history as capacity or fragmentation.
func (a *analyzer) oomFindings(out *findingList) {
	res, B := a.res, units.Bytes
	if res.OOMsOutsideView > 0 {
		out.add(oomElsewhere(res, a.o.Run, a.o.AllowedBytes))
	}
	if fd, ref, ok := invalidFinding(a.s, res); ok {
		out.add(fd, ref)
	}
	for _, x := range res.OOMs {
		ref := &finding.Ref{View: "timeline", Device: a.device(), EventIndex: finding.Int(x.EventIndex)}
		if res.HasTime {
			ref.TimeNS = finding.Int64(x.TimeNS)
		}
		nums := finding.Numbers{"requested_bytes": float64(x.RequestedBytes), "device_free_bytes": float64(x.DeviceFreeBytes),
			"cached_free_bytes": float64(x.CachedFreeBytes), "allocated_bytes": float64(x.AllocatedBytes), "reserved_bytes": float64(x.ReservedBytes)}
		nums["allowed_bytes"] = float64(x.AllowedBytes)
		grew := ""
		if s := OOMPhaseGrowth(&x, res.Steps); s != "" {
			grew = " " + s + "."
			nums["phase_start_allocated_bytes"] = float64(x.PhaseStartAllocatedBytes)
		}
		sev := finding.Critical
		if x.Caught {
			// the run went on: what failed was a try (a batch-size finder's)
			sev, grew = finding.Warning, grew+" The program caught the error and went on (as a batch-size finder does)."
		}
		switch {
		case x.Verdict == VerdictCapacity && x.Limited:
			out.add(finding.New("oom-capacity", sev, nums,
				fmt.Sprintf("Out of memory asking for %s with %s of tensors in the %s this process may use (its per-process memory fraction; %s was free on the device): it does not fit under that limit.%s",
					B(x.RequestedBytes), B(x.AllocatedBytes), B(x.AllowedBytes), B(x.DeviceFreeBytes), grew),
				"Raise torch.cuda.set_per_process_memory_fraction, or cut memory: a smaller batch or sequence, activation checkpointing, mixed precision, sharding (FSDP/ZeRO)."), ref)
		case x.Verdict == VerdictCapacity:
			out.add(finding.New("oom-capacity", sev, nums,
				fmt.Sprintf("Out of memory asking for %s with %s of tensors, %s free on the device and %s cached: it does not fit.%s",
					B(x.RequestedBytes), B(x.AllocatedBytes), B(x.DeviceFreeBytes), B(x.CachedFreeBytes), grew),
				"Reduce the batch or sequence length, use activation checkpointing or mixed precision, or shard (FSDP/ZeRO)."), ref)
		default:
			out.add(finding.New("oom-fragmentation", sev, nums,
				fmt.Sprintf("Out of memory asking for %s although %s was free in total (%s on the device, %s cached): fragmentation.%s",
					B(x.RequestedBytes), B(x.DeviceFreeBytes+x.CachedFreeBytes), B(x.DeviceFreeBytes), B(x.CachedFreeBytes), grew),
				"Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or free large tensors earlier."), ref)
		}
	}
}

// capacityFindings compares the peak reserved with the device's size,
// when known: does-not-fit above it, near-capacity above nearCapacity.
func (a *analyzer) capacityFindings(out *findingList) {
	p, B := a.res.Peak, units.Bytes
	if o := a.o.DeviceMemory; o > 0 && p.ReservedBytes > 0 && float64(p.ReservedBytes) > nearCapacity*float64(o) {
		share := float64(p.ReservedBytes) / float64(o)
		nums := finding.Numbers{"reserved_bytes": float64(p.ReservedBytes), "device_bytes": float64(o), "share_ratio": share}
		if p.ReservedBytes > o {
			out.add(finding.New("does-not-fit", finding.Critical, nums,
				fmt.Sprintf("Peak reserved %s is %s of the device's %s: it does not fit.", B(p.ReservedBytes), units.Percent(share), B(o)),
				"Cut the peak below the device (a smaller micro-batch or sequence, activation checkpointing, bf16, sharding with FSDP/ZeRO) or use a larger GPU."), a.peakRef())
		} else {
			out.add(finding.New("near-capacity", finding.Warning, nums,
				fmt.Sprintf("Peak reserved %s is %s of the device's %s: little headroom.", B(p.ReservedBytes), units.Percent(share), B(o)),
				"A longer sequence or a larger batch will go out of memory; leave 10% free or cut activations (checkpointing, bf16)."), a.peakRef())
		}
	}
}

// patternFindings reports the steps' pattern: a leak (growth per step,
// with its largest source) or a spike (the step that peaks).
func (a *analyzer) patternFindings(out *findingList) {
	res, B := a.res, units.Bytes
	if res.Pattern == PatternLeak && res.Leak != nil {
		l := res.Leak
		msg := fmt.Sprintf("Memory grows %s per step (%s over %d steps): tensors outlive their step.", B(l.PerStepBytes), B(l.GrowthBytes), l.Steps)
		if len(l.Stacks) > 0 {
			msg += " Largest source: " + l.Stacks[0].Source + "."
		}
		ref := &finding.Ref{View: "steps", Device: a.device()}
		if len(l.Stacks) > 0 {
			ref.Name = l.Stacks[0].Source
		}
		out.add(finding.New("leak", finding.Critical,
			finding.Numbers{"per_step_bytes": float64(l.PerStepBytes), "growth_bytes": float64(l.GrowthBytes), "steps": float64(l.Steps)}, msg,
			"Look for a loss kept with its graph (use loss.item()), a list or cache that grows every step, or tensors stored on self."), ref)
	}
	if res.Pattern == PatternSpike {
		var top StepRow
		for _, s := range res.Steps {
			if !s.Partial && !s.PeakLowerBound && s.PeakAllocatedBytes > top.PeakAllocatedBytes {
				top = s
			}
		}
		ref := &finding.Ref{View: "steps", Device: a.device(), Step: finding.Int(top.Index)}
		if top.PeakIndex >= 0 {
			ref.EventIndex = finding.Int(top.PeakIndex)
		}
		out.add(finding.New("spike", finding.Warning, finding.Numbers{"peak_allocated_bytes": float64(top.PeakAllocatedBytes), "step": float64(top.Index)},
			fmt.Sprintf("Step %s peaks at %s, well above the others.", top.Name, B(top.PeakAllocatedBytes)),
			"A larger batch, a longer sequence or an evaluation step causes this: bound the input size or checkpoint activations for the worst case."),
			ref)
	}
}

// fragmentationFindings reports what the caching allocator holds without
// tensors: low efficiency at the peak, a large cache at the end, frees
// pending on other streams, and rounding waste.
func (a *analyzer) fragmentationFindings(out *findingList) {
	res, B := a.res, units.Bytes
	p, f := res.Peak, res.Fragmentation
	dev := a.device()
	if p.ReservedAtPeakBytes > 0 && f.EfficiencyAtPeak < minEfficiency && a.significant(f.CachedFreeAtPeakBytes, minCachedAtPeak, minCachedAtPeakShare) {
		sev := finding.Info
		if len(res.OOMs) > 0 || res.OOMsOutsideView > 0 || a.o.DeviceMemory > 0 && float64(p.ReservedBytes) > nearCapacity*float64(a.o.DeviceMemory) {
			sev = finding.Warning
		}
		out.add(finding.New("low-efficiency", sev,
			finding.Numbers{"efficiency_at_peak_ratio": f.EfficiencyAtPeak, "allocated_bytes": float64(p.AllocatedBytes),
				"reserved_at_peak_bytes": float64(p.ReservedAtPeakBytes), "cached_free_at_peak_bytes": float64(f.CachedFreeAtPeakBytes)},
			fmt.Sprintf("%s only %s of the reserved memory held tensors (%s of %s); %s sat in cached free blocks.",
				a.when("At the peak", "At dump time"), units.Percent(f.EfficiencyAtPeak), B(p.AllocatedBytes), B(p.ReservedAtPeakBytes), B(f.CachedFreeAtPeakBytes)),
			"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True usually recovers most of it."), a.peakRef())
	}
	if a.significant(f.CachedFreeBytes, largeCachedFree, largeCachedFreeShare) {
		out.add(finding.New("large-cached-free", finding.Info,
			finding.Numbers{"cached_free_bytes": float64(f.CachedFreeBytes), "largest_free_bytes": float64(f.LargestFreeBytes)},
			fmt.Sprintf("%s is cached in free blocks %s (largest %s): the next step reuses it, but other processes on this GPU cannot.",
				B(f.CachedFreeBytes), a.when("at the end", "at dump time"), B(f.LargestFreeBytes)),
			"Only if another process needs this GPU (an evaluation or a second job): call torch.cuda.empty_cache() once after the phase that cached it. Inside a training loop it only costs time, the allocator asks CUDA for the memory again."),
			&finding.Ref{View: "state", Device: dev})
	}
	if f.PendingFreeBytes > largePendingFree {
		out.add(finding.New("pending-free", finding.Warning, finding.Numbers{"pending_free_bytes": float64(f.PendingFreeBytes)},
			fmt.Sprintf("%s is freed but waiting on other streams (record_stream); it cannot be reused until those streams catch up.", B(f.PendingFreeBytes)),
			"Synchronise the consuming streams sooner, or avoid record_stream on large tensors."), &finding.Ref{View: "state", Device: dev})
	}
	if f.AllocatedBytes > 0 && float64(f.RoundingWasteBytes) > roundingWasteShare*float64(f.AllocatedBytes) {
		out.add(finding.New("rounding-waste", finding.Info,
			finding.Numbers{"rounding_waste_bytes": float64(f.RoundingWasteBytes), "allocated_bytes": float64(f.AllocatedBytes)},
			fmt.Sprintf("%s of allocated blocks is rounding (blocks larger than requested).", B(f.RoundingWasteBytes)),
			"Many odd-sized tensors or roundup_power2_divisions cause it; pad shapes to multiples of 512 bytes."), &finding.Ref{View: "state", Device: dev})
	}
}

// categoryFindings names a category that dominates the peak (activations,
// optimizer state, memory allocated before recording). It needs a peak
// with allocated bytes.
func (a *analyzer) categoryFindings(out *findingList) {
	res, B := a.res, units.Bytes
	p := res.Peak
	for _, c := range res.Categories {
		share := float64(c.Bytes) / float64(p.AllocatedBytes)
		nums := finding.Numbers{"bytes": float64(c.Bytes), "share_ratio": share}
		switch {
		case (c.Category == CatActivation || c.Category == CatOptimizerState) && !a.memoryBound():
			// far below the device: cutting it changes nothing that fits
		case c.Category == CatActivation && share > dominantShare:
			out.add(finding.New("activations-dominate", finding.Info, nums,
				fmt.Sprintf("Activations are %s of the peak (%s).", units.Percent(share), B(c.Bytes)),
				"Activation checkpointing, a smaller micro-batch or sequence, or bf16 autocast cut them most."), a.peakRef())
		case c.Category == CatOptimizerState && share > dominantShare:
			out.add(finding.New("optimizer-dominates", finding.Info, nums,
				fmt.Sprintf("Optimizer state is %s of the peak (%s).", units.Percent(share), B(c.Bytes)),
				"Shard it (ZeRO-1/FSDP), use a lighter optimizer (8-bit Adam, Adafactor), or offload it."), a.peakRef())
		case c.Category == CatBeforeRecording && share > beforeRecordingHigh && res.HasHistory && a.o.Run != nil:
			// a window's history begins with the window: what earlier
			// steps left is alive from before it
			out.add(finding.New("before-recording", finding.Info, nums,
				fmt.Sprintf("%s of the peak (%s) was allocated before this window's history began, in steps ptscope run recorded without history, so its origin is unknown (blocks allocated in an earlier window keep their stacks).", units.Percent(share), B(c.Bytes)),
				"Rerun with --record-steps naming the steps that allocate it, or --record-steps all (stacks in every step slow a CPU-bound run by up to a quarter)."), a.peakRef())
		case c.Category == CatBeforeRecording && share > beforeRecordingHigh && res.HasHistory:
			out.add(finding.New("before-recording", finding.Info, nums,
				fmt.Sprintf("%s of the peak (%s) was allocated before recording started, so its origin is unknown.", units.Percent(share), B(c.Bytes)),
				"Call _record_memory_history before building the model (ptscope run does)."), a.peakRef())
		}
	}
}

// noStackFindings reports a large share of the peak without frames: made
// on autograd's threads (no Python frames), or in a step ptscope run
// recorded without stacks (its windows). It needs a peak with allocated
// bytes.
func (a *analyzer) noStackFindings(out *findingList) {
	res, B := a.res, units.Bytes
	p := res.Peak
	var noStack, unstacked int64
	for k, al := range a.live {
		spillmem.PollSparse(a.r.arena, k)
		if al.Origin == FromTrace && len(a.s.Stacks[al.Stack]) == 0 {
			noStack += al.Size
			if a.o.StackWindows != nil && !a.stacked(al) {
				unstacked += al.Size
			}
		}
	}
	share := float64(noStack) / float64(p.AllocatedBytes)
	if share <= noStackShare {
		return
	}
	nums := finding.Numbers{"bytes": float64(noStack), "share_ratio": share, "unstacked_step_bytes": float64(unstacked)}
	if 2*unstacked > noStack {
		step := "the peak's step"
		rec := "Rerun with --record-steps all, or with --record-steps N for the 0-based step that peaks, to record its stacks."
		if p.Step >= 0 {
			step = res.Steps[p.Step].Name
			if n, ok := res.Steps[p.Step].RunStep(); ok {
				rec = fmt.Sprintf("Rerun with --record-steps %d (the peak's step) or --record-steps all to record its stacks.", n)
			}
		}
		out.add(finding.New("no-stacks", finding.Info, nums,
			fmt.Sprintf("%s of the peak (%s) has no stack: %s of it was allocated in steps that ptscope run recorded without stacks (it records them in windows of steps; the peak is in %s). The module paths say where.",
				units.Percent(share), B(noStack), B(unstacked), step), rec), a.peakRef())
		return
	}
	out.add(finding.New("no-stacks", finding.Info, nums,
		fmt.Sprintf("%s of the peak (%s) has no stack: backward-pass allocations run on autograd threads without Python frames.", units.Percent(share), B(noStack)),
		"Record with stacks=\"all\" (ptscope run --stacks all) to see them."), a.peakRef())
}

// precisionFindings reports fp32 compute: parameters nearly all fp32
// (fp32ParamShare) and forward without autocast, outside FSDP.
func (a *analyzer) precisionFindings(out *findingList) {
	B := units.Bytes
	pr := a.o.Precision
	if pr == nil || pr.Autocast || pr.FSDP {
		return
	}
	var total int64
	for _, b := range pr.ParameterBytesByDtype {
		total += b
	}
	if fp32 := pr.ParameterBytesByDtype["float32"]; total > 0 && float64(fp32) >= fp32ParamShare*float64(total) {
		act := a.res.bytesAt(CatActivation)
		out.add(finding.New("fp32-compute", finding.Warning,
			finding.Numbers{"fp32_parameter_bytes": float64(fp32), "parameter_bytes": float64(total), "activation_bytes": float64(act)},
			fmt.Sprintf("Parameters are fp32 (%s) and forward ran without autocast, so activations (%s at the peak) and matrix products are fp32 too.", B(fp32), B(act)),
			"Wrap forward and loss in torch.autocast(\"cuda\", dtype=torch.bfloat16): it about halves activation memory and runs on tensor cores (parameters, gradients and optimizer state stay fp32)."),
			a.peakRef())
	}
}

// coverageFindings says where the history misses what matters: the run's
// peak outside the recorded windows or before the oldest entry kept, and
// a truncated trace.
func (a *analyzer) coverageFindings(out *findingList) {
	res, B := a.res, units.Bytes
	p := res.Peak
	if run := a.o.Run; run != nil {
		if fd, ok := outsideWindows(res, run); ok {
			out.add(fd, a.peakRef())
		}
	} else if pm := p.ProcessMaxAllocatedBytes; pm > 0 && res.HasHistory && float64(p.AllocatedBytes) < (1-peakMissedShare)*float64(pm) {
		short := float64(pm-p.AllocatedBytes) / float64(pm)
		out.add(finding.New("peak-not-in-trace", finding.Warning,
			finding.Numbers{"process_max_allocated_bytes": float64(pm), "allocated_bytes": float64(p.AllocatedBytes), "short_ratio": short},
			fmt.Sprintf("The process's max_memory_allocated was %s by this snapshot's last entry, but its history peaks at %s (%s less): the run's peak happened before the oldest entry it kept, so what was alive then is not here.",
				B(pm), B(p.AllocatedBytes), units.Percent(short)),
			"Raise the history ring (ptscope run --max-entries), or take a snapshot after the step that peaks (--snapshot-at step:N)."), a.peakRef())
	}
	if res.Truncated {
		out.add(finding.New("truncated", finding.Warning, finding.Numbers{"unmatched_frees": float64(res.UnmatchedFrees), "entries": float64(res.Entries)},
			"The trace is incomplete: "+res.TruncationEvidence+".",
			"Raise max_entries (ptscope run --max-entries) or record a shorter window."), &finding.Ref{View: "timeline", Device: a.device()})
	}
}

// outsideWindows is the finding of a run recorded in stack windows whose
// own peak (torch's max_memory_allocated) is above the peak of the window
// snapshot analysed, the highest of them, by more than windowMissedShare:
// what was alive at the run's peak is in no snapshot.
func outsideWindows(res *Result, run *Run) (finding.Finding, bool) {
	pm, got := run.MaxAllocatedBytes, res.Peak.AllocatedBytes
	if pm <= 0 || !res.HasHistory || float64(got) >= (1-windowMissedShare)*float64(pm) {
		return finding.Finding{}, false
	}
	B := units.Bytes
	short := float64(pm-got) / float64(pm)
	nums := finding.Numbers{"process_max_allocated_bytes": float64(pm), "allocated_bytes": float64(got), "short_ratio": short}
	when, rec := "", "Rerun with --record-steps all to record every step's stacks (it slows a CPU-bound run)."
	if k := run.MaxAllocatedStep; k >= 0 && k < len(res.Steps) {
		nums["step"] = float64(k)
		when = " in " + res.Steps[k].Name
		if n, ok := res.Steps[k].RunStep(); ok {
			rec = fmt.Sprintf("Rerun with --record-steps %d to record the step that peaks with its stacks.", n)
		}
	}
	return finding.New("peak-outside-windows", finding.Warning, nums,
		fmt.Sprintf("The run peaked at %s%s (torch's max_memory_allocated), outside the steps ptscope run recorded: the highest window, %s, peaks at %s (%s less), so what was alive at the run's peak is not in any snapshot.",
			B(pm), when, run.Snapshot, B(got), units.Percent(short)), rec), true
}

// OOMCount is how many out-of-memory errors r tells of: its OOMs, or, in
// a run recorded in windows whose view holds none, those the OOM observer
// counted (OOMsOutsideView).
func (r *Result) OOMCount() int {
	if len(r.OOMs) > 0 {
		return len(r.OOMs)
	}
	return r.OOMsOutsideView
}

// oomElsewhere is the finding of a run recorded in windows that ran out of
// memory where the view at the peak is another snapshot (Run.OOMElsewhere):
// the program caught the error and went on, or the snapshot taken at the
// error could not be written or read. limit is the process's own limit
// (Options.AllowedBytes), 0 when it set none.
func oomElsewhere(res *Result, run *Run, limit int64) (finding.Finding, *finding.Ref) {
	B, x := units.Bytes, run.OOMElsewhere
	nums := finding.Numbers{"requested_bytes": float64(x.RequestedBytes), "device_free_bytes": float64(x.DeviceFreeBytes),
		"count": float64(x.Count)}
	ref := &finding.Ref{View: "timeline", Device: finding.Int(res.Device)}
	where, k := "", -1
	for i, st := range res.Steps {
		if n, ok := st.RunStep(); ok && n == x.Step {
			where, k = " in "+st.Name, i
			if x.Phase != "" && x.Phase != PhaseUnknown.String() {
				where = " in the " + x.Phase + " of " + st.Name
			}
			nums["step"] = float64(i)
			ref.Step = finding.Int(i)
			break
		}
	}
	what := fmt.Sprintf("asking %s with %s free on the device", B(x.RequestedBytes), B(x.DeviceFreeBytes))
	if limit > 0 {
		what = fmt.Sprintf("asking %s under the process's limit of %s", B(x.RequestedBytes), B(limit))
		nums["allowed_bytes"] = float64(limit)
	}
	if x.Caught {
		times := "ran out of GPU memory"
		if x.Count > 1 {
			times = fmt.Sprintf("ran out of GPU memory %d times", x.Count)
		}
		state := fmt.Sprintf("%s holds the state at that error", x.Snapshot)
		rec := fmt.Sprintf("ptscope analyze %s shows what was alive when it ran out.", x.Path)
		if x.SnapshotError != "" {
			state, rec = "the state at that error is unknown ("+x.SnapshotError+")", ""
		}
		return finding.New("oom-caught", finding.Info, nums,
			fmt.Sprintf("The program %s and went on (it caught the error, as a batch-size finder does): the first%s, %s. The view is the run's peak, in %s; %s.",
				times, where, what, run.Snapshot, state), rec), ref
	}
	return finding.New("oom-no-snapshot", finding.Warning, nums,
		fmt.Sprintf("The run ran out of GPU memory%s, %s, but the snapshot taken at the error %s: the state it failed in is unknown. The view is the highest window's, %s.",
			where, what, x.SnapshotError, run.Snapshot), recordOOMStep(res, k)), ref
}

// recordOOMStep recommends recording step k of res.Steps, in which a run
// recorded in windows ran out of memory, with its history and stacks:
// --record-steps with its number, or all when it has none (k < 0).
func recordOOMStep(res *Result, k int) string {
	if k >= 0 && k < len(res.Steps) {
		if n, ok := res.Steps[k].RunStep(); ok {
			return fmt.Sprintf("Rerun with --record-steps %d to record the step that runs out of memory with its history and stacks.", n)
		}
	}
	return "Rerun with --record-steps all to record the step that runs out of memory with its history and stacks."
}
