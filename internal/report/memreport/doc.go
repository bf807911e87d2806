// Package memreport renders the analyze document (memory.Report): the
// terminal report, the Markdown page and the charts of a run folder, and the
// comparison table of several inputs. It only lays out what the result
// holds: every number comes from the analysis, and every chart is drawn
// from the result's thinned timeline and groups, never from the snapshot.
package memreport

import (
	"path/filepath"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/report/rundir"
)

// Document is an analyze report as the output switch renders it: its JSON
// is the embedded memory.Report itself.
type Document struct {
	*memory.Report
}

var _ report.Document = (*Document)(nil)

// New wraps a report for rendering.
func New(r *memory.Report) *Document { return &Document{Report: r} }

// RunName is the first input's file name without its extensions.
func (d *Document) RunName() string {
	if len(d.Inputs) == 0 {
		return "analyze"
	}
	return baseName(d.Inputs[0].Path)
}

// baseName is a path's file name without its extensions (".pickle.xz"
// included), for run folder names.
func baseName(p string) string {
	b := filepath.Base(strings.TrimRight(p, "/"))
	for {
		ext := filepath.Ext(b)
		switch ext {
		case ".gz", ".xz", ".zst", ".zstd", ".json", ".pickle", ".pkl", ".pt", ".trace":
			b = strings.TrimSuffix(b, ext)
			continue
		}
		break
	}
	if b == "" || b == "." || b == "/" {
		return "analyze"
	}
	return b
}

// RunFiles are README.md and the charts of every device.
func (d *Document) RunFiles(o report.TextOptions) ([]rundir.File, error) {
	files := []rundir.File{{Name: "README.md", Data: []byte(Markdown(d.Report, o))}}
	charts, err := Charts(d.Report)
	if err != nil {
		return nil, err
	}
	return append(files, charts...), nil
}
