package perf

import (
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/kineto"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/units"
)

// Thresholds of the checklist (the plugin's rules keep their own).
const (
	GoodGPUUtil        = 0.80 // GPU utilisation above this is good
	MaxStepVariation   = 0.10 // step time variation (stddev/mean)
	MaxDataLoaderShare = 0.05 // exposed DataLoader share of the step (the plugin's rule 1)
	MaxOptimizerShare  = 0.15 // optimizer share of the step
)

// costSeverity grades a finding by what it costs: the share of step time it
// wastes (or that fixing it would save). Under 5% is info, from 5% a
// warning, from 25% critical.
func costSeverity(cost float64) finding.Severity {
	switch {
	case cost >= 0.25:
		return finding.Critical
	case cost >= 0.05:
		return finding.Warning
	}
	return finding.Info
}

func pct(x float64) string { return units.Percent(x) }

func share(part, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(part) / float64(total)
}

// checks collects a rank's findings in the order the rules run
// (finding.Sort is stable, so that order breaks ties of severity and id),
// with what every rule reads.
type checks struct {
	fa    *Facts
	r     *Rank
	avg   int64 // average step time
	total int64 // the steps' time: avg times the steps
	out   []finding.Finding
}

// add appends a finding pointing at view and returns it, for the caller
// to refine its reference before the next add.
func (c *checks) add(id string, sev finding.Severity, view string, nums finding.Numbers, msg, rec string) *finding.Finding {
	c.out = append(c.out, finding.Finding{ID: id, Severity: sev, Numbers: nums, Message: msg, Recommendation: rec, At: &finding.Ref{View: view}})
	return &c.out[len(c.out)-1]
}

// findings applies the plugin's seven rules and the checklist. Every
// finding carries the numbers it rests on and a reference into a view; its
// severity is proportional to its cost (costSeverity).
func findings(fa *Facts, r *Rank) []finding.Finding {
	c := &checks{fa: fa, r: r, avg: r.AverageStepNS, out: []finding.Finding{}}
	c.total = c.avg * int64(len(r.Steps))
	if fa.incomplete() {
		// nothing of the training was recorded: no verdict on the GPU
		c.add("incomplete-trace", finding.Warning, "", finding.Numbers{"events": float64(fa.events)},
			fmt.Sprintf("The trace holds no operator and no kernel launch (%d events): the profiler recorded none of the training, so ptscope judges nothing here.", fa.events),
			"Profile steps the job reaches: schedule(wait=1, warmup=1, active=3) records steps 3 to 5, so the job must run 5 steps or more; with ptscope run --trace, run more steps than the schedule's wait and warm-up.")
		return c.out
	}
	// the plugin's rules
	c.dataLoading()
	c.distributed()
	c.communication()
	c.utilization()
	c.tensorCores()
	c.memoryCapacity()
	// the checklist
	c.stepTime()
	c.hostOverhead()
	c.memoryGrowth()
	c.traceQuality()
	finding.Sort(c.out)
	return c.out
}

// dataLoading is rule 1 (the plugin: > 5% of the step). The share is the
// DataLoader time that no GPU work hides; a loader hidden behind queued
// GPU work is reported as info, since it becomes the bottleneck once GPU
// work gets faster.
func (c *checks) dataLoading() {
	r := c.r
	dlRec := "Set num_workers > 0 (with persistent_workers=True and prefetch_factor) on the DataLoader, keep pin_memory=True, and move slow per-sample work out of __getitem__."
	dlNums := finding.Numbers{"dataloader_ratio": r.DataLoaderRatio, "host_dataloader_ratio": r.HostDataLoaderRatio,
		"dataloader_ns": float64(r.AverageBreakdown.DataLoaderNS)}
	if dl := r.DataLoaderRatio; dl > MaxDataLoaderShare {
		c.add("dataloader", costSeverity(dl), "steps", dlNums,
			fmt.Sprintf("The GPU waits for input data %s of the step time (%s per step in the DataLoader with nothing else running).", pct(dl), units.Duration(r.AverageBreakdown.DataLoaderNS)), dlRec)
	} else if h := r.HostDataLoaderRatio; h > 0.10 {
		c.add("dataloader", finding.Info, "steps", dlNums,
			fmt.Sprintf("The DataLoader takes %s of the host step time (%s per step), but the GPU stays busy with queued work meanwhile: it costs %s of the step now, and becomes the bottleneck once GPU work gets faster.",
				pct(h), units.Duration(int64(h*float64(r.AverageHostStepNS))), pct(r.DataLoaderRatio)), dlRec)
	}
}

