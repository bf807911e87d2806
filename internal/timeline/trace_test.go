package timeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// synthTrace writes a trace of nested host events on two threads and
// kernels on two streams, some long and many short.
func synthTrace(t *testing.T, seed uint64) *kineto.Trace {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString(`{"schemaVersion":1,"traceEvents":[`)
	n := 0
	emit := func(cat, name string, pid, tid int, ts, dur float64) {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"ph":"X","cat":%q,"name":%q,"pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f}`, cat, name, pid, tid, ts, dur)
		n++
	}
	var nest func(tid int, ts, dur float64, depth int)
	nest = func(tid int, ts, dur float64, depth int) {
		emit("cpu_op", fmt.Sprintf("op%d", depth), 1, tid, ts, dur)
		if depth > 4 || dur < 2 {
			return
		}
		at := ts + rng.Float64()*dur/10
		for at < ts+dur*0.9 {
			d := rng.Float64() * (ts + dur - at) * 0.6
			nest(tid, at, d, depth+1)
			at += d + rng.Float64()*dur/20
		}
	}
	for tid := 1; tid <= 2; tid++ {
		at := 0.0
		for k := 0; k < 20; k++ {
			d := 50 + rng.Float64()*2000
			nest(tid, at, d, 0)
			at += d + rng.Float64()*100
		}
	}
	for s := 7; s <= 8; s++ {
		at := 0.0
		for k := 0; k < 3000; k++ {
			d := 0.5 + rng.ExpFloat64()*5
			if k%500 == 0 {
				d = 800
			}
			emit("kernel", fmt.Sprintf("k%d", k%7), 0, s, at, d)
			at += d + rng.Float64()*3
		}
	}
	b.WriteString(`]}`)
	tr, err := kineto.Read(context.Background(), strings.NewReader(b.String()), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTraceViewBruteForce(t *testing.T) {
	t.Parallel()
	traces := []*kineto.Trace{synthTrace(t, 1), synthTrace(t, 2)}
	for _, name := range []string{"bundles/lm_small_bf16/rank0/trace_step4.pt.trace.json.gz", "traces/fsdp/rank0.pt.trace.json.gz"} {
		tr, err := kineto.ReadFile(context.Background(), filepath.Join(testfixture.Root(t), "testdata", name), kineto.Options{})
		if err != nil {
			t.Fatal(err)
		}
		traces = append(traces, tr)
	}
	// the real trace with stacks (python_function nesting), when present
	if p := filepath.Join(testfixture.Root(t), "..", "shared", "fixtures", "gpt2tiny_with_stack.pt.trace.json"); p != "" {
		if _, err := os.Stat(p); err == nil {
			tr, err := kineto.ReadFile(context.Background(), p, kineto.Options{})
			if err != nil {
				t.Fatal(err)
			}
			traces = append(traces, tr)
		}
	}
	for ti, kt := range traces {
		tr := NewTrace(kt)
		// depths: events of one depth never overlap
		for _, l := range tr.Lanes {
			for _, es := range l.depths {
				for k := 1; k < len(es); k++ {
					if kt.Events.TS[es[k]] < kt.Events.End(int(es[k-1])) {
						t.Fatalf("trace %d lane %s: events %d and %d overlap in one depth", ti, l.Name, es[k-1], es[k])
					}
				}
			}
		}
		rng := rand.New(rand.NewPCG(3, uint64(ti)))
		span := tr.End - tr.Start
		qs := []TraceQuery{{tr.Start, tr.End, 1000}}
		for q := 0; q < 10; q++ {
			t0 := tr.Start + rng.Int64N(span)
			qs = append(qs, TraceQuery{t0, t0 + 1 + rng.Int64N(span/(1+int64(q))), 50 + rng.IntN(1500)})
		}
		for _, q := range qs {
			v, err := tr.View(q)
			if err != nil {
				t.Fatal(err)
			}
			drawn := map[int32]bool{}
			for _, s := range v.Slices {
				drawn[s.Event] = true
			}
			merged := 0
			for _, m := range v.Merged {
				merged += m.Events
			}
			wide, narrow := 0, 0
			ev := &kt.Events
			for li := range tr.Lanes {
				for _, es := range tr.Lanes[li].depths {
					for _, i := range es {
						if ev.TS[i] >= q.T1 || ev.End(int(i)) <= q.T0 {
							continue
						}
						if ev.Dur[i]*int64(q.Width) >= q.T1-q.T0 {
							wide++
							if !drawn[i] {
								t.Fatalf("trace %d %+v: event %d (%d ns) is a pixel wide and not drawn", ti, q, i, ev.Dur[i])
							}
						} else {
							narrow++
						}
					}
				}
			}
			if wide != len(v.Slices) || narrow != merged {
				t.Fatalf("trace %d %+v: %d slices, %d merged; want %d and %d", ti, q, len(v.Slices), merged, wide, narrow)
			}
		}
	}
}

func TestMemCurveBruteForce(t *testing.T) {
	t.Parallel()
	// a real trace of the committed bundle (profile_memory=True)
	p := filepath.Join(testfixture.Root(t), "testdata", "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz")
	kt, err := kineto.ReadFile(context.Background(), p, kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTrace(kt)
	if len(tr.Memory) == 0 {
		t.Fatal("no GPU memory curve in a profile_memory trace")
	}
	c := &tr.Memory[0]
	t0, t1 := c.TS[0], c.TS[len(c.TS)-1]+1
	pts := c.Curve(t0, t1, 333)
	for col, p := range pts {
		a, b := t0+int64(col)*(t1-t0)/333, t0+int64(col+1)*(t1-t0)/333
		n := 0
		mx := int64(-1)
		for k, ts := range c.TS {
			if ts >= a && ts < b {
				n++
				mx = max(mx, c.Allocated.raw[k])
			}
		}
		if p.Events != n || (n > 0 && p.AllocMax != mx) {
			t.Fatalf("column %d: %d events max %d, want %d max %d", col, p.Events, p.AllocMax, n, mx)
		}
	}
}
