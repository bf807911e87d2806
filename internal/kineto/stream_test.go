package kineto

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/testfixture"
)

// TestScanner: the raw events of a real trace, their heads, and the
// envelope around them put back together give the file.
func TestScanner(t *testing.T) {
	r, err := input.NewSource(0, nil, nil).Open(testfixture.Testdata(t, "bundles", "lm_small_bf16", "rank0", "trace_step4.pt.trace.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sc, err := NewScanner(r, Options{ChunkBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sc.Header), `"deviceProperties"`) || sc.BareArray {
		t.Fatalf("header %.200q", sc.Header)
	}
	var n, steps int
	var last int64
	err = sc.Each(context.Background(), func(ev []byte) error {
		n++
		h, err := ParseHead(ev)
		if err != nil {
			t.Fatalf("%v: %s", err, ev)
		}
		if h.Ph == "" {
			t.Fatalf("no ph: %s", ev)
		}
		if h.Ph == "X" && !h.HasDur {
			t.Fatalf("complete event without dur: %s", ev)
		}
		if strings.HasPrefix(h.Name, "ProfilerStep#") {
			steps++
		}
		if h.HasTS {
			last = h.TS
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10000 || steps != 3 || last == 0 || sc.Truncated || len(sc.Warnings) > 0 {
		t.Errorf("%d events, %d step slices, last ts %d, truncated %v, warnings %v", n, steps, last, sc.Truncated, sc.Warnings)
	}
	if !bytes.HasSuffix(bytes.TrimSpace(sc.Tail), []byte("}")) {
		t.Errorf("tail %q", sc.Tail)
	}
}

func TestParseHead(t *testing.T) {
	h, err := ParseHead([]byte(`{"ph":"X","cat":"kernel","name":"a\"b","ts":12.5,"dur":"3","args":{"x":[1,2]}}`))
	if err != nil || h != (Head{Ph: "X", Cat: "kernel", Name: `a"b`, TS: 12500, Dur: 3000, HasTS: true, HasDur: true}) {
		t.Errorf("%+v, %v", h, err)
	}
	if _, err := ParseHead([]byte(`{"ph":`)); err == nil {
		t.Error("no error for a broken event")
	}
}
