//go:build !windows

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/testfixture"
)

func runCLI(t *testing.T, args ...string) (exited *capture.Result, stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	err = runCapture(e, runCommand(), args, func(r *capture.Result) { exited = r })
	return exited, out.String(), errb.String(), err
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"--"}, "no command given"},
		{[]string{"--schedule", "active=0", "--", "true"}, "active must be at least 1"},
		{[]string{"--snapshot-at", "start", "--", "true"}, "unknown \"start\""},
		{[]string{"--ranks", "x", "--", "true"}, "not a rank number"},
		{[]string{"--max-snapshot-size", "lots", "--", "true"}, "max-snapshot-size"},
		{[]string{"--stacks", "cpp", "--", "true"}, "stacks"},
		{[]string{"--interval", "1ms", "--", "true"}, "interval"},
		{[]string{"--no-such-flag", "true"}, "unknown flag --no-such-flag"},
		{[]string{"--simulate-world-size", "0", "--", "true"}, "simulate-world-size must be at least 1"},
		{[]string{"--simulate-world-size", "2", "--simulate-rank", "2", "--", "true"}, "simulate-rank 2 must be in 0..1"},
		{[]string{"--simulate-rank", "1", "--", "true"}, "needs --simulate-world-size"},
		{[]string{"--simulate-world-size", "4", "--simulate-rank", "1,x", "--", "true"}, "not a rank number"},
		{[]string{"--simulate-rank", "all", "--", "true"}, "simulate-rank all needs --simulate-world-size"},
		{[]string{"--simulate-world-size", "4", "--simulate-rank", "0-4", "--", "true"}, "simulate-rank 4 must be in 0..3"},
		{[]string{"--simulate-world-size", "4", "--simulate-imbalance", "0.5", "--", "true"}, "simulate-imbalance 0.5"},
		{[]string{"--simulate-imbalance", "1.3", "--", "true"}, "simulate-imbalance needs --simulate-world-size"},
	}
	for _, tt := range tests {
		exited, _, _, err := runCLI(t, append([]string{"--out", t.TempDir()}, tt.args...)...)
		var ue *usageError
		if err == nil || !strings.Contains(err.Error(), tt.want) || !asUsage(err, &ue) {
			t.Errorf("run %q: err %v, want usage error containing %q", tt.args, err, tt.want)
		}
		if exited != nil {
			t.Errorf("run %q: exited", tt.args)
		}
	}
}

func asUsage(err error, ue **usageError) bool {
	u, ok := err.(*usageError)
	*ue = u
	return ok
}

func TestRunExitCodes(t *testing.T) {
	out := t.TempDir()
	exited, _, stderr, err := runCLI(t, "--out", out, "--quiet", "--", "sh", "-c", "exit 0")
	if err != nil || exited != nil {
		t.Errorf("exit 0: err %v exited %+v", err, exited)
	}
	if stderr != "" { // --quiet: the "nothing was captured" warning stays in the manifest
		t.Errorf("stderr %q, want nothing with --quiet", stderr)
	}
	b, err := bundle.ReadBundle(out)
	if err != nil || len(b.Manifest.Warnings) != 1 || !strings.Contains(b.Manifest.Warnings[0], "no Python process loaded the ptscope companion") {
		t.Errorf("manifest warnings %+v, %v", b, err)
	}
	if _, _, stderr, _ = runCLI(t, "--out", t.TempDir(), "--", "sh", "-c", "exit 0"); !strings.Contains(stderr, "ptscope: warning: nothing was captured: no Python process loaded the ptscope companion") {
		t.Errorf("without --quiet: stderr %q", stderr)
	}
	exited, _, _, err = runCLI(t, "--out", out, "--quiet", "sh", "-c", "exit 9") // no "--" needed
	if err != nil || exited == nil || exited.ExitCode != 9 {
		t.Errorf("exit 9: err %v exited %+v", err, exited)
	}
	exited, _, stderr, err = runCLI(t, "--out", out, "--", "no-such-command-ptscope")
	if err != nil || exited == nil || exited.ExitCode != 127 || !strings.Contains(stderr, "command not found") {
		t.Errorf("not found: err %v exited %+v stderr %q", err, exited, stderr)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*_sh*", "manifest.json")); len(m) != 2 {
		t.Errorf("bundles: %q", m)
	}
}

