package cli

import (
	"bufio"
	"io"
	"os"
	"path/filepath"

	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/web/view"
)

// writeHTMLFile writes the --html page to path through a temporary file,
// so that a failed write leaves no half page.
// writeHTMLFile writes the --html page to a temporary file beside path and
// renames it into place once complete and the command was not
// interrupted (a failed or interrupted write leaves no file).
func (e *env) writeHTMLFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ptscope-html-*")
	if err != nil {
		return writeError(path, err)
	}
	defer e.temp(tmp.Name())()
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(ctxWriter{e.ctx, tmp}, 1<<20)
	if err := write(bw); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := e.ctx.Err(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// htmlSnapshots writes the page of analyze's inputs (one view per device).
func htmlSnapshots(w io.Writer, set *load.SnapshotSet) error {
	var mems []view.HTMLMemory
	for k, in := range set.Inputs {
		for _, a := range in.Devices {
			mems = append(mems, view.HTMLMemory{Path: in.Path, Analysis: a, PhaseRows: set.Report.Inputs[k].Phases})
		}
	}
	return view.WriteHTML(w, "ptscope analyze", mems, nil, view.HTMLOptions{})
}

// htmlTraces writes the page of trace's inputs (their models were kept).
func htmlTraces(w io.Writer, set *load.TraceSet) error {
	var ts []view.HTMLTrace
	for k := range set.Report.Ranks {
		if k < len(set.Models) && set.Models[k] != nil {
			ts = append(ts, view.HTMLTrace{Path: set.Report.Ranks[k].Path, Model: set.Models[k], Result: &set.Report.Ranks[k]})
		}
	}
	return view.WriteHTML(w, "ptscope trace", nil, ts, view.HTMLOptions{})
}
