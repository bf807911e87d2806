package bundle

import (
	"fmt"
	"path/filepath"
	"sort"

	"encoding/json"
)

// Tensor roles (tensors.jsonl): what the training process's tensors were,
// by storage address, so that a block of an allocator snapshot can be
// labelled exactly. The companion takes an inventory at the first forward,
// at the end (and after the backward) of every step that records stacks, as
// an optimizer that stepped is freed (a training function returning frees it
// before exit), at an OOM and at exit, and writes one only when it differs
// from the last.

// Tensor kinds of an inventory.
const (
	KindParameter      = "parameter"
	KindGradient       = "gradient"
	KindOptimizerState = "optimizer_state"
	KindBuffer         = "buffer"
)

// TensorRef is one tensor of an inventory: its storage [Ptr, Ptr+Bytes) on
// the rank's device, which is a caching-allocator block or lies inside one.
// Views (DDP gradients in a bucket, FSDP2 unsharded parameters in an
// all-gather buffer) share a storage; OffsetBytes and TensorBytes place the
// tensor inside it.
type TensorRef struct {
	Kind        string `json:"kind"`           // parameter | gradient | optimizer_state | buffer
	Name        string `json:"name"`           // parameter or buffer path; optimizer state: the parameter's path + "." + key ("exp_avg")
	Module      string `json:"module"`         // the owning module's path ("" for the root)
	Dtype       string `json:"dtype"`          // "bfloat16", "float32", ...
	Ptr         int64  `json:"ptr"`            // storage address
	Bytes       int64  `json:"bytes"`          // storage size
	OffsetBytes int64  `json:"offset_bytes"`   // the tensor's start inside the storage
	TensorBytes int64  `json:"tensor_bytes"`   // the tensor's own bytes when less than its storage (0: all of it)
	DTensor     bool   `json:"dtensor"`        // the local shard of a DTensor
	FSDP        string `json:"fsdp,omitempty"` // FSDP2 parameters: "sharded" or "unsharded"
	// DTensor parameters: the DeviceMesh's shape, its dimension names when
	// named ("dp", "tp"), and the placement on each ("Shard(dim=0)",
	// "Replicate()"); absent in bundles of companions before round 3.
	Mesh       []int    `json:"mesh,omitempty"`
	MeshDims   []string `json:"mesh_dims,omitempty"`
	Placements []string `json:"placements,omitempty"`
}

// Size is the tensor's own size in bytes.
func (t TensorRef) Size() int64 {
	if t.TensorBytes > 0 {
		return t.TensorBytes
	}
	return t.Bytes - t.OffsetBytes
}

// Inventory is one inventory of a rank's tensors.
type Inventory struct {
	TimeUs  int64       `json:"time_us"` // Unix microseconds, the clock of snapshots' time_us
	Rank    int         `json:"rank"`
	Device  int         `json:"device"`
	Step    int         `json:"step"` // the step it was taken in (0-based, as phases.jsonl)
	At      string      `json:"at"`   // first_forward | forward_end | backward_end | step_end | optimizer_freed | oom | end
	Tensors []TensorRef `json:"tensors"`

	byPtr []int // indexes of Tensors by Ptr, then inventory order (built by index)
}

// index sorts the tensors by address for Lookup.
func (inv *Inventory) index() {
	inv.byPtr = make([]int, len(inv.Tensors))
	for i := range inv.byPtr {
		inv.byPtr[i] = i
	}
	sort.SliceStable(inv.byPtr, func(a, b int) bool { return inv.Tensors[inv.byPtr[a]].Ptr < inv.Tensors[inv.byPtr[b]].Ptr })
}

// Region is a span of time whose allocations have one role: DDP's
// gradient buckets, allocated in DistributedDataParallel's init helper
// ("ddp_buckets") and rebuilt in its pre-forward after the first step
// ("ddp_pre_forward"). The allocations themselves carry user_metadata
// "ptscope:ddp" in the snapshot.
type Region struct {
	Kind                 string `json:"region"`
	Rank                 int    `json:"rank"`
	Device               int    `json:"device"`
	Step                 int    `json:"step"`
	StartTimeUs          int64  `json:"start_time_us"`
	EndTimeUs            int64  `json:"end_time_us"`
	AllocatedBeforeBytes int64  `json:"allocated_before_bytes"`
	AllocatedAfterBytes  int64  `json:"allocated_after_bytes"`
}

