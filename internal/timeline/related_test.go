package timeline

import (
	"context"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// Related agrees with a brute-force reading of the real with_stack trace:
// an event's stack is every event of its thread or stream that encloses
// it, outermost first; GPU work links to the runtime call of its
// correlation id and the innermost operator around that call; a host event
// links to the GPU work of every runtime call inside it.
func TestRelatedBruteForce(t *testing.T) {
	t.Parallel()
	kt, err := kineto.ReadFile(context.Background(), testfixture.Path(t, "gpt2tiny_with_stack.pt.trace.json"), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTrace(kt)
	ev := &kt.Events
	encloses := func(a, b int) bool {
		return a != b && ev.PID[a] == ev.PID[b] && ev.TID[a] == ev.TID[b] && ev.TS[a] <= ev.TS[b] && ev.End(a) >= ev.End(b) &&
			!(ev.TS[a] == ev.TS[b] && ev.End(a) == ev.End(b) && a > b) && ev.Kind[a] != kineto.KindTrace
	}
	// by correlation id: the runtime call, and how much GPU work it launched
	launchOf, gpuOf := map[int64]int{}, map[int64]int{}
	for j := 0; j < ev.Len(); j++ {
		switch {
		case ev.Corr[j] == kineto.None:
		case ev.Kind[j].IsLaunch():
			launchOf[ev.Corr[j]] = j
		case ev.Kind[j].IsGPU():
			gpuOf[ev.Corr[j]]++
		}
	}
	checked := map[kineto.Kind]int{}
	for i := 0; i < ev.Len(); i += 97 { // a sample of every kind
		if ev.Kind[i] == kineto.KindTrace {
			continue
		}
		r := tr.Related(i)
		var want []int
		for j := 0; j < ev.Len(); j++ {
			if encloses(j, i) {
				want = append(want, j)
			}
		}
		if len(want) != len(r.Stack) {
			t.Fatalf("event %d (%s %s): stack of %d, %d events enclose it", i, ev.Kind[i], kt.Name(i), len(r.Stack), len(want))
		}
		for k := 1; k < len(r.Stack); k++ {
			if !encloses(int(r.Stack[k-1]), int(r.Stack[k])) {
				t.Fatalf("event %d: stack %v is not outermost first", i, r.Stack)
			}
		}
		switch {
		case ev.Kind[i].IsGPU() && len(r.Linked) > 0:
			rt := int(r.Linked[0])
			if !ev.Kind[rt].IsLaunch() || ev.Corr[rt] != ev.Corr[i] {
				t.Fatalf("kernel %d (corr %d) linked to %s %d (corr %d)", i, ev.Corr[i], ev.Kind[rt], rt, ev.Corr[rt])
			}
			if len(r.Linked) > 1 && (ev.Kind[r.Linked[1]] != kineto.KindCPUOp || !encloses(int(r.Linked[1]), rt)) {
				t.Fatalf("kernel %d: the operator %d does not enclose its launch %d", i, r.Linked[1], rt)
			}
		case !ev.Kind[i].IsGPU():
			n := 0
			for j, k := range launchOf {
				if k == i || encloses(i, k) {
					n += gpuOf[j]
				}
			}
			if r.LinkedTotal != n || len(r.Linked) != min(n, MaxLinked) {
				t.Fatalf("%s %d (%s): %d linked of %d, brute force %d", ev.Kind[i], i, kt.Name(i), len(r.Linked), r.LinkedTotal, n)
			}
		}
		checked[ev.Kind[i]]++
	}
	if checked[kineto.KindKernel] == 0 || checked[kineto.KindCPUOp] == 0 || checked[kineto.KindPythonFunction] == 0 {
		t.Fatalf("sample covers %v", checked)
	}
}
