package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/rundir"
	"github.com/ptscope/ptscope/internal/term"
)

// outputFlags is the one output switch of every command that renders a
// report.Document: text on stdout (the default), --json, --out DIR (a run
// folder, besides either), --steps where the text lists steps.
type outputFlags struct {
	json  bool
	out   string
	name  string
	steps string
	html  string
	// folder lists what the run folder holds, for --out's help (default:
	// report.txt, report.json, charts); set it before register
	folder string
	// writeHTML writes the --html page; commands that offer --html set it
	writeHTML func(w io.Writer) error
}

func (o *outputFlags) register(fs *flag.FlagSet) {
	folder := o.folder
	if folder == "" {
		folder = "report.txt, report.json, charts"
	}
	fs.BoolVar(&o.json, "json", false, "print one JSON document (docs/json.md) instead of the text report")
	fs.StringVar(&o.out, "out", "", "also write a run folder `DIR`/YYYYMMDD_HHMMSS_NAME/ ("+folder+")")
	fs.StringVar(&o.name, "name", "", "`NAME` of the run folder (default: from the first input)")
}

// registerSteps adds --steps (commands whose text lists steps).
func (o *outputFlags) registerSteps(fs *flag.FlagSet) {
	fs.StringVar(&o.steps, "steps", "summary", "steps listed in text: summary (first, last, slowest, largest, outliers) or all")
}

// registerHTML adds --html FILE (commands whose models the web page shows).
func (o *outputFlags) registerHTML(fs *flag.FlagSet) {
	fs.StringVar(&o.html, "html", "", "also write `FILE`: the interactive page of ptscope serve with the data inlined, one offline file (docs/serve.md)")
}

// text returns the text options for output to w.
func (o *outputFlags) text(w io.Writer) (report.TextOptions, error) {
	t := report.DefaultText()
	t.Width = term.Width(w)
	t.Color = term.Color(w)
	if sw, ok := w.(*term.SafeWriter); ok {
		t.Mark = sw.Mark()
	}
	switch o.steps {
	case "", "summary":
		t.Steps = report.StepsSummary
	case "all":
		t.Steps = report.StepsAll
	default:
		return t, usagef("--steps must be summary or all, not %q", o.steps)
	}
	return t, nil
}

// emit renders doc: the run folder first when --out is given ("wrote DIR"
// on stderr), then JSON or text on stdout. t are the text options for
// stdout; the run folder's report.txt is laid out for 100 columns without
// colour.
func (e *env) emit(doc report.Document, o *outputFlags, t report.TextOptions) error {
	if o.out != "" {
		dir, err := e.writeRun(doc, o, t)
		if dir != "" {
			defer fmt.Fprintf(e.stderr, "wrote %s\n", dir)
		}
		if err != nil {
			return err
		}
	}
	if o.html != "" && o.writeHTML != nil {
		if err := e.writeHTMLFile(o.html, o.writeHTML); err != nil {
			return err
		}
		defer fmt.Fprintf(e.stderr, "wrote %s\n", o.html)
	}
	if o.json {
		// compact: documents of million-entry inputs are large, and
		// indenting them costs as much as the analysis (pipe through jq)
		return json.NewEncoder(e.stdout).Encode(doc)
	}
	return doc.WriteText(e.stdout, t)
}

// writeRun writes the run folder whole or not at all (rundir.Write): a
// failed write or Ctrl-C leaves no folder and latest unmoved.
func (e *env) writeRun(doc report.Document, o *outputFlags, t report.TextOptions) (string, error) {
	ft := t
	ft.Width, ft.Color = report.DefaultText().Width, false
	var txt strings.Builder
	if err := doc.WriteText(&txt, ft); err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	extra, err := doc.RunFiles(ft)
	if err != nil {
		return "", err
	}
	files := append([]rundir.File{{Name: "report.txt", Data: []byte(txt.String())}, {Name: "report.json", Data: append(js, '\n')}}, extra...)
	name := o.name
	if name == "" {
		name = doc.RunName()
	}
	return rundir.Write(e.ctx, o.out, name, files, e.temp)
}

// baseName is an input's file name without its extensions (".pt.trace.json.gz"
// and ".pickle.xz" included), for run folder names.
func baseName(path string) string {
	b := filepath.Base(strings.TrimRight(path, "/"))
	for _, ext := range []string{".gz", ".xz", ".zst", ".zstd", ".json", ".pickle", ".pkl", ".trace", ".pt"} {
		b = strings.TrimSuffix(b, ext)
	}
	for _, ext := range []string{".json", ".trace", ".pt"} {
		b = strings.TrimSuffix(b, ext)
	}
	if b == "" || b == "." || b == "/" {
		return "run"
	}
	return b
}
