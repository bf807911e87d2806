package memory

import (
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/units"
)

// invalidFinding reports the trace entries of device d, and the segments
// and blocks, that the reader found malformed (a field of the wrong type,
// read as 0; a size of 0 or below; a time going back): the analysis used
// them as they were, so its numbers are only as good as the rest. The
// reader refuses a snapshot where most of them are malformed.
//
// It also reports a peak that cannot be: more allocated than twice the most
// reserved (and 1 GiB more), which only sizes the reader could not tell
// wrong produce (a free of an unknown address claiming a TiB, say). The
// allocator hands out memory from what it reserved; the margin spares
// snapshots whose segment events the ring buffer cut.
func invalidFinding(s *snapshot.Snapshot, res *Result) (finding.Finding, *finding.Ref, bool) {
	d := res.Device
	tr, seg, stk := s.Trace(d).Invalid, s.InvalidSegments, s.InvalidStacks
	p := res.Peak
	impossible := res.HasHistory && p.ReservedBytes > 0 && p.AllocatedBytes > 2*p.ReservedBytes+1<<30
	if tr.Count == 0 && seg.Count == 0 && stk.Count == 0 && !impossible {
		return finding.Finding{}, nil, false
	}
	entries := s.Trace(d).Len() + tr.Dropped // what the file held
	var parts []string
	first := ""
	if tr.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d trace entries", tr.Count, entries))
		first = tr.First
	}
	if seg.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d segments or blocks", seg.Count))
		if first == "" {
			first = seg.First
		}
	}
	if stk.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d stacks", stk.Count))
		if first == "" {
			first = stk.First
		}
	}
	if impossible {
		msg := fmt.Sprintf("the peak of %s allocated is more than the %s ever reserved, which the allocator cannot do", units.Bytes(p.AllocatedBytes), units.Bytes(p.ReservedBytes))
		if len(parts) == 0 {
			return finding.New("invalid-entries", finding.Warning,
					finding.Numbers{"invalid_entries": 0, "entries": float64(s.Trace(d).Len() + tr.Dropped), "allocated_bytes": float64(p.AllocatedBytes), "reserved_bytes": float64(p.ReservedBytes)},
					"Some trace entries have sizes that cannot be right: "+msg+". The numbers that depend on them (the peak, what was alive then) are wrong.",
					"Analyse the snapshot as torch.cuda.memory._dump_snapshot wrote it; a tool that rewrote or converted it changed these fields."),
				&finding.Ref{View: "timeline", Device: finding.Int(d), EventIndex: finding.Int(p.EventIndex)}, true
		}
		first += "; " + msg
	}
	ref := &finding.Ref{View: "timeline", Device: finding.Int(d)}
	if tr.Count > 0 && tr.Index >= 0 {
		ref.EventIndex = finding.Int(tr.Index)
	}
	return finding.New("invalid-entries", finding.Warning,
		finding.Numbers{"invalid_entries": float64(tr.Count), "entries": float64(entries), "invalid_segments": float64(seg.Count), "invalid_stacks": float64(stk.Count)},
		fmt.Sprintf("%s are malformed (first: %s): fields of the wrong type and impossible sizes were read as 0, repeated references to one record dropped and over-long stacks cut, so the numbers around them are approximate.", strings.Join(parts, " and "), first),
		"Analyse the snapshot as torch.cuda.memory._dump_snapshot wrote it; a tool that rewrote or converted it changed these fields."), ref, true
}
