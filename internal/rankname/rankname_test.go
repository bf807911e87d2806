package rankname

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		name string
		rank int
		ok   bool
	}{
		{"rank3", 3, true},
		{"oom_rank3.pickle", 3, true},
		{"rank_12.1700000000.pt.trace.json", 12, true},
		{"snapshot_rank-7.pickle", 7, true},
		{"Rank5.pickle", 5, true},
		{"RANK_6", 6, true},
		{"node2_rank3", 3, true},
		{"rank1_vs_rank2.pickle", 2, true},
		{"snapshot.pickle", 0, false},
		{"ranks.pickle", 0, false},
		{"rank99999999999999999999", 0, false},
	} {
		if n, ok := Of(c.name); n != c.rank || ok != c.ok {
			t.Errorf("Of(%q) = %d, %v; want %d, %v", c.name, n, ok, c.rank, c.ok)
		}
	}
}
