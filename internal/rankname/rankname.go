// Package rankname is the one rule by which ptscope reads a rank from a
// file or folder name: "rank3", "oom_rank3.pickle", "Rank_12.1700000000.pt.trace.json"
// (the worker_name of tensorboard_trace_handler), "snapshot_rank-7.pickle".
// "rank" in any case, an optional "_" or "-", then the number; when a name
// mentions several, the last wins ("node2_rank3", "rank3_oom_rank3").
// analyze (memory), trace (perf), diff and the fleet readers all use it;
// which names they look at (the file's alone, or folders above it too) is
// theirs to say.
package rankname

import (
	"regexp"
	"strconv"
)

var pattern = regexp.MustCompile(`(?i)rank[_-]?(\d+)`)

// Of returns the rank name mentions (one path element, not a path), and
// whether it mentions one.
func Of(name string) (int, bool) {
	m := pattern.FindAllStringSubmatch(name, -1)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[len(m)-1][1])
	if err != nil {
		return 0, false // more digits than a rank has
	}
	return n, true
}
