package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ptscope/ptscope/internal/report/rundir"

	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report/memreport"
	"github.com/ptscope/ptscope/internal/snapshot"
	"github.com/ptscope/ptscope/internal/units"
)

const analyzeUsage = `Usage: ptscope analyze [flags] FILE|DIR...

Analyse CUDA caching-allocator snapshots (torch.cuda.memory._dump_snapshot
pickles, JSON snapshots, gzip/xz/zstd compressed, or ptscope run bundles):
the peak and what was alive then (by category, stack, source line, module
and keyword group), steps and the leak/spike pattern, fragmentation,
out-of-memory explanations and findings with recommendations.

A folder is searched recursively for snapshots (by content, not by name).
Several inputs (ranks, iterations, runs) also print a comparison table.

Examples:
  ptscope analyze snapshot.pickle
  ptscope analyze --top 20 --stacks full rank0.pickle
  ptscope analyze --json snapshot.pickle > report.json
  ptscope analyze --out runs/ --device-memory 80GiB snapshots/
  ptscope analyze --rules my_groups.txt snapshot.pickle
  ptscope analyze --print-rules > my_groups.txt
`

type analyzeFlags struct {
	top          int
	device       int
	stacks       string
	json         bool
	out          string
	name         string
	deviceMemory string
	rules        string
	printRules   bool
}

func (f *analyzeFlags) register(fs interface {
	IntVar(*int, string, int, string)
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.IntVar(&f.top, "top", 10, "number of top allocations and groups to show")
	fs.IntVar(&f.device, "device", -1, "analyse only this device ordinal (-1: every device with data)")
	fs.StringVar(&f.stacks, "stacks", "short", "stack display: short (user frames) or full (every frame)")
	fs.StringVar(&f.deviceMemory, "device-memory", "", "device capacity for capacity findings, e.g. 80GiB (bundles know it)")
	fs.StringVar(&f.rules, "rules", "", "keyword-group rules file (\"group: regexp\" lines); see --print-rules")
}

// registerOutput adds --json, --out and --name.
func (f *analyzeFlags) registerOutput(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}, defaultName string) {
	fs.BoolVar(&f.json, "json", false, "print one JSON document (docs/json.md) instead of the report")
	fs.StringVar(&f.out, "out", "", "also write a run folder OUT/YYYYMMDD_HHMMSS_<name>/ with report, JSON and charts")
	fs.StringVar(&f.name, "name", defaultName, "name of the run folder (default: from the first input)")
}

func analyzeCommand() command {
	c := command{name: "analyze", summary: "analyse CUDA memory snapshots: peak, who, steps, leaks, fragmentation, OOMs", usage: analyzeUsage}
	c.run = func(e *env, args []string) error {
		var f analyzeFlags
		fs := newFlagSet(e, c)
		f.register(fs)
		f.registerOutput(fs, "")
		fs.BoolVar(&f.printRules, "print-rules", false, "print the built-in keyword-group rules and exit")
		paths, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if f.printRules {
			_, err := io.WriteString(e.stdout, memory.DefaultRulesText())
			return err
		}
		if len(paths) == 0 {
			return usagef("analyze: no input (give snapshot files or folders; see ptscope help analyze)")
		}
		tuneGC()
		doc, err := analyzePaths(paths, &f)
		if doc == nil {
			return err
		}
		return emitAnalysis(e, doc, &f, err)
	}
	return c
}

func memoryOptions(f *analyzeFlags) (memory.Options, error) {
	o := memory.Options{TopN: max(f.top, 1), FullStacks: f.stacks == "full"}
	if f.stacks != "short" && f.stacks != "full" {
		return o, usagef("--stacks must be short or full, not %q", f.stacks)
	}
	if f.deviceMemory != "" {
		n, err := units.ParseBytes(f.deviceMemory)
		if err != nil {
			return o, usagef("--device-memory: %v", err)
		}
		o.DeviceMemory = n
	}
	if f.rules != "" {
		fh, err := os.Open(f.rules)
		if err != nil {
			return o, err
		}
		defer fh.Close()
		rules, err := memory.ParseRules(fh)
		if err != nil {
			return o, fmt.Errorf("%s: %w", f.rules, err)
		}
		o.Rules = rules
	}
	return o, nil
}

