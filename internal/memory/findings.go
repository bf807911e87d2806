package memory

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/units"
)

// Finding is one diagnosis with a recommendation.
type Finding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"` // "info", "warning", "critical"
	Message  string `json:"message"`
}

// Finding thresholds (documented in docs/analyze.md).
const (
	minEfficiency       = 0.95      // allocated / reserved at the peak
	largeCachedFree     = 100 << 20 // cached free bytes at the end
	largePendingFree    = 100 << 20
	dominantShare       = 0.5  // a category above half of the peak
	nearCapacity        = 0.9  // peak reserved above 90% of the device
	beforeRecordingHigh = 0.3  // share of the peak allocated before recording
	noStackShare        = 0.25 // share of peak bytes without frames
	roundingWasteShare  = 0.05
	fp32ParamShare      = 0.9 // share of parameter bytes in fp32 for fp32-compute
)

// bytesAtPeak is what category c held at the peak.
func (a *Device) bytesAtPeak(c Category) int64 {
	for _, g := range a.CategoriesAtPeak {
		if g.Name == c.String() {
			return g.Bytes
		}
	}
	return 0
}

func findings(a *Device, o Options) []Finding {
	var out []Finding
	add := func(id, sev, format string, args ...any) {
		out = append(out, Finding{id, sev, fmt.Sprintf(format, args...)})
	}
	B := units.Bytes
	p := a.Peak
	f := a.FragmentationOut

	for _, x := range a.OOMs {
		if x.Verdict == "capacity" {
			add("oom-capacity", "critical", "Out of memory asking for %s with %s free on the device and %s cached: it truly did not fit. Reduce the batch or sequence, use activation checkpointing or mixed precision, or shard (FSDP/ZeRO).",
				B(x.RequestedBytes), B(x.DeviceFreeBytes), B(x.CachedFreeBytes))
		} else {
			add("oom-fragmentation", "critical", "Out of memory asking for %s although %s was free in total (%s on the device, %s cached): fragmentation. Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, or free large tensors earlier.",
				B(x.RequestedBytes), B(x.DeviceFreeBytes+x.CachedFreeBytes), B(x.DeviceFreeBytes), B(x.CachedFreeBytes))
		}
	}
	if o.DeviceMemory > 0 && p.ReservedBytes > 0 && float64(p.ReservedBytes) > nearCapacity*float64(o.DeviceMemory) {
		add("near-capacity", "warning", "Peak reserved %s is %s of the device's %s: little headroom; a longer sequence or a larger batch will go out of memory.",
			B(p.ReservedBytes), units.Percent(float64(p.ReservedBytes)/float64(o.DeviceMemory)), B(o.DeviceMemory))
	}
	if a.Pattern == "leak" && a.Leak != nil {
		where := ""
		if len(a.Leak.Stacks) > 0 && len(a.Leak.Stacks[0].Frames) > 0 {
			fr := a.Leak.Stacks[0].Frames[0]
			where = fmt.Sprintf(" Largest source: %s:%d %s.", TrimPath(fr.Filename), fr.Line, fr.Name)
		}
		add("leak", "critical", "Memory grows %s per step (%s over %d steps): tensors outlive their step, e.g. a loss kept with its graph (use loss.item()), a growing list or cache.%s",
			B(a.Leak.BytesPerStep), B(a.Leak.GrowthBytes), a.Leak.Steps, where)
	}
	if a.Pattern == "spike" {
		add("spike", "warning", "One step peaks well above the others: a larger batch, a longer sequence or an evaluation step. Bound the input size or checkpoint activations for the worst case.")
	}
	if p.ReservedAtPeakBytes > 0 && f.PeakRatio < minEfficiency && f.CachedAtPeakBytes > 64<<20 {
		add("low-efficiency", "warning", "At the peak only %s of the reserved memory held tensors (%s of %s); %s sat in cached free blocks. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True usually recovers most of it.",
			units.Percent(f.PeakRatio), B(p.AllocatedBytes), B(p.ReservedAtPeakBytes), B(f.CachedAtPeakBytes))
	}
	if f.CachedFreeBytes > largeCachedFree {
		add("large-cached-free", "info", "%s is cached in free blocks at the end (largest %s): fine for reuse, but other processes cannot use it; torch.cuda.empty_cache() returns it.",
			B(f.CachedFreeBytes), B(f.LargestFreeBytes))
	}
	if f.PendingFreeBytes > largePendingFree {
		add("pending-free", "warning", "%s is freed but waiting on other streams (record_stream); it cannot be reused until those streams catch up.", B(f.PendingFreeBytes))
	}
	if f.AllocatedBytes > 0 && float64(f.RoundingWasteBytes) > roundingWasteShare*float64(f.AllocatedBytes) {
		add("rounding-waste", "info", "%s of allocated blocks is rounding (blocks larger than requested); many odd-sized tensors or roundup_power2_divisions cause it.", B(f.RoundingWasteBytes))
	}
	if p.AllocatedBytes > 0 {
		for _, c := range a.CategoriesAtPeak {
			share := float64(c.Bytes) / float64(p.AllocatedBytes)
			switch {
			case c.Name == CatActivation.String() && share > dominantShare:
				add("activations-dominate", "info", "Activations are %s of the peak (%s): activation checkpointing, a smaller micro-batch or sequence, or bf16 autocast cut them most.", units.Percent(share), B(c.Bytes))
			case c.Name == CatOptimizerState.String() && share > dominantShare:
				add("optimizer-dominates", "info", "Optimizer state is %s of the peak (%s): shard it (ZeRO-1/FSDP), use a lighter optimizer (8-bit Adam, Adafactor), or offload it.", units.Percent(share), B(c.Bytes))
			case c.Name == CatBeforeRecording.String() && share > beforeRecordingHigh:
				add("before-recording", "info", "%s of the peak (%s) was allocated before recording started, so its origin is unknown: call _record_memory_history before building the model (ptscope run does).", units.Percent(share), B(c.Bytes))
			}
		}
		var noStack int64
		for _, al := range a.live {
			if al.Origin == FromTrace && al.Stack == 0 {
				noStack += al.Size
			}
		}
		if share := float64(noStack) / float64(p.AllocatedBytes); share > noStackShare {
			add("no-stacks", "info", "%s of the peak has no stack: backward-pass allocations run on autograd threads without Python frames; record with stacks=\"all\" (ptscope run --stacks all) to see them.", units.Percent(share))
		}
	}
	if pr := o.Precision; pr != nil && !pr.Autocast && !pr.FSDP {
		var total int64
		for _, b := range pr.ParameterBytesByDtype {
			total += b
		}
		if fp32 := pr.ParameterBytesByDtype["float32"]; total > 0 && float64(fp32) >= fp32ParamShare*float64(total) {
			add("fp32-compute", "warning", "Parameters are fp32 (%s) and forward ran without autocast, so activations (%s at the peak) and matrix products are fp32 too: torch.autocast(\"cuda\", dtype=torch.bfloat16) around forward and loss about halves activation memory and runs on tensor cores (parameters, gradients and optimizer state stay fp32).",
				B(fp32), B(a.bytesAtPeak(CatActivation)))
		}
	}
	if a.Truncated {
		add("truncated", "warning", "The trace is incomplete: %s. Raise max_entries (ptscope run --max-entries) or record a shorter window.", a.TruncationEvidence)
	}
	return out
}
