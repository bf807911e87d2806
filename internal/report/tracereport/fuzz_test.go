package tracereport

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/kineto/gen"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
)

// FuzzRender: every view of whatever the reader accepts renders without a
// panic, at any width.
//
//	go test ./internal/report/tracereport -run - -fuzz FuzzRender -fuzztime 60s -fuzzminimizetime 2s
func FuzzRender(f *testing.F) {
	for _, name := range []string{"fsdp", "dataloader"} {
		s := gen.Scenarios(1)[name]
		s.Steps, s.Layers = 1, 1
		var b bytes.Buffer
		s.Write(&b)
		f.Add(b.Bytes(), uint8(80))
	}
	f.Fuzz(func(t *testing.T, data []byte, width uint8) {
		tr, err := kineto.Read(context.Background(), bytes.NewReader(data), kineto.Options{Workers: 1})
		if err != nil || tr == nil {
			return
		}
		rep := perf.Compare([]*perf.Rank{perf.Analyze(tr, perf.Options{})})
		o := report.DefaultText()
		o.Width = 20 + int(width)
		for _, v := range Views {
			if err := New(rep, v).WriteText(io.Discard, o); err != nil {
				t.Fatal(err)
			}
		}
	})
}