// analyzePaths loads and analyses every snapshot under paths. A file that
// cannot be read is reported in its Input and in the returned error; the
// others are still analysed.
func analyzePaths(paths []string, f *analyzeFlags) (*memreport.Document, error) {
	o, err := memoryOptions(f)
	if err != nil {
		return nil, err
	}
	files, err := input.Find(paths, input.Snapshot, input.Bundle)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no snapshots found in %s", strings.Join(paths, ", "))
	}
	doc := &memreport.Document{SchemaVersion: 1, Tool: "ptscope", Command: "analyze"}
	var errs []error
	for _, file := range files {
		ins, err := analyzeFile(file, f, o)
		if err != nil {
			errs = append(errs, err)
		}
		doc.Inputs = append(doc.Inputs, ins...)
	}
	if len(doc.Inputs) > 1 {
		doc.Comparison = memreport.Compare(doc.Inputs)
	}
	return doc, errors.Join(errs...)
}

func analyzeFile(file input.File, f *analyzeFlags, o memory.Options) ([]*memreport.Input, error) {
	if file.Kind == input.Bundle {
		return analyzeBundle(file.Path, f, o)
	}
	in, err := analyzeSnapshotFile(file.Path, f, o)
	return []*memreport.Input{in}, err
}

func analyzeSnapshotFile(path string, f *analyzeFlags, o memory.Options) (*memreport.Input, error) {
	in := &memreport.Input{Path: path}
	s, err := snapshot.ReadFile(path)
	if err != nil {
		in.Error = err.Error()
		return in, err
	}
	fillInput(in, s, f, o)
	return in, nil
}

func fillInput(in *memreport.Input, s *snapshot.Snapshot, f *analyzeFlags, o memory.Options) {
	in.Format, in.Bytes = s.Format, s.InputBytes
	for _, d := range s.Devices() {
		if f.device >= 0 && d != f.device {
			continue
		}
		in.Devices = append(in.Devices, memory.Analyze(s, d, o))
	}
}

func emitAnalysis(e *env, doc *memreport.Document, f *analyzeFlags, loadErr error) error {
	if f.out != "" {
		dir, err := writeAnalysisRun(doc, f)
		if err != nil {
			return err
		}
		defer fmt.Fprintf(e.stderr, "wrote %s\n", dir)
	}
	if f.json {
		// Compact: documents of million-entry traces are large, and indenting
		// them costs as much as the analysis (pipe through jq to read).
		if err := json.NewEncoder(e.stdout).Encode(doc); err != nil {
			return err
		}
		return loadErr
	}
	if err := writeAnalysisText(e.stdout, doc, f); err != nil {
		return err
	}
	return loadErr
}

func writeAnalysisText(w io.Writer, doc *memreport.Document, f *analyzeFlags) error {
	for i, in := range doc.Inputs {
		if in.Error != "" {
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := memreport.WriteText(w, in, memreport.TextOptions{TopN: f.top}); err != nil {
			return err
		}
	}
	if len(doc.Comparison) > 1 {
		return memreport.WriteComparison(w, doc.Comparison)
	}
	return nil
}

func writeAnalysisRun(doc *memreport.Document, f *analyzeFlags) (string, error) {
	name := f.name
	if name == "" && len(doc.Inputs) > 0 {
		name = strings.TrimSuffix(filepath.Base(doc.Inputs[0].Path), filepath.Ext(doc.Inputs[0].Path))
	}
	dir, err := rundir.NewRunDir(f.out, name)
	if err != nil {
		return "", err
	}
	var txt strings.Builder
	if err := writeAnalysisText(&txt, doc, f); err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	files := map[string][]byte{
		"analysis_report.txt": []byte(txt.String()),
		"report.json":         append(js, '\n'),
		"README.md":           []byte(memreport.Markdown(doc)),
	}
	for name, data := range files {
		if err := rundir.WriteFileAtomic(filepath.Join(dir, name), data); err != nil {
			return "", err
		}
	}
	if err := memreport.WriteCharts(dir, doc); err != nil {
		return "", err
	}
	return dir, nil
}
