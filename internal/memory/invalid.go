package memory

import (
	"fmt"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/snapshot"
)

// invalidFinding reports the trace entries of device d, and the segments
// and blocks, that the reader found malformed (a field of the wrong type,
// read as 0; a size of 0 or below; a time going back): the analysis used
// them as they were, so its numbers are only as good as the rest. The
// reader refuses a snapshot where most of them are malformed.
func invalidFinding(s *snapshot.Snapshot, d int) (finding.Finding, *finding.Ref, bool) {
	tr, seg := s.Trace(d).Invalid, s.InvalidSegments
	if tr.Count == 0 && seg.Count == 0 {
		return finding.Finding{}, nil, false
	}
	first, what := tr.First, fmt.Sprintf("%d of %d trace entries", tr.Count, s.Trace(d).Len())
	if tr.Count == 0 {
		first, what = seg.First, fmt.Sprintf("%d segments or blocks", seg.Count)
	} else if seg.Count > 0 {
		what += fmt.Sprintf(" and %d segments or blocks", seg.Count)
	}
	ref := &finding.Ref{View: "timeline", Device: finding.Int(d)}
	if tr.Count > 0 && tr.Index >= 0 {
		ref.EventIndex = finding.Int(tr.Index)
	}
	return finding.New("invalid-entries", finding.Warning,
		finding.Numbers{"invalid_entries": float64(tr.Count), "entries": float64(s.Trace(d).Len()), "invalid_segments": float64(seg.Count)},
		fmt.Sprintf("%s are malformed (first: %s): fields of the wrong type were read as 0 and impossible values kept, so the numbers around them are approximate.", what, first),
		"Analyse the snapshot as torch.cuda.memory._dump_snapshot wrote it; a tool that rewrote or converted it changed these fields."), ref, true
}