func TestRunStreamsAndSummary(t *testing.T) {
	py, err := testfixture.PythonPath()
	if err != nil {
		t.Skip("python3 not found")
	}
	out := t.TempDir()
	exited, stdout, stderr, err := runCLI(t, "--out", out, "--name", "demo", "--", py, "-c", "print('hello')")
	if err != nil || exited != nil || stdout != "hello\n" {
		t.Fatalf("err %v exited %+v stdout %q", err, exited, stdout)
	}
	if !strings.Contains(stderr, "ptscope: bundle ") || !strings.Contains(stderr, "_demo (exit 0") {
		t.Errorf("summary missing: %q", stderr)
	}
	b, err := bundle.ReadBundle(filepath.Join(out, "latest"))
	if err != nil || b.Manifest.Name != "demo" || b.Manifest.Tool != "ptscope "+Version {
		t.Errorf("bundle %+v %v", b, err)
	}
}

func TestRunHelp(t *testing.T) {
	var out bytes.Buffer
	code := Main(context.Background(), []string{"help", "run"}, nil, &out, &out)
	if code != 0 || !strings.Contains(out.String(), "wait warm warm ACT") || !strings.Contains(out.String(), "ptscope run -- python train.py") {
		t.Errorf("help run: code %d\n%s", code, out.String())
	}
}

// TestRunSimulateAllRanksIsAJob: --simulate-rank all writes one bundle with
// a folder per rank, which analyze reads as an N-rank job with each rank's
// own peak (faketorch stands for torch).
func TestRunSimulateAllRanksIsAJob(t *testing.T) {
	py, err := testfixture.PythonPath()
	if err != nil {
		t.Skip("python3 not found")
	}
	if exec.Command(py, "-c", "import torch").Run() == nil {
		t.Skip("real torch importable: faketorch would be shadowed")
	}
	ft, err := filepath.Abs("../capture/testdata/faketorch")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", ft)
	out := t.TempDir()
	exited, _, stderr, err := runCLI(t, "--out", out, "--quiet", "--simulate-world-size", "4", "--simulate-rank", "all",
		"--", py, "../capture/testdata/faketrain.py", "3")
	if err != nil || exited != nil {
		t.Fatalf("run: err %v exited %+v stderr %s", err, exited, stderr)
	}
	b, err := bundle.ReadBundle(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Ranks) != 4 || b.Manifest.Simulation == nil || len(b.Manifest.Simulation.Ranks) != 4 {
		t.Fatalf("ranks %d simulation %+v", len(b.Ranks), b.Manifest.Simulation)
	}
	code, js, errs := run(t, "analyze", "--fleet", "on", "--json", filepath.Join(out, "latest"))
	if code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, errs)
	}
	var doc struct {
		Ranks  int `json:"ranks"`
		Memory struct {
			Ranks []struct {
				Rank int   `json:"rank"`
				Peak int64 `json:"peak_allocated_bytes"`
			} `json:"ranks"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	if doc.Ranks != 4 || len(doc.Memory.Ranks) != 4 {
		t.Fatalf("analyze read %d ranks (%d with memory): %s", doc.Ranks, len(doc.Memory.Ranks), js)
	}
	for i, r := range doc.Memory.Ranks {
		if want := b.Ranks[i].Info.MaxAllocatedBytes; r.Rank != b.Ranks[i].Rank || r.Peak != want || want == 0 {
			t.Errorf("analyze rank %d peak %d, the bundle's rank %d has %d", r.Rank, r.Peak, b.Ranks[i].Rank, want)
		}
	}
}
