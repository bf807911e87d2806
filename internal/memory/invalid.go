package memory

import (
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// invalidFinding reports the trace entries of device d, and the segments
// and blocks, that the reader found malformed (a field of the wrong type,
// read as 0; a size of 0 or below; a time going back): the analysis used
// them as they were, so its numbers are only as good as the rest. The
// reader refuses a snapshot where most of them are malformed.
func invalidFinding(s *snapshot.Snapshot, d int) (finding.Finding, *finding.Ref, bool) {
	tr, seg, stk := s.Trace(d).Invalid, s.InvalidSegments, s.InvalidStacks
	if tr.Count == 0 && seg.Count == 0 && stk.Count == 0 {
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
	ref := &finding.Ref{View: "timeline", Device: finding.Int(d)}
	if tr.Count > 0 && tr.Index >= 0 {
		ref.EventIndex = finding.Int(tr.Index)
	}
	return finding.New("invalid-entries", finding.Warning,
		finding.Numbers{"invalid_entries": float64(tr.Count), "entries": float64(entries), "invalid_segments": float64(seg.Count), "invalid_stacks": float64(stk.Count)},
		fmt.Sprintf("%s are malformed (first: %s): fields of the wrong type were read as 0, repeated references to one record dropped, over-long stacks cut and impossible values kept, so the numbers around them are approximate.", strings.Join(parts, " and "), first),
		"Analyse the snapshot as torch.cuda.memory._dump_snapshot wrote it; a tool that rewrote or converted it changed these fields."), ref, true
}
