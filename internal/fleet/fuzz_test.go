package fleet

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRankOfPath: any path gives a rank that its name really holds, or
// none, never a panic.
func FuzzRankOfPath(f *testing.F) {
	for _, p := range []string{"job/rank3/snapshot.pickle", "job/oom_rank12.pickle", "rank_7.1700.pt.trace.json.gz", "job/x.pickle",
		"rank99999999999999999999/a", "RANK-5"} {
		f.Add(p, "job")
	}
	f.Fuzz(func(t *testing.T, path, root string) {
		r, ok := RankOfPath(path, root)
		if ok && (r < 0 || !strings.Contains(strings.ToLower(filepath.Clean(path)), "rank")) {
			t.Fatalf("%q: rank %d", path, r)
		}
	})
}
