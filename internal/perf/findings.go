package perf

import (
	"fmt"
	"sort"
	"strings"
)

// Finding is one diagnosis with what to do about it.
type Finding struct {
	ID             string `json:"id"`
	Severity       string `json:"severity"` // "critical", "warning", "info"
	Message        string `json:"message"`
	Recommendation string `json:"recommendation,omitempty"`
}

// Thresholds of the checklist (the plugin's rules keep their own).
const (
	GoodGPUUtil        = 0.80 // GPU utilisation above this is good
	MaxStepVariation   = 0.10 // step time variation (stddev/mean)
	MaxDataLoaderShare = 0.10 // data loading share of the step
	MaxOptimizerShare  = 0.15 // optimizer share of the step
)

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func share(part, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(part) / float64(total)
}

// findings applies the plugin's seven rules and the checklist.
func findings(g *graph, r *Rank) []Finding {
	var out []Finding
	add := func(id, sev, msg, rec string) {
		out = append(out, Finding{ID: id, Severity: sev, Message: msg, Recommendation: rec})
	}
	avg := r.AverageStepNS
	// 1. data loading (plugin: > 5% of the step; checklist: < 10%). When the
	// GPU is the bottleneck, the device-aware breakdown hides the DataLoader
	// behind queued kernels, so the host-side share is checked too.
	dlRec := "Set num_workers > 0 (with persistent_workers=True and prefetch_factor) on the DataLoader, keep pin_memory=True, and move slow per-sample work out of __getitem__."
	if dl := r.DataLoaderRatio; dl > 0.05 {
		sev := "warning"
		if dl > MaxDataLoaderShare {
			sev = "critical"
		}
		add("dataloader", sev,
			fmt.Sprintf("This run has high time cost on input data loading: %s of the step time is in DataLoader.", pct(dl)), dlRec)
	} else if h := r.HostDataLoaderRatio; h > MaxDataLoaderShare {
		add("dataloader", "warning",
			fmt.Sprintf("DataLoader takes %s of the host step time (%s per step). The GPU is busy with queued work meanwhile, so it costs %s of the step now, and becomes the bottleneck once GPU work gets faster.",
				pct(h), fmtNS(int64(h*float64(hostAvg(r)))), pct(r.DataLoaderRatio)), dlRec)
	}
	names := map[string]bool{}
	for i := 0; i < g.ev.Len(); i++ {
		if isOp(g.ev.Kind[i]) {
			switch n := g.t.Name(i); n {
			case "DataParallel.forward", "DistributedDataParallel.forward":
				names[n] = true
			}
		}
	}
	// 2. DataParallel on several devices
	if names["DataParallel.forward"] && len(r.GPUs) > 1 {
		add("use_ddp", "warning", "This run uses DataParallel on several GPUs.",
			"Use DistributedDataParallel instead of DataParallel for multi-GPU training.")
	}
	// 3. DDP without NCCL
	if names["DistributedDataParallel.forward"] && r.Comm.Kernels == 0 {
		cc := false
		for _, d := range g.t.Meta.Devices {
			if d.ComputeMajor > 3 || (d.ComputeMajor == 3 && d.ComputeMinor >= 5) {
				cc = true
			}
		}
		if cc {
			add("use_nccl", "warning", "DistributedDataParallel runs without NCCL kernels.",
				"The NCCL backend is the fastest for DDP on NVIDIA GPUs: init_process_group(backend=\"nccl\").")
		}
	}
	// 4. communication
	if c := share(r.AverageBreakdown.CommunicationNS, avg); c > 0.1 {
		add("communication", "warning", fmt.Sprintf("This run has high time cost on communication: %s of the step time.", pct(c)),
			"Try gradient accumulation, a larger batch, gradient compression, or overlap (DDP bucket_cap_mb, FSDP prefetch).")
	}
	// 5. low utilisation (plugin: < 50%); checklist: > 80% is good
	var low []string
	for _, x := range r.GPUs {
		if x.UtilizationRatio < 0.5 {
			low = append(low, fmt.Sprint(x.Device))
		}
	}
	if len(low) > 0 {
		add("low_gpu_utilization", "critical", fmt.Sprintf("GPU %s has low utilization (%s of the step time runs kernels).", strings.Join(low, ", "), pct(r.GPUUtilizationRatio)),
			"Find what the GPU waits for (DataLoader, CPU ops, synchronisations, launch overhead below); then increase the batch size.")
	} else if len(r.GPUs) > 0 && r.GPUUtilizationRatio < GoodGPUUtil {
		add("gpu_utilization", "warning", fmt.Sprintf("GPU utilization is %s, below the %s target.", pct(r.GPUUtilizationRatio), pct(GoodGPUUtil)),
			"Reduce host-side gaps: see the idle-time split and launch delays.")
	}
	// 6. tensor cores
	major := 0
	if len(g.t.Meta.Devices) > 0 {
		major = g.t.Meta.Devices[0].ComputeMajor
	}
	if major >= 7 && r.TensorCoreRatio == 0 && r.TensorCoreEligibleRatio > 0 {
		rec := "Enable automatic mixed precision (torch.autocast with bfloat16 or float16)."
		if major >= 8 {
			rec = "fp32 matmuls run on CUDA cores: allow TF32 (torch.set_float32_matmul_precision(\"high\")) or use torch.autocast(dtype=torch.bfloat16)."
		}
		add("no_tensor_cores", "critical", fmt.Sprintf("No kernel uses tensor cores, yet %s of kernel time is launched by tensor-core eligible operators (matmul, linear, conv).", pct(r.TensorCoreEligibleRatio)), rec)
	}
	// 7. memory near capacity
	for _, d := range r.Memory.Devices {
		if d.IsGPU && d.CapacityBytes > 0 && float64(d.PeakAllocatedBytes) > 0.9*float64(d.CapacityBytes) {
			add("memory_limit", "warning", fmt.Sprintf("Device memory usage is at the limit of capacity (%s of %.1f GB on %s).",
				pct(share(d.PeakAllocatedBytes, d.CapacityBytes)), float64(d.CapacityBytes)/1e9, d.Device),
				"Use activation (gradient) checkpointing or automatic mixed precision, or a smaller batch.")
			break
		}
	}
	// checklist
	if len(r.Steps) > 1 && r.StepTimeVariationRatio > MaxStepVariation {
		add("step_time_variation", "warning", fmt.Sprintf("Step time varies by %s (stddev/mean over %d steps).", pct(r.StepTimeVariationRatio), len(r.Steps)),
			"Look at the slowest step: data loading stalls, synchronisations, garbage collection or recompilation.")
	}
	if o := share(r.AveragePhases.OptimizerNS, avg); o > MaxOptimizerShare {
		add("optimizer", "warning", fmt.Sprintf("The optimizer takes %s of the step.", pct(o)),
			"Use a fused or foreach optimizer (e.g. torch.optim.AdamW(fused=True)) and zero_grad(set_to_none=True).")
	}
	if l := r.Launch; l.Kernels > 1000 && share(int64(l.TinyKernels), int64(l.Kernels)) > 0.5 && r.Idle.HostWaitNS > r.Idle.BusyNS/10 {
		add("tiny_kernels", "warning", fmt.Sprintf("%s of %d kernels run under 10 us and the GPU often waits for the host to launch them.", pct(share(int64(l.TinyKernels), int64(l.Kernels))), l.Kernels),
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
		add("pageable_copies", "warning", fmt.Sprintf("%d host copies (%s) use pageable memory, which is slower and synchronous.", pageable, fmtNS(pageableNS)),
			"Use pin_memory=True on the DataLoader and tensor.to(device, non_blocking=True).")
	}
	if r.Comm.Kernels > 0 && r.Comm.OverlapRatio < 0.5 && share(r.Comm.ExposedNS, avg*int64(max(len(r.Steps), 1))) > 0.05 {
		add("exposed_communication", "warning", fmt.Sprintf("Only %s of communication time overlaps computation.", pct(r.Comm.OverlapRatio)),
			"Overlap communication with backward (DDP buckets, FSDP prefetch), or reduce it (gradient accumulation, compression).")
	}
	var syncN int
	var syncNS int64
	for _, s := range r.Syncs {
		if strings.Contains(s.Name, "Synchronize") || s.Name == "cudaMemcpy" {
			syncN += s.Calls
			syncNS += s.TotalNS
		}
	}
	if n := len(r.Steps); n > 0 && syncN > 2*n && share(syncNS, avg*int64(n)) > 0.02 {
		add("synchronizations", "warning", fmt.Sprintf("%d host-device synchronisations take %s.", syncN, fmtNS(syncNS)),
			"Avoid .item(), .cpu(), print(tensor) and torch.cuda.synchronize() inside the step.")
	}
	if grow, ok := memoryGrowth(r.Steps); ok {
		add("memory_growth", "warning", fmt.Sprintf("Allocated GPU memory at step start grows every step (%s in all).", fmtBytes(grow)),
			"Something keeps tensors alive across steps: accumulating the loss without .item()/.detach(), lists of outputs, or caches. Check with ptscope analyze on a memory snapshot.")
	}
	if len(r.Warnings) > 0 {
		add("damaged_trace", "info", "The trace was damaged or truncated; numbers cover what could be read.", "")
	}
	sevRank := map[string]int{"critical": 0, "warning": 1, "info": 2}
	sort.SliceStable(out, func(i, j int) bool { return sevRank[out[i].Severity] < sevRank[out[j].Severity] })
	if out == nil {
		out = []Finding{}
	}
	return out
}

func hostAvg(r *Rank) int64 {
	if len(r.Steps) == 0 {
		return 0
	}
	var t int64
	for _, s := range r.Steps {
		t += s.HostDurationNS
	}
	return t / int64(len(r.Steps))
}

func fmtNS(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%.1f us", float64(ns)/1e3)
	}
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

func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%d B", b)
	}
}
