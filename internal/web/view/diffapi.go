package view

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/ptscope/ptscope/internal/diff"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/report/diffreport"
)

// DiffOut answers /api/v1/diff: the comparison of input A (the baseline)
// with input B, as `ptscope diff A B --json` writes it, and its sections as
// the HTML fragment of `ptscope diff --html` (script-free, escaped), which
// the page's compare view shows as it is.
type DiffOut struct {
	A      int          `json:"a"`
	B      int          `json:"b"`
	Top    int          `json:"top"`
	Report *diff.Report `json:"report"`
	HTML   string       `json:"html"`
}

// maxDiffs is how many comparisons the server keeps; older ones are
// computed again when asked for.
const maxDiffs = 16

// diffCache holds computed comparisons by (a, b, top). Inputs never change
// once loaded, so an entry never goes stale. Comparisons are computed one
// at a time, so that memory stays bounded however many the page asks for.
type diffCache struct {
	mu      sync.Mutex
	compute sync.Mutex
	m       map[[3]int]*DiffOut
	order   [][3]int
}

func (c *diffCache) get(k [3]int) *DiffOut {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *diffCache) put(k [3]int, d *DiffOut) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[3]int]*DiffOut{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	if len(c.order) >= maxDiffs {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = d
	c.order = append(c.order, k)
}

// diffView compares inputs a and b (?a=&b=, required; &top=N rows of each
// changed table, default 10). Both must be loaded and of the same kind:
// a snapshot against a trace is a 400 with the CLI's one-line error.
func (s *Set) diffView(p params) (any, error) {
	a, err := p.int("a", 0, true)
	if err != nil {
		return nil, err
	}
	b, err := p.int("b", 0, true)
	if err != nil {
		return nil, err
	}
	top, err := p.int("top", 10, false)
	if err != nil {
		return nil, err
	}
	if top < 1 || top > 10000 {
		return nil, badRequest("parameter top=%d is not between 1 and 10000", top)
	}
	ia, err := s.readyID(a, "")
	if err != nil {
		return nil, err
	}
	ib, err := s.readyID(b, "")
	if err != nil {
		return nil, err
	}
	key := [3]int{ia.ID, ib.ID, int(top)}
	if d := s.diffs.get(key); d != nil {
		return d, nil
	}
	s.diffs.compute.Lock()
	defer s.diffs.compute.Unlock()
	if d := s.diffs.get(key); d != nil {
		return d, nil // computed while this request waited
	}
	d, err := compareInputs(ia, ib, int(top))
	if err != nil {
		return nil, err
	}
	s.diffs.put(key, d)
	return d, nil
}

// side is what a loaded input gives a comparison.
func side(it *Input) diff.Input {
	return diff.Input{Path: it.Path, Memory: it.memReport, Trace: it.traceReport}
}

func compareInputs(a, b *Input, top int) (*DiffOut, error) {
	if a.Kind != b.Kind {
		holds := func(it *Input) string {
			return diff.Holds(it.Kind == string(input.Snapshot), it.Kind == string(input.Trace))
		}
		return nil, badRequest("%v", diff.KindMismatch(a.Path, holds(a), b.Path, holds(b)))
	}
	sa, sb := side(a), side(b)
	if sa.Memory == nil && sa.Trace == nil || sb.Memory == nil && sb.Trace == nil {
		return nil, fmt.Errorf("input %d or %d holds no analysis to compare", a.ID, b.ID)
	}
	rep := diff.Compare(sa, sb)
	var buf bytes.Buffer
	if err := diffreport.New(rep).WriteHTMLBody(&buf, top); err != nil {
		return nil, err
	}
	return &DiffOut{A: a.ID, B: b.ID, Top: top, Report: rep, HTML: buf.String()}, nil
}