// distributed is rules 2 and 3: DataParallel on several devices, and DDP
// with a non-NCCL backend. The latter only with more than one rank (at
// world size 1 even NCCL launches no kernels) and only on evidence: the
// backend distributedInfo names, or gloo collectives.
func (c *checks) distributed() {
	fa, r := c.fa, c.r
	if fa.dataParallel && len(r.GPUs) > 1 {
		c.add("use-ddp", finding.Warning, "operators", finding.Numbers{"devices": float64(len(r.GPUs))},
			fmt.Sprintf("This run uses DataParallel on %d GPUs: one process drives them all and copies the model to each every step.", len(r.GPUs)),
			"Use DistributedDataParallel (one process per GPU, torchrun) instead of DataParallel.")
	}
	if fa.ddp && r.Comm.Kernels == 0 && cudaCapable(fa.meta) {
		be := strings.ToLower(r.Backend)
		if (be != "" && !strings.Contains(be, "nccl") && r.WorldSize > 1) || (be == "" && fa.gloo) {
			nm := "gloo"
			if be != "" {
				nm = r.Backend
			}
			c.add("use-nccl", finding.Warning, "comm", finding.Numbers{"world_size": float64(r.WorldSize)},
				fmt.Sprintf("DistributedDataParallel communicates through %s, not NCCL, on NVIDIA GPUs.", nm),
				"The NCCL backend is the fastest for DDP on NVIDIA GPUs: init_process_group(backend=\"nccl\").")
		}
	}
}

// communication is rule 4: communication the compute does not hide (the
// breakdown's communication part: kernels have priority).
func (c *checks) communication() {
	r := c.r
	if s := share(r.AverageBreakdown.CommunicationNS, c.avg); s > 0.05 {
		rec := "Reduce communication: gradient accumulation (no_sync), a larger batch, or fewer/larger collectives."
		if r.Comm.OverlapRatio < 0.5 {
			rec = "Overlap communication with compute (DDP bucket_cap_mb and gradient_as_bucket_view, FSDP forward/backward prefetch), or reduce it (gradient accumulation with no_sync)."
		}
		c.add("communication", costSeverity(s), "comm", finding.Numbers{"communication_ratio": s, "overlap_ratio": r.Comm.OverlapRatio, "communication_ns": float64(r.AverageBreakdown.CommunicationNS)},
			fmt.Sprintf("Communication that no compute hides takes %s of the step (%s per step); %s of the communication kernels' time overlaps compute.", pct(s), units.Duration(r.AverageBreakdown.CommunicationNS), pct(r.Comm.OverlapRatio)), rec)
	}
}

