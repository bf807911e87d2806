package memory

import (
	"cmp"
	"slices"
	"sort"

	"github.com/ptscope/ptscope/internal/spillmem"
)

// Role says what the storage at Address was when a record that knows the
// program's tensors was taken at TimeNS (ptscope run's tensor inventories:
// parameters with their module paths, gradients, optimizer state, buffers):
// the allocation at Address alive then, or the one holding Address, is it.
// Roles override the categories guessed from stacks, phases and lifetimes.
type Role struct {
	Address  uint64
	TimeNS   int64 // Unix ns, the clock of the trace's time_us
	Category Category
	// Module is the owning module's path ("model.layers.3.mlp"; the
	// parameter's module for its gradient and optimizer state).
	Module string
	Name   string // the tensor's path ("model.layers.3.mlp.up_proj.weight.exp_avg")
}

// DDPMetadata is the user_metadata ptscope run gives what
// DistributedDataParallel allocates in its init helper and pre-forward: its
// gradient buckets.
const DDPMetadata = "ptscope:ddp"

// DDPBuckets is the module name of what carries DDPMetadata.
const DDPBuckets = "<DDP gradient buckets>"

// roles maps allocations to the role that labels them.
type roles struct {
	of map[*Alloc]*Role
}

// maxContainScan bounds how many lower addresses are looked at for an
// allocation holding an address inside it.
const maxContainScan = 64

// applyRoles finds the allocation each role names and sets its category;
// allocations tagged with DDPMetadata (id ddp in the string table, 0: none)
// are gradient buckets. Several tensors can share one storage (DDP's
// gradients in a bucket, FSDP2's unsharded parameters in an all-gather
// buffer): the first role found wins.
func applyRoles(rs []Role, r *Replay, ddp uint32) *roles {
	x := &roles{of: map[*Alloc]*Role{}}
	if ddp != 0 {
		for k := range r.Allocs {
			spillmem.Poll(r.arena, k)
			if r.Allocs[k].Metadata == ddp {
				r.Allocs[k].Category = CatGradient
			}
		}
	}
	if len(rs) == 0 || len(r.Allocs) == 0 {
		return x
	}
	if len(r.Timeline.TimeUS) == 0 {
		// No trace: the snapshot is the state at one instant, which only
		// the latest inventory describes (an older one's addresses may
		// hold other tensors since); the caller leaves out inventories
		// taken after the snapshot.
		var last int64
		for i := range rs {
			last = max(last, rs[i].TimeNS)
		}
		var keep []Role
		for i := range rs {
			if rs[i].TimeNS == last {
				keep = append(keep, rs[i])
			}
		}
		rs = keep
	}
	// Allocations by address, then by time.
	idx := spillmem.Make[int32](r.arena, len(r.Allocs))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		x, y := &r.Allocs[a], &r.Allocs[b]
		if c := cmp.Compare(x.Addr, y.Addr); c != 0 {
			return c
		}
		return cmp.Compare(x.AllocIdx, y.AllocIdx)
	})
	times := monotonic(r.Timeline.TimeUS, r.arena)
	for i := range rs {
		ro := &rs[i]
		// The entry the role describes: the last one at or before its time.
		e := sort.Search(len(times), func(j int) bool { return times[j]*1000 > ro.TimeNS }) - 1
		if len(times) == 0 {
			e = -1 // the state without a trace
		}
		a := find(r, idx, ro.Address, e)
		if a == nil {
			continue
		}
		if _, ok := x.of[a]; ok {
			continue
		}
		x.of[a] = ro
		a.Category = ro.Category
	}
	return x
}

// find returns the allocation alive just after entry e that starts at
// addr or holds it; nil if none.
func find(r *Replay, idx []int32, addr uint64, e int) *Alloc {
	hi := sort.Search(len(idx), func(j int) bool { return r.Allocs[idx[j]].Addr > addr })
	for n := 0; hi > 0 && n < maxContainScan; n++ {
		base := r.Allocs[idx[hi-1]].Addr
		lo := sort.Search(hi, func(j int) bool { return r.Allocs[idx[j]].Addr >= base })
		// Among the allocations at base, the last one made at or before e.
		j := lo + sort.Search(hi-lo, func(j int) bool { return int(r.Allocs[idx[lo+j]].AllocIdx) > e }) - 1
		if j >= lo {
			a := &r.Allocs[idx[j]]
			if a.Alive(e) && addr < a.Addr+uint64(a.Size) {
				return a
			}
		}
		hi = lo
	}
	return nil
}

// module is the role's module path of an allocation, or "".
func (x *roles) module(a *Alloc) string {
	if x != nil {
		if ro := x.of[a]; ro != nil {
			return ro.Module
		}
	}
	return ""
}
