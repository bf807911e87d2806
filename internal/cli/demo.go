package cli

import (
	_ "embed"
	"io"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/report/memreport"
)

// sampleSnapshot is a real allocator snapshot: GPT-2 small (124M
// parameters) trained with AdamW in fp32, batch 4 x 512 tokens, three
// recorded steps on an H100 (PyTorch 2.11); see ../shared/fixtures.
//
//go:embed sample/gpt2s_train_fp32_b4_ctx512.pickle.xz
var sampleSnapshot []byte

const sampleName = "gpt2s_train_fp32_b4_ctx512.pickle (built-in sample)"

const demoUsage = `Usage: ptscope demo [analyze flags]

Analyse a real snapshot embedded in ptscope: GPT-2 small trained with AdamW
in fp32 (batch 4 x 512) for three steps on an H100. torch.cuda reported
max_memory_allocated = 5,538,270,208 B for this run.

Examples:
  ptscope demo
  ptscope demo --json
  ptscope demo --out runs/
`

func demoCommand() command {
	c := command{name: "demo", summary: "analyse a real GPT-2 training snapshot built into ptscope", usage: demoUsage}
	c.run = func(e *env, args []string) error {
		var mf memoryFlags
		var rf reportFlags
		var out outputFlags
		fs := newFlagSet(e, c)
		mf.register(fs)
		rf.register(fs)
		out.folder = "report.txt, report.json, README.md, charts"
		out.register(fs)
		out.registerSteps(fs)
		pos, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef("demo: takes no input (%q); to analyse your own snapshot: ptscope analyze FILE", pos[0])
		}
		if out.name == "" {
			out.name = "demo"
		}
		t, err := out.text(e.stdout)
		if err != nil {
			return err
		}
		if err = rf.apply(&t); err != nil {
			return err
		}
		o, err := mf.options()
		if err != nil {
			return err
		}
		o.Source = e.source()
		set, err := load.SnapshotBytes(e.ctx, sampleName, sampleSnapshot, o)
		if err != nil {
			return err
		}
		return e.emit(memreport.New(set.Report), &out, t)
	}
	return c
}

func inputReader(r io.Reader) (io.Reader, error) { return input.NewSource(0, nil, nil).NewReader(r) }