// utilization is rule 5: low GPU utilisation (the plugin: < 50%; the
// checklist: > 80% is good), with where the idle time goes and what to do
// about its largest part. When the same run's unprofiled steps are
// measured (a bundle) and the profiler slowed the steps, the host wait it
// shows is partly the profiler's: the severity follows the utilisation at
// the unprofiled step time, which the message gives too.
func (c *checks) utilization() {
	r := c.r
	util, unprofiled := r.GPUUtilizationRatio, ""
	if o := r.Overhead; o != nil && o.SlowdownRatio >= 0.10 && o.UnprofiledStepNS > 0 && len(r.Steps) > 0 && r.Idle.HostWaitNS > r.Idle.CommunicationNS {
		util = min(1, float64(r.Idle.ComputeNS)/float64(len(r.Steps))/float64(o.UnprofiledStepNS))
		unprofiled = fmt.Sprintf(" The profiler slowed the steps by %s: at the unprofiled step time (%s) the GPU would compute about %s of the time.",
			pct(o.SlowdownRatio), units.Duration(o.UnprofiledStepNS), pct(util))
	}
	if len(r.GPUs) == 0 || r.PrimaryDevice < 0 || r.GPUUtilizationRatio >= GoodGPUUtil {
		return
	}
	sev := finding.Warning
	switch {
	case util < 0.5:
		sev = finding.Critical
	case util >= GoodGPUUtil:
		sev = finding.Info
	}
	i := r.Idle
	desc, rec := idleParts(i)
	msg := fmt.Sprintf("GPU %d runs compute kernels %s of the time; it is idle %s", r.PrimaryDevice, pct(r.GPUUtilizationRatio), pct(i.IdleRatio))
	if len(desc) > 0 {
		msg += " (" + strings.Join(desc, ", ") + ")"
	}
	f := c.add("low-gpu-utilization", sev, "idle", finding.Numbers{"gpu_utilization_ratio": r.GPUUtilizationRatio, "idle_ratio": i.IdleRatio,
		"host_wait_ns": float64(i.HostWaitNS), "communication_wait_ns": float64(i.CommunicationNS), "copy_wait_ns": float64(i.CopyNS),
		"kernel_wait_ns": float64(i.KernelWaitNS), "other_wait_ns": float64(i.OtherNS), "unprofiled_utilization_ratio": util}, msg+"."+unprofiled, rec)
	f.At.Device = finding.Int(r.PrimaryDevice)
}

// idleParts describes where the GPU's idle time i goes, each part's share
// of the span ("12% waiting for the host to launch work"), and recommends
// what cuts the largest part.
func idleParts(i Idle) (desc []string, rec string) {
	parts := []struct {
		name string
		ns   int64
		rec  string
	}{
		{"waiting for the host to launch work", i.HostWaitNS, "The host does not enqueue work fast enough: look at the CPU exec and DataLoader parts of the steps, synchronisations and launch delays; fuse small operations (torch.compile) or capture the step with CUDA graphs; then increase the batch size."},
		{"in communication only", i.CommunicationNS, "Compute waits for communication: overlap it (DDP buckets, FSDP prefetch), or communicate less often (gradient accumulation)."},
		{"in copies only", i.CopyNS, "Copies stall compute: use pin_memory=True and non_blocking=True, and keep tensors on the GPU."},
		{"between back-to-back kernels", i.KernelWaitNS, "Many short gaps between kernels: fuse small operations (torch.compile) or capture the step with CUDA graphs."},
		{"waiting on other streams or events", i.OtherNS, "The GPU waits on events or other streams: look at synchronisations and stream dependencies."},
	}
	best := 0
	for k, p := range parts {
		if p.ns > 0 {
			desc = append(desc, fmt.Sprintf("%s %s", pct(share(p.ns, i.SpanNS)), p.name))
		}
		if p.ns > parts[best].ns {
			best = k
		}
	}
	return desc, parts[best].rec
}

// tensorCores is rule 6: no kernel on tensor cores although eligible
// operators launch some. The cost is half of the eligible kernels' share
// of the step (tensor cores run those matmuls several times faster).
func (c *checks) tensorCores() {
	fa, r := c.fa, c.r
	major := 0
	if len(fa.meta.Devices) > 0 {
		major = fa.meta.Devices[0].ComputeMajor
	}
	if major >= 7 && r.TensorCoreRatio == 0 && r.TensorCoreEligibleRatio > 0 {
		rec := "Enable automatic mixed precision (torch.autocast with bfloat16 or float16)."
		if major >= 8 {
			rec = "fp32 matmuls run on CUDA cores: allow TF32 (torch.set_float32_matmul_precision(\"high\")) or use torch.autocast(dtype=torch.bfloat16)."
		}
		elig := r.TensorCoreEligibleRatio * share(r.AverageBreakdown.KernelNS, c.avg)
		c.add("no-tensor-cores", costSeverity(elig/2), "kernels", finding.Numbers{"tensor_core_eligible_ratio": r.TensorCoreEligibleRatio, "eligible_step_ratio": elig},
			fmt.Sprintf("No kernel uses tensor cores, yet %s of kernel time (%s of the step) is launched by tensor-core eligible operators (matmul, linear, conv).", pct(r.TensorCoreEligibleRatio), pct(elig)), rec)
	}
}

