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

// findings applies the plugin's seven rules and the checklist. Every
// finding carries the numbers it rests on and a reference into a view; its
// severity is proportional to its cost (costSeverity).
func findings(fa *Facts, r *Rank) []finding.Finding {
	out := []finding.Finding{}
	add := func(id string, sev finding.Severity, view string, nums finding.Numbers, msg, rec string) *finding.Finding {
		out = append(out, finding.Finding{ID: id, Severity: sev, Numbers: nums, Message: msg, Recommendation: rec, At: &finding.Ref{View: view}})
		return &out[len(out)-1]
	}
	avg := r.AverageStepNS
	total := avg * int64(len(r.Steps))
	if fa.incomplete() {
		// nothing of the training was recorded: no verdict on the GPU
		add("incomplete-trace", finding.Warning, "", finding.Numbers{"events": float64(fa.events)},
			fmt.Sprintf("The trace holds no operator and no kernel launch (%d events): the profiler recorded none of the training, so ptscope judges nothing here.", fa.events),
			"Profile steps the job reaches: schedule(wait=1, warmup=1, active=3) records steps 3 to 5, so the job must run 5 steps or more; with ptscope run --trace, run more steps than the schedule's wait and warm-up.")
		return out
	}

	// 1. data loading (the plugin: > 5% of the step). The share is the
	// DataLoader time that no GPU work hides; a loader hidden behind queued
	// GPU work is reported as info, since it becomes the bottleneck once GPU
	// work gets faster.
	dlRec := "Set num_workers > 0 (with persistent_workers=True and prefetch_factor) on the DataLoader, keep pin_memory=True, and move slow per-sample work out of __getitem__."
	dlNums := finding.Numbers{"dataloader_ratio": r.DataLoaderRatio, "host_dataloader_ratio": r.HostDataLoaderRatio,
		"dataloader_ns": float64(r.AverageBreakdown.DataLoaderNS)}
	if dl := r.DataLoaderRatio; dl > MaxDataLoaderShare {
		add("dataloader", costSeverity(dl), "steps", dlNums,
			fmt.Sprintf("The GPU waits for input data %s of the step time (%s per step in the DataLoader with nothing else running).", pct(dl), units.Duration(r.AverageBreakdown.DataLoaderNS)), dlRec)
	} else if h := r.HostDataLoaderRatio; h > 0.10 {
		add("dataloader", finding.Info, "steps", dlNums,
			fmt.Sprintf("The DataLoader takes %s of the host step time (%s per step), but the GPU stays busy with queued work meanwhile: it costs %s of the step now, and becomes the bottleneck once GPU work gets faster.",
				pct(h), units.Duration(int64(h*float64(r.AverageHostStepNS))), pct(r.DataLoaderRatio)), dlRec)
	}
	// 2. DataParallel on several devices
	if fa.dataParallel && len(r.GPUs) > 1 {
		add("use-ddp", finding.Warning, "operators", finding.Numbers{"devices": float64(len(r.GPUs))},
			fmt.Sprintf("This run uses DataParallel on %d GPUs: one process drives them all and copies the model to each every step.", len(r.GPUs)),
			"Use DistributedDataParallel (one process per GPU, torchrun) instead of DataParallel.")
	}
	// 3. DDP with a non-NCCL backend: only with more than one rank (at
	// world size 1 even NCCL launches no kernels) and only on evidence: the
	// backend distributedInfo names, or gloo collectives.
	if fa.ddp && r.Comm.Kernels == 0 && cudaCapable(fa.meta) {
		be := strings.ToLower(r.Backend)
		if (be != "" && !strings.Contains(be, "nccl") && r.WorldSize > 1) || (be == "" && fa.gloo) {
			nm := "gloo"
			if be != "" {
				nm = r.Backend
			}
			add("use-nccl", finding.Warning, "comm", finding.Numbers{"world_size": float64(r.WorldSize)},
				fmt.Sprintf("DistributedDataParallel communicates through %s, not NCCL, on NVIDIA GPUs.", nm),
				"The NCCL backend is the fastest for DDP on NVIDIA GPUs: init_process_group(backend=\"nccl\").")
		}
	}
	// 4. communication the compute does not hide (the breakdown's
	// communication part: kernels have priority)
	if c := share(r.AverageBreakdown.CommunicationNS, avg); c > 0.05 {
		rec := "Reduce communication: gradient accumulation (no_sync), a larger batch, or fewer/larger collectives."
		if r.Comm.OverlapRatio < 0.5 {
			rec = "Overlap communication with compute (DDP bucket_cap_mb and gradient_as_bucket_view, FSDP forward/backward prefetch), or reduce it (gradient accumulation with no_sync)."
		}
		add("communication", costSeverity(c), "comm", finding.Numbers{"communication_ratio": c, "overlap_ratio": r.Comm.OverlapRatio, "communication_ns": float64(r.AverageBreakdown.CommunicationNS)},
			fmt.Sprintf("Communication that no compute hides takes %s of the step (%s per step); %s of the communication kernels' time overlaps compute.", pct(c), units.Duration(r.AverageBreakdown.CommunicationNS), pct(r.Comm.OverlapRatio)), rec)
	}
	// 5. low utilisation (the plugin: < 50%; the checklist: > 80% is good)
	// When the same run's unprofiled steps are measured (a bundle) and the
	// profiler slowed the steps, the host wait it shows is partly the
	// profiler's: the severity follows the utilisation at the unprofiled
	// step time, which the message gives too.
	util, unprofiled := r.GPUUtilizationRatio, ""
	if o := r.Overhead; o != nil && o.SlowdownRatio >= 0.10 && o.UnprofiledStepNS > 0 && len(r.Steps) > 0 && r.Idle.HostWaitNS > r.Idle.CommunicationNS {
		util = min(1, float64(r.Idle.ComputeNS)/float64(len(r.Steps))/float64(o.UnprofiledStepNS))
		unprofiled = fmt.Sprintf(" The profiler slowed the steps by %s: at the unprofiled step time (%s) the GPU would compute about %s of the time.",
			pct(o.SlowdownRatio), units.Duration(o.UnprofiledStepNS), pct(util))
	}
	if len(r.GPUs) > 0 && r.PrimaryDevice >= 0 && r.GPUUtilizationRatio < GoodGPUUtil {
		sev := finding.Warning
		switch {
		case util < 0.5:
			sev = finding.Critical
		case util >= GoodGPUUtil:
			sev = finding.Info
		}
		i := r.Idle
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
		var desc []string
		best := 0
		for k, p := range parts {
			if p.ns > 0 {
				desc = append(desc, fmt.Sprintf("%s %s", pct(share(p.ns, i.SpanNS)), p.name))
			}
			if p.ns > parts[best].ns {
				best = k
			}
		}
		msg := fmt.Sprintf("GPU %d runs compute kernels %s of the time; it is idle %s", r.PrimaryDevice, pct(r.GPUUtilizationRatio), pct(i.IdleRatio))
		if len(desc) > 0 {
			msg += " (" + strings.Join(desc, ", ") + ")"
		}
		f := add("low-gpu-utilization", sev, "idle", finding.Numbers{"gpu_utilization_ratio": r.GPUUtilizationRatio, "idle_ratio": i.IdleRatio,
			"host_wait_ns": float64(i.HostWaitNS), "communication_wait_ns": float64(i.CommunicationNS), "copy_wait_ns": float64(i.CopyNS),
			"kernel_wait_ns": float64(i.KernelWaitNS), "other_wait_ns": float64(i.OtherNS), "unprofiled_utilization_ratio": util}, msg+"."+unprofiled, parts[best].rec)
		f.At.Device = finding.Int(r.PrimaryDevice)
	}
	// 6. tensor cores: the cost is half of the eligible kernels' share of
	// the step (tensor cores run those matmuls several times faster)
	major := 0
	if len(fa.meta.Devices) > 0 {
		major = fa.meta.Devices[0].ComputeMajor
	}
	if major >= 7 && r.TensorCoreRatio == 0 && r.TensorCoreEligibleRatio > 0 {
		rec := "Enable automatic mixed precision (torch.autocast with bfloat16 or float16)."
		if major >= 8 {
			rec = "fp32 matmuls run on CUDA cores: allow TF32 (torch.set_float32_matmul_precision(\"high\")) or use torch.autocast(dtype=torch.bfloat16)."
		}
		elig := r.TensorCoreEligibleRatio * share(r.AverageBreakdown.KernelNS, avg)
		add("no-tensor-cores", costSeverity(elig/2), "kernels", finding.Numbers{"tensor_core_eligible_ratio": r.TensorCoreEligibleRatio, "eligible_step_ratio": elig},
			fmt.Sprintf("No kernel uses tensor cores, yet %s of kernel time (%s of the step) is launched by tensor-core eligible operators (matmul, linear, conv).", pct(r.TensorCoreEligibleRatio), pct(elig)), rec)
	}
	// 7. memory near capacity
	for _, d := range r.Memory.Devices {
		if d.IsGPU && d.CapacityBytes > 0 && float64(d.PeakAllocatedBytes) > 0.9*float64(d.CapacityBytes) {
			f := add("memory-near-capacity", finding.Warning, "memory", finding.Numbers{"peak_allocated_bytes": float64(d.PeakAllocatedBytes), "capacity_bytes": float64(d.CapacityBytes),
				"peak_ratio": share(d.PeakAllocatedBytes, d.CapacityBytes)},
				fmt.Sprintf("Allocated memory peaks at %s of %s's %s: a longer sequence or a larger batch will run out of memory.",
					pct(share(d.PeakAllocatedBytes, d.CapacityBytes)), d.Device, units.Bytes(d.CapacityBytes)),
				"Use activation checkpointing or mixed precision, or a smaller batch; ptscope analyze on a memory snapshot shows what fills it.")
			f.At.Device, f.At.TimeNS = finding.Int(d.DeviceID), finding.Int64(d.PeakAllocatedTimeNS)
			break
		}
	}
	// the checklist
	if len(r.Steps) > 1 && r.StepTimeVariationRatio > MaxStepVariation && r.SlowestStep >= 0 {
		// the cost: time lost to steps slower than the median one
		cost := share(avg-r.MedianStepNS, avg)
		sl := r.Steps[r.SlowestStep]
		f := add("step-time-variation", costSeverity(cost), "steps", finding.Numbers{"step_time_variation_ratio": r.StepTimeVariationRatio,
			"median_step_ns": float64(r.MedianStepNS), "slowest_step_ns": float64(sl.DurationNS), "cost_ratio": max(cost, 0)},
			fmt.Sprintf("Step time varies by %s (stddev/mean over %d steps); the slowest, %s, takes %s against a median of %s.",
				pct(r.StepTimeVariationRatio), len(r.Steps), sl.Name, units.Duration(sl.DurationNS), units.Duration(r.MedianStepNS)),
			"Look at the slowest step: data loading stalls, synchronisations, garbage collection, recompilation, or the profiler's own work (the first and last profiled steps).")
		f.At.Step = finding.Int(sl.Number)
	}
	if o := share(r.AveragePhases.OptimizerNS, avg); o > MaxOptimizerShare {
		add("optimizer", costSeverity(o/2), "steps", finding.Numbers{"optimizer_ratio": o, "optimizer_ns": float64(r.AveragePhases.OptimizerNS)},
			fmt.Sprintf("The optimizer takes %s of the step (%s per step).", pct(o), units.Duration(r.AveragePhases.OptimizerNS)),
			"Use a fused or foreach optimizer (e.g. torch.optim.AdamW(fused=True)) and zero_grad(set_to_none=True).")
	}
	if l := r.Launch; l.Kernels > 1000 && share(int64(l.TinyKernels), int64(l.Kernels)) > 0.5 && r.Idle.HostWaitNS > r.Idle.ComputeNS/10 {
		hw := share(r.Idle.HostWaitNS, r.Idle.SpanNS)
		add("tiny-kernels", costSeverity(hw), "kernels", finding.Numbers{"tiny_kernel_ratio": share(int64(l.TinyKernels), int64(l.Kernels)), "kernels": float64(l.Kernels), "host_wait_ratio": hw},
			fmt.Sprintf("%s of %d kernels run under 10 us, and the GPU waits for the host to launch work %s of the time.", pct(share(int64(l.TinyKernels), int64(l.Kernels))), l.Kernels, pct(hw)),
			"Fuse small operations (torch.compile) or capture the step with CUDA graphs to cut launch overhead.")
	}
	var pageable int
	var pageableNS int64
	for _, c := range r.Copies {
		if c.Pageable && (c.Direction == "HtoD" || c.Direction == "DtoH") {
			pageable += c.Calls
			pageableNS += c.TotalNS
		}
	}
	if pageable > 0 {
		c := share(pageableNS, total)
		add("pageable-copies", costSeverity(c), "idle", finding.Numbers{"copies": float64(pageable), "copy_ns": float64(pageableNS), "copy_ratio": c},
			fmt.Sprintf("%d host copies (%s, %s of the steps' time) use pageable memory, which is slower and synchronous.", pageable, units.Duration(pageableNS), pct(c)),
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
		c := share(syncNS, total)
		add("synchronizations", costSeverity(c), "idle", finding.Numbers{"syncs": float64(syncN), "sync_ns": float64(syncNS), "sync_ratio": c},
			fmt.Sprintf("%d host-device synchronisations take %s (%s of the steps' time).", syncN, units.Duration(syncNS), pct(c)),
			"Avoid .item(), .cpu(), print(tensor) and torch.cuda.synchronize() inside the step.")
	}
	if grow, ok := memoryGrowth(r.Steps); ok {
		add("memory-growth", finding.Warning, "memory", finding.Numbers{"growth_bytes": float64(grow)},
			fmt.Sprintf("Allocated GPU memory at step start grows every step (%s in all).", units.Bytes(grow)),
			"Something keeps tensors alive across steps: accumulating the loss without .item()/.detach(), lists of outputs, or caches. Check with ptscope analyze on a memory snapshot.")
	}
	if f, ok := overheadFinding(r); ok {
		out = append(out, f)
	}
	if len(r.Warnings) > 0 {
		add("damaged-trace", finding.Info, "", finding.Numbers{"warnings": float64(len(r.Warnings))},
			"The trace was damaged or truncated; numbers cover what could be read.", "")
	}
	finding.Sort(out)
	return out
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