// rolesLine is one line of tensors.jsonl: an inventory (or one part of a
// large one) or a region.
type rolesLine struct {
	Region string `json:"region"`
	Part   int    `json:"part"`
	Parts  int    `json:"parts"`
	Inventory
	StartTimeUs          int64 `json:"start_time_us"`
	EndTimeUs            int64 `json:"end_time_us"`
	AllocatedBeforeBytes int64 `json:"allocated_before_bytes"`
	AllocatedAfterBytes  int64 `json:"allocated_after_bytes"`
}

// readRoles reads dir/tensors.jsonl (no file: no inventories): the parts
// of an inventory written on consecutive lines are joined.
func readRoles(dir string) ([]Inventory, []Region, error) {
	path := filepath.Join(dir, "tensors.jsonl")
	var invs []Inventory
	var regs []Region
	open := false // the last inventory still expects parts
	err := readJSONL(path, func(line []byte) error {
		var l rolesLine
		if err := json.Unmarshal(line, &l); err != nil {
			return err
		}
		if l.Region != "" {
			regs = append(regs, Region{Kind: l.Region, Rank: l.Rank, Device: l.Device, Step: l.Step,
				StartTimeUs: l.StartTimeUs, EndTimeUs: l.EndTimeUs,
				AllocatedBeforeBytes: l.AllocatedBeforeBytes, AllocatedAfterBytes: l.AllocatedAfterBytes})
			return nil
		}
		if l.At == "" {
			return fmt.Errorf("want an inventory (\"at\", \"tensors\") or a region")
		}
		if l.Parts > 1 && l.Part > 0 {
			if n := len(invs); open && n > 0 && invs[n-1].TimeUs == l.TimeUs && invs[n-1].At == l.At {
				invs[n-1].Tensors = append(invs[n-1].Tensors, l.Tensors...)
				open = l.Part < l.Parts-1
				return nil
			}
			return fmt.Errorf("part %d of %d of an inventory whose first part is missing", l.Part, l.Parts)
		}
		inv := l.Inventory
		invs = append(invs, inv)
		open = l.Parts > 1
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.SliceStable(invs, func(i, j int) bool { return invs[i].TimeUs < invs[j].TimeUs })
	for i := range invs {
		invs[i].index()
	}
	return invs, regs, nil
}

// InventoryAt is the inventory in force at timeUs: the last one taken at or
// before it, else the first one; nil when the rank has none.
func (r *Rank) InventoryAt(timeUs int64) *Inventory {
	if len(r.Inventories) == 0 {
		return nil
	}
	i := sort.Search(len(r.Inventories), func(i int) bool { return r.Inventories[i].TimeUs > timeUs })
	if i == 0 {
		return &r.Inventories[0]
	}
	return &r.Inventories[i-1]
}

// Lookup returns the tensors whose storage contains addr, in inventory
// order: several when tensors share a storage (a DDP bucket's gradients,
// a parameter and its FSDP2 sharded data), none when no tensor's does.
// Storages are allocations, so two of them are equal or disjoint.
func (inv *Inventory) Lookup(addr int64) []TensorRef {
	if len(inv.byPtr) != len(inv.Tensors) {
		inv.index()
	}
	k := sort.Search(len(inv.byPtr), func(k int) bool { return inv.Tensors[inv.byPtr[k]].Ptr > addr })
	if k == 0 {
		return nil
	}
	ptr := inv.Tensors[inv.byPtr[k-1]].Ptr
	j := k - 1
	for j > 0 && inv.Tensors[inv.byPtr[j-1]].Ptr == ptr {
		j--
	}
	var out []TensorRef
	for ; j < k; j++ {
		if t := inv.Tensors[inv.byPtr[j]]; addr < t.Ptr+t.Bytes {
			out = append(out, t)
		}
	}
	return out
}

// StacksAt reports whether allocations recorded a Python stack at timeUs
// (inside one of the rank's stack windows).
func (r *RankInfo) StacksAt(timeUs int64) bool {
	for _, w := range r.StackWindows {
		if w.StartTimeUs <= timeUs && timeUs < w.EndTimeUs {
			return true
		}
	}
	return false
}

// Bytes sums the storage bytes of one kind, counting each storage once.
func (inv *Inventory) Bytes(kind string) int64 {
	seen := map[int64]bool{}
	var n int64
	for _, t := range inv.Tensors {
		if t.Kind == kind && !seen[t.Ptr] {
			seen[t.Ptr] = true
			n += t.Bytes
		}
	}
	return n
}