// memoryCapacity is rule 7: the first GPU whose allocated memory peaks
// above 90% of its capacity.
func (c *checks) memoryCapacity() {
	for _, d := range c.r.Memory.Devices {
		if d.IsGPU && d.CapacityBytes > 0 && float64(d.PeakAllocatedBytes) > 0.9*float64(d.CapacityBytes) {
			f := c.add("memory-near-capacity", finding.Warning, "memory", finding.Numbers{"peak_allocated_bytes": float64(d.PeakAllocatedBytes), "capacity_bytes": float64(d.CapacityBytes),
				"peak_ratio": share(d.PeakAllocatedBytes, d.CapacityBytes)},
				fmt.Sprintf("Allocated memory peaks at %s of %s's %s: a longer sequence or a larger batch will run out of memory.",
					pct(share(d.PeakAllocatedBytes, d.CapacityBytes)), d.Device, units.Bytes(d.CapacityBytes)),
				"Use activation checkpointing or mixed precision, or a smaller batch; ptscope analyze on a memory snapshot shows what fills it.")
			f.At.Device, f.At.TimeNS = finding.Int(d.DeviceID), finding.Int64(d.PeakAllocatedTimeNS)
			break
		}
	}
}

// stepTime checks the steps' time: how much it varies (the cost: time lost
// to steps slower than the median one) and the optimizer's share.
func (c *checks) stepTime() {
	r, avg := c.r, c.avg
	if len(r.Steps) > 1 && r.StepTimeVariationRatio > MaxStepVariation && r.SlowestStep >= 0 {
		cost := share(avg-r.MedianStepNS, avg)
		sl := r.Steps[r.SlowestStep]
		f := c.add("step-time-variation", costSeverity(cost), "steps", finding.Numbers{"step_time_variation_ratio": r.StepTimeVariationRatio,
			"median_step_ns": float64(r.MedianStepNS), "slowest_step_ns": float64(sl.DurationNS), "cost_ratio": max(cost, 0)},
			fmt.Sprintf("Step time varies by %s (stddev/mean over %d steps); the slowest, %s, takes %s against a median of %s.",
				pct(r.StepTimeVariationRatio), len(r.Steps), sl.Name, units.Duration(sl.DurationNS), units.Duration(r.MedianStepNS)),
			"Look at the slowest step: data loading stalls, synchronisations, garbage collection, recompilation, or the profiler's own work (the first and last profiled steps).")
		f.At.Step = finding.Int(sl.Number)
	}
	if o := share(r.AveragePhases.OptimizerNS, avg); o > MaxOptimizerShare {
		c.add("optimizer", costSeverity(o/2), "steps", finding.Numbers{"optimizer_ratio": o, "optimizer_ns": float64(r.AveragePhases.OptimizerNS)},
			fmt.Sprintf("The optimizer takes %s of the step (%s per step).", pct(o), units.Duration(r.AveragePhases.OptimizerNS)),
			"Use a fused or foreach optimizer (e.g. torch.optim.AdamW(fused=True)) and zero_grad(set_to_none=True).")
	}
}

