package memory

import "github.com/ptscope/ptscope/internal/snapshot"

// labels looks up Options.Labels by address.
type labels struct {
	tr     *snapshot.Trace
	byAddr map[uint64][]*Label
}

func newLabels(ls []Label, tr *snapshot.Trace) *labels {
	l := &labels{tr: tr}
	if len(ls) == 0 {
		return l
	}
	l.byAddr = make(map[uint64][]*Label, len(ls))
	for i := range ls {
		l.byAddr[ls[i].Address] = append(l.byAddr[ls[i].Address], &ls[i])
	}
	return l
}

// of returns the label of an allocation, or nil.
func (l *labels) of(a *Alloc) *Label {
	if l == nil || l.byAddr == nil {
		return nil
	}
	var t int64
	if a.AllocIdx >= 0 {
		if !l.tr.HasTime {
			return nil
		}
		t = l.tr.TimeUS[a.AllocIdx] * 1000
	}
	for _, lb := range l.byAddr[a.Addr] {
		if a.AllocIdx < 0 && lb.FromNS == 0 || a.AllocIdx >= 0 && t >= lb.FromNS && (lb.ToNS == 0 || t <= lb.ToNS) {
			return lb
		}
	}
	return nil
}

// apply sets the labelled allocations' categories.
func (l *labels) apply(r *Replay) {
	if l.byAddr == nil {
		return
	}
	for k := range r.Allocs {
		if lb := l.of(&r.Allocs[k]); lb != nil {
			r.Allocs[k].Category = lb.Category
		}
	}
}

// module is the labelled module path of an allocation, or "".
func (l *labels) module(a *Alloc) string {
	if lb := l.of(a); lb != nil {
		return lb.Module
	}
	return ""
}
