package memory

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/ptscope/ptscope/internal/finding"
	"github.com/ptscope/ptscope/internal/rankname"
	"github.com/ptscope/ptscope/internal/units"
)

// rankImbalanceRatio is how far the lowest rank's peak may fall below the
// highest's before a run's ranks are called imbalanced.
const rankImbalanceRatio = 0.10

// rankOf names an input's rank and the run it belongs to: a bundle's rank
// and folder, else a rank in the file's name (rankname's rule) and its
// folder.
func rankOf(in *Input) (run string, rank int, ok bool) {
	if b := in.Bundle; b != nil {
		return b.Dir, b.Rank, true
	}
	n, ok := rankname.Of(filepath.Base(in.Path))
	return filepath.Dir(in.Path), n, ok
}

// rankImbalance adds a rank-imbalance finding to the result of the rank
// with the highest peak, for every run whose ranks' peaks (each rank's
// highest, over its snapshots and devices) differ by more than
// rankImbalanceRatio of it: on identical ranks the largest rank sets the GPU
// a job needs, and the others waste the difference.
func (rep *Report) rankImbalance() {
	type peak struct {
		bytes int64
		res   *Result
	}
	runs := map[string]map[int]peak{}
	for _, in := range rep.Inputs {
		run, rank, ok := rankOf(in)
		if !ok {
			continue
		}
		for _, d := range in.Devices {
			if runs[run] == nil {
				runs[run] = map[int]peak{}
			}
			if p := runs[run][rank]; d.Peak.AllocatedBytes > p.bytes || p.res == nil {
				runs[run][rank] = peak{d.Peak.AllocatedBytes, d}
			}
		}
	}
	for _, ranks := range runs {
		if len(ranks) < 2 {
			continue
		}
		ids := make([]int, 0, len(ranks))
		for r := range ranks {
			ids = append(ids, r)
		}
		sort.Ints(ids)
		hi, lo := ids[0], ids[0]
		for _, r := range ids {
			if ranks[r].bytes > ranks[hi].bytes {
				hi = r
			}
			if ranks[r].bytes < ranks[lo].bytes {
				lo = r
			}
		}
		top, bottom := ranks[hi].bytes, ranks[lo].bytes
		if top <= 0 || float64(top-bottom) <= rankImbalanceRatio*float64(top) {
			continue
		}
		spread := float64(top-bottom) / float64(top)
		res := ranks[hi].res
		if containsFinding(res.Findings, "rank-imbalance") {
			continue // Compare ran before
		}
		f := finding.New("rank-imbalance", finding.Warning,
			finding.Numbers{"max_peak_bytes": float64(top), "min_peak_bytes": float64(bottom), "spread_ratio": spread,
				"ranks": float64(len(ranks))},
			fmt.Sprintf("Rank %d peaks at %s, rank %d at %s (%s less) across %d ranks: the ranks do not hold the same memory, and the largest sets the GPU the job needs.",
				hi, units.Bytes(top), lo, units.Bytes(bottom), units.Percent(spread), len(ranks)),
			"Balance the ranks: even sharding units (FSDP wrapping, pipeline stages), even batches (packed or bucketed sequence lengths), and rank 0's extra work (logging, evaluation, checkpointing) off the peak.")
		f.At = &finding.Ref{View: "timeline", Device: finding.Int(res.Device), Rank: finding.Int(hi)}
		if res.Peak.EventIndex >= 0 {
			f.At.EventIndex = finding.Int(res.Peak.EventIndex)
		}
		res.Findings = append(res.Findings, f)
		finding.Sort(res.Findings)
	}
}

func containsFinding(fs []finding.Finding, id string) bool {
	for _, f := range fs {
		if f.ID == id {
			return true
		}
	}
	return false
}
