package whatif

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/estimate"
)

// FromBundle reads what one rank of a ptscope run bundle measured.
func FromBundle(b *bundle.Bundle, r *bundle.Rank) *Run {
	info := &r.Info
	run := &Run{Source: r.Dir, Rank: r.Rank, Mode: b.Manifest.Mode, WorldSize: b.Manifest.WorldSize,
		DeviceName: info.DeviceName, DeviceMemoryBytes: info.DeviceTotalMemoryBytes,
		MaxAllocatedBytes: info.MaxAllocatedBytes, MaxReservedBytes: info.MaxReservedBytes, MaxDeviceUsedBytes: info.MaxDeviceUsedBytes}
	if run.Mode == "" {
		run.Mode = bundle.ModeCapture
	}
	if info.WorldSize != nil && *info.WorldSize > run.WorldSize {
		run.WorldSize = *info.WorldSize
	}
	if info.MemoryLimitBytes > 0 {
		run.DeviceMemoryBytes = info.MemoryLimitBytes
	}
	if r.OOM != nil && r.OOM.DeviceAllocatedBytes > 0 {
		run.DeviceMemoryBytes = r.OOM.DeviceAllocatedBytes
	}
	var alloc struct {
		Expandable bool `json:"expandable_segments"`
	}
	if len(info.AllocatorSettings) > 0 && json.Unmarshal(info.AllocatorSettings, &alloc) == nil {
		run.ExpandableSegments = alloc.Expandable
	}
	if strings.Contains(info.PyTorchCUDAAllocConf, "expandable_segments:True") {
		run.ExpandableSegments = true
	}
	if len(info.Model) > 0 {
		var mf struct {
			HFConfig   json.RawMessage `json:"hf_config"`
			Class      string          `json:"class"`
			Attn       string          `json:"attn_implementation"`
			Ckpt       *bool           `json:"gradient_checkpointing"`
			FirstInput *struct {
				Shape []int `json:"shape"`
			} `json:"first_input"`
		}
		if json.Unmarshal(info.Model, &mf) == nil {
			run.Model = ModelFacts{HFConfig: mf.HFConfig, Class: mf.Class, AttnImplementation: mf.Attn, GradientCheckpointing: mf.Ckpt}
			if mf.FirstInput != nil {
				run.Model.InputShape = mf.FirstInput.Shape
			}
		}
	}
	if p := info.Precision; p != nil {
		run.Precision = PrecisionFacts{ParameterBytesByDtype: p.ParameterBytesByDtype, Autocast: p.AutocastCUDA,
			AutocastDtype: p.AutocastDtype, FSDP: p.FSDP}
	}
	run.Inventory = inventoryFacts(r.Inventories)
	for _, g := range r.Regions {
		if g.Kind == "ddp_buckets" && g.AllocatedAfterBytes > g.AllocatedBeforeBytes {
			run.DDPBucketsBytes = max(run.DDPBucketsBytes, g.AllocatedAfterBytes-g.AllocatedBeforeBytes)
		}
	}
	for _, p := range r.Phases {
		run.Phases = append(run.Phases, estimate.PhaseMeasure{Name: p.Name, Step: p.Step,
			AllocatedBefore: p.AllocatedBeforeBytes, AllocatedAfter: p.AllocatedAfterBytes,
			MaxAllocatedBefore: p.MaxAllocatedBeforeBytes, MaxAllocatedAfter: p.MaxAllocatedAfterBytes,
			MaxReservedAfter: p.MaxReservedAfterBytes, Nested: p.Parent != "", Aborted: p.Aborted})
		// the peak counters never go down unless the program resets them:
		// the phases' hold the run's peaks when process.json's do not
		run.MaxAllocatedBytes = max(run.MaxAllocatedBytes, p.MaxAllocatedAfterBytes)
		run.MaxReservedBytes = max(run.MaxReservedBytes, p.MaxReservedAfterBytes)
	}
	for _, s := range r.Live {
		run.MaxDeviceUsedBytes = max(run.MaxDeviceUsedBytes, s.DeviceUsedBytes)
	}
	if o := r.OOM; o != nil {
		run.OOM = &OOM{RequestedBytes: o.RequestedBytes, Step: o.Step, Phase: o.Phase}
	}
	return run
}

// inventoryFacts sums the inventories: parameters from the first, gradients
// and optimizer state from the last inventory that has them.
func inventoryFacts(invs []bundle.Inventory) Inventory {
	var f Inventory
	keys := map[string]bool{}
	for i, inv := range invs {
		var params, grads, opt int64
		seen := map[int64]bool{}
		for _, t := range inv.Tensors {
			if seen[t.Ptr] && t.Kind != "gradient" {
				continue // a storage shared by two names (tied weights) counts once
			}
			switch {
			case t.Kind == "parameter" && t.FSDP == "unsharded":
				f.UnshardedDtype = t.Dtype
				continue
			case t.Kind == "parameter":
				params += t.Bytes
				f.DTensor = f.DTensor || t.DTensor
				f.TP = max(f.TP, tensorParallel(t))
				if t.DTensor && strings.Contains(t.Name, "embed") {
					f.EmbeddingDTensor = true
				}
			case t.Kind == "gradient":
				if seen[-t.Ptr] {
					continue
				}
				seen[-t.Ptr] = true
				grads += t.Bytes
				continue
			case t.Kind == "optimizer_state":
				opt += t.Bytes
				if k := t.Name[strings.LastIndex(t.Name, ".")+1:]; k != "" && k != "step" {
					keys[k] = true
				}
			}
			seen[t.Ptr] = true
		}
		if i == 0 || f.ParametersBytes == 0 {
			f.ParametersBytes = params
		}
		if grads > 0 {
			f.GradientsBytes = grads
		}
		if opt > 0 {
			f.OptimizerStateBytes = opt
		}
	}
	for k := range keys {
		f.OptimizerKeys = append(f.OptimizerKeys, k)
	}
	sort.Strings(f.OptimizerKeys)
	return f
}

// tensorParallel is the tensor-parallel degree a DTensor parameter's
// DeviceMesh shows: the size of the mesh dimension named for it ("tp",
// "tp_..." or "...tensor..."); on an unnamed mesh, the second of two
// dimensions when FSDP2 shards the first (torchtitan's (dp, tp) order: its
// placement there is a Shard, where HSDP's (replicate, shard) mesh has
// Replicate), or the only dimension of a parameter FSDP2 does not shard.
// 0 when the mesh was not recorded or shows none.
func tensorParallel(t bundle.TensorRef) int {
	for i, name := range t.MeshDims {
		if i < len(t.Mesh) && (name == "tp" || strings.HasPrefix(name, "tp_") || strings.Contains(name, "tensor")) {
			return t.Mesh[i]
		}
	}
	if len(t.MeshDims) > 0 || len(t.Placements) != len(t.Mesh) {
		return 0 // named, without a tensor-parallel dimension
	}
	switch {
	case len(t.Mesh) == 2 && t.FSDP != "" && isShard(t.Placements[0]):
		return t.Mesh[1]
	case len(t.Mesh) == 1 && t.FSDP == "":
		return t.Mesh[0]
	}
	return 0
}

// isShard reports whether a placement string is a shard: torch writes
// "Shard(dim=0)" or, in its short form, "S(0)", and FSDP2's strided shard
// "_StridedShard(...)" or "_S(0, 2)".
func isShard(p string) bool {
	return strings.Contains(p, "Shard") || strings.HasPrefix(p, "S(") || strings.HasPrefix(p, "_S(")
}
