package cli

import (
	"bytes"
	_ "embed"
	"io"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/report/memreport"
	"github.com/ptscope/ptscope/internal/snapshot"
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
		var f analyzeFlags
		fs := newFlagSet(e, c)
		f.register(fs)
		f.registerOutput(fs, "demo")
		if _, err := parseInterspersed(fs, args); err != nil {
			return err
		}
		o, err := memoryOptions(&f)
		if err != nil {
			return err
		}
		s, err := readSample()
		if err != nil {
			return err
		}
		in := &memreport.Input{Path: sampleName}
		fillInput(in, s, &f, o)
		doc := &memreport.Document{SchemaVersion: 1, Tool: "ptscope", Command: "analyze", Inputs: []*memreport.Input{in}}
		return emitAnalysis(e, doc, &f, nil)
	}
	return c
}

func readSample() (*snapshot.Snapshot, error) {
	r, err := input.NewReader(bytes.NewReader(sampleSnapshot))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s, err := snapshot.Read(r)
	if err != nil {
		return nil, err
	}
	s.Format += " (" + string(r.Compression) + ")"
	return s, nil
}

func inputReader(r io.Reader) (io.Reader, error) { return input.NewReader(r) }
