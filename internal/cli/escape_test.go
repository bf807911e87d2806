package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/snapshot/snapgen"
)

// Escape sequences a hostile input carries in its names: set the window
// title, clear the screen, an 8-bit CSI, a right-to-left override.
const (
	evilJSON = `\u001b]0;owned\u0007\u001b[2J\u009b31m\u202e`
	evilName = "evil\x1b]0;owned\a\x1b[2J"
	evilHTML = `</script><img src=x onerror=alert(1)>`
)

// hostileInputs writes a JSON snapshot whose frames, user metadata and
// allocator settings hold escape sequences, a trace whose operator, kernel
// and step names do, and an HF config whose names do, under file names
// that hold them too.
func hostileInputs(t *testing.T) (snap, snap2, trace, config string) {
	dir := t.TempDir()
	frames := `[{"filename": "train` + evilJSON + `.py", "line": 7, "name": "step` + evilJSON + evilHTML + `"}]`
	data := snapgen.JSONSnapshot(40, 1_700_000_000_000_000, frames, func(i int, k string) string {
		if k == "size" && i == 3 {
			return "1048576"
		}
		return ""
	})
	data = bytes.Replace(data, []byte(`"segments"`), []byte(`"allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "x`+evilJSON+`"}, "segments"`), 1)
	snap = filepath.Join(dir, evilName+".json")
	snap2 = filepath.Join(dir, evilName+"2.json")
	for _, p := range []string{snap, snap2} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	b.WriteString(`{"schemaVersion": 1, "traceEvents": [`)
	for s := 0; s < 3; s++ {
		base := s * 1000
		fmt.Fprintf(&b, `{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d%s", "pid": 1, "tid": 1, "ts": %d, "dur": 900},`, s, evilJSON, base)
		fmt.Fprintf(&b, `{"ph": "X", "cat": "cpu_op", "name": "aten::mm%s", "pid": 1, "tid": 1, "ts": %d, "dur": 100},`, evilJSON, base+10)
		fmt.Fprintf(&b, `{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": %d, "dur": 5, "args": {"correlation": %d}},`, base+20, s+1)
		fmt.Fprintf(&b, `{"ph": "X", "cat": "kernel", "name": "gemm%s", "pid": 0, "tid": 7, "ts": %d, "dur": 300, "args": {"correlation": %d, "stream": 7, "device": 0}},`, evilJSON, base+30, s+1)
	}
	b.WriteString(`{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python` + evilJSON + `"}}]}`)
	trace = filepath.Join(dir, evilName+".pt.trace.json")
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join("..", "estimate", "testdata", "gpt2_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte(`{`), []byte(`{"_name_or_path": "gpt`+evilJSON+`", "architectures": ["GPT2`+evilJSON+`"],`), 1)
	config = filepath.Join(dir, evilName+"config.json")
	if err := os.WriteFile(config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return snap, snap2, trace, config
}

// TestNoEscapeReachesStdout runs every command that reads an input over
// inputs whose names (in the file and of the file) hold escape sequences:
// no ESC byte, and no C1 control, reaches stdout, in text or JSON (issue
// 28: frame and trace names were printed raw by analyze, trace and diff).
func TestNoEscapeReachesStdout(t *testing.T) {
	snap, snap2, trace, config := hostileInputs(t)
	out := t.TempDir()
	fleet := hostileFleet(t, snap, trace)
	bundle := hostileBundle(t)
	for _, args := range [][]string{
		{"analyze", snap},
		{"analyze", "--steps", "all", "--stacks", "full", snap},
		{"analyze", "--json", snap},
		{"analyze", "--out", out, snap},
		{"trace", trace},
		{"trace", "--json", trace},
		{"diff", snap, snap2},
		{"diff", "--json", snap, snap2},
		{"diff", trace, trace},
		{"check", "--max-peak", "1KiB", snap},
		{"check", "--json", "--max-peak", "1KiB", snap},
		{"export", "folded", snap},
		{"export", "perfetto", snap},
		{"export", "perfetto", trace},
		{"export", "memory-viz", snap},
		{"analyze", fleet},
		{"analyze", "--json", fleet},
		{"trace", fleet},
		{"trace", "--json", fleet},
		{"diff", fleet, fleet},
		{"estimate", "--from", bundle},
		{"estimate", "--json", "--from", bundle},
		{"estimate", "--from", bundle, "--sweep", "micro-batch=8,16"},
		{"estimate", "--config", config, "--seq", "128"},
		{"estimate", "--json", "--config", config, "--seq", "128"},
		{"serve", "--addr", "256.0.0.1:1", snap},
		{"help", "analyze"},
	} {
		var so, se bytes.Buffer
		code := Main(context.Background(), args, strings.NewReader(""), &so, &se)
		if code != 0 && code != 1 && args[0] != "serve" {
			t.Errorf("%q: exit %d: %q", args[:len(args)-1], code, se.String())
		}
		for _, bad := range []string{"\x1b", "\u009b", "\x07", "\u202e"} {
			if strings.Contains(so.String(), bad) {
				i := strings.Index(so.String(), bad)
				t.Errorf("%q: stdout holds %q: ...%q...", args[:len(args)-1], bad, so.String()[max(i-40, 0):min(i+40, so.Len())])
			}
			if strings.Contains(se.String(), bad) {
				t.Errorf("%q: stderr holds %q: %q", args[:len(args)-1], bad, se.String())
			}
		}
		if so.Len() == 0 && args[0] != "serve" {
			t.Errorf("%q: no output", args[:len(args)-1])
		}
	}
	// The offline page holds the names as data: no tag of theirs closes
	// the script that holds them.
	page := filepath.Join(out, "page.html")
	var so, se bytes.Buffer
	if code := Main(context.Background(), []string{"analyze", "--html", page, snap}, strings.NewReader(""), &so, &se); code != 0 {
		t.Fatalf("--html: exit %d: %q", code, se.String())
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(evilHTML)) || !bytes.Contains(b, []byte(`\u003c/script\u003e\u003cimg`)) {
		t.Errorf("the page does not hold the frame name escaped")
	}
}

// hostileFleet is a folder of two ranks, each a snapshot and a trace
// whose names hold escape sequences.
func hostileFleet(t *testing.T, snap, trace string) string {
	dir := t.TempDir()
	for r := 0; r < 2; r++ {
		rank := filepath.Join(dir, fmt.Sprintf("rank%d", r))
		if err := os.Mkdir(rank, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{snap, trace} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(rank, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// hostileBundle is a run bundle whose model class, model name and device
// name hold escape sequences.
func hostileBundle(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "bundle")
	copyTree(t, whatifBundle("wi_bf16_mb8"), dir)
	proc := filepath.Join(dir, "rank0", "process.json")
	b, err := os.ReadFile(proc)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{
		{`"class": "LlamaForCausalLM"`, `"class": "Llama` + evilJSON + `"`},
		{`"_name_or_path": ""`, `"_name_or_path": "m` + evilJSON + `"`},
		{`"device_name": "`, `"device_name": "` + evilJSON},
	} {
		if !bytes.Contains(b, []byte(r[0])) {
			t.Fatalf("process.json lacks %s", r[0])
		}
		b = bytes.Replace(b, []byte(r[0]), []byte(r[1]), 1)
	}
	if err := os.WriteFile(proc, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