// hostOverhead checks what the host makes the GPU wait for: many tiny
// kernels, copies from pageable memory, host-device synchronisations.
func (c *checks) hostOverhead() {
	r, total := c.r, c.total
	if l := r.Launch; l.Kernels > 1000 && share(int64(l.TinyKernels), int64(l.Kernels)) > 0.5 && r.Idle.HostWaitNS > r.Idle.ComputeNS/10 {
		hw := share(r.Idle.HostWaitNS, r.Idle.SpanNS)
		c.add("tiny-kernels", costSeverity(hw), "kernels", finding.Numbers{"tiny_kernel_ratio": share(int64(l.TinyKernels), int64(l.Kernels)), "kernels": float64(l.Kernels), "host_wait_ratio": hw},
			fmt.Sprintf("%s of %d kernels run under 10 us, and the GPU waits for the host to launch work %s of the time.", pct(share(int64(l.TinyKernels), int64(l.Kernels))), l.Kernels, pct(hw)),
			"Fuse small operations (torch.compile) or capture the step with CUDA graphs to cut launch overhead.")
	}
	var pageable int
	var pageableNS int64
	for _, cp := range r.Copies {
		if cp.Pageable && (cp.Direction == "HtoD" || cp.Direction == "DtoH") {
			pageable += cp.Calls
			pageableNS += cp.TotalNS
		}
	}
	if pageable > 0 {
		s := share(pageableNS, total)
		c.add("pageable-copies", costSeverity(s), "idle", finding.Numbers{"copies": float64(pageable), "copy_ns": float64(pageableNS), "copy_ratio": s},
			fmt.Sprintf("%d host copies (%s, %s of the steps' time) use pageable memory, which is slower and synchronous.", pageable, units.Duration(pageableNS), pct(s)),
			"Use pin_memory=True on the DataLoader and tensor.to(device, non_blocking=True).")
	}
	var syncN int
	var syncNS int64
	for _, s := range r.Syncs {
		if strings.Contains(s.Name, "Synchronize") || s.Name == "cudaMemcpy" {
			syncN += s.Calls
			syncNS += s.TotalNS
		}
	}
	if n := len(r.Steps); n > 0 && syncN > 2*n && share(syncNS, total) > 0.02 {
		s := share(syncNS, total)
		c.add("synchronizations", costSeverity(s), "idle", finding.Numbers{"syncs": float64(syncN), "sync_ns": float64(syncNS), "sync_ratio": s},
			fmt.Sprintf("%d host-device synchronisations take %s (%s of the steps' time).", syncN, units.Duration(syncNS), pct(s)),
			"Avoid .item(), .cpu(), print(tensor) and torch.cuda.synchronize() inside the step.")
	}
}

// memoryGrowth reports allocated GPU memory at step start that grows every
// step (memoryGrowth).
func (c *checks) memoryGrowth() {
	if grow, ok := memoryGrowth(c.r.Steps); ok {
		c.add("memory-growth", finding.Warning, "memory", finding.Numbers{"growth_bytes": float64(grow)},
			fmt.Sprintf("Allocated GPU memory at step start grows every step (%s in all).", units.Bytes(grow)),
			"Something keeps tensors alive across steps: accumulating the loss without .item()/.detach(), lists of outputs, or caches. Check with ptscope analyze on a memory snapshot.")
	}
}

// traceQuality says how far the trace itself can be trusted: the
// profiler's overhead (overheadFinding) and a damaged or truncated file.
func (c *checks) traceQuality() {
	if f, ok := overheadFinding(c.r); ok {
		c.out = append(c.out, f)
	}
	if len(c.r.Warnings) > 0 {
		c.add("damaged-trace", finding.Info, "", finding.Numbers{"warnings": float64(len(c.r.Warnings))},
			"The trace was damaged or truncated; numbers cover what could be read.", "")
	}
}

// incomplete reports a trace with no cpu_op and no launch: the profiler
// recorded no active step (a job that ended during the warm-up leaves
// such a file, a few kilobytes of metadata and stray GPU events).
func (f *Facts) incomplete() bool { return f.cpuOps == 0 && f.launches == 0 }

func cudaCapable(m kineto.Meta) bool {
	for _, d := range m.Devices {
		if d.ComputeMajor > 3 || (d.ComputeMajor == 3 && d.ComputeMinor >= 5) {
			return true
		}
	}
	return false
}

// memoryGrowth reports a strict rise of the allocated memory at step start
// over at least three steps, by more than 1 MiB in all.
func memoryGrowth(steps []Step) (int64, bool) {
	var v []int64
	for _, s := range steps {
		if s.StartAllocatedBytes >= 0 {
			v = append(v, s.StartAllocatedBytes)
		}
	}
	if len(v) < 3 {
		return 0, false
	}
	for i := 1; i < len(v); i++ {
		if v[i] <= v[i-1] {
			return 0, false
		}
	}
	grow := v[len(v)-1] - v[0]
	return grow, grow > 1<<20
}
