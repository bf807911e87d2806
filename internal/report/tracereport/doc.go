// Package tracereport renders trace analyses (perf.Report) as a terminal
// report in views, a run folder's README.md and charts. It only formats and
// trims: every number comes from the analysis, and the JSON is the report
// itself.
package tracereport

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/report"
)

// View is one of the text report's views.
type View string

// The views of `ptscope trace --view`.
const (
	Overview  View = "overview"  // steps, where the step goes, findings, top operators and kernels
	Operators View = "operators" // the operator table
	Kernels   View = "kernels"   // the kernel table
	Steps     View = "steps"     // steps with their breakdown and phases, user annotations
	Idle      View = "idle"      // GPU idle split, launches, copies, synchronisations
	Comm      View = "comm"      // communication and the cross-rank comparison
	Memory    View = "memory"    // the [memory] curve's peaks, memory by operator
	Critical  View = "critical"  // HTA's critical path
	Sequences View = "sequences" // kernel sequences (fusion candidates)
	Modules   View = "modules"   // the module view
	Streams   View = "streams"   // queues, idle gaps, copy bandwidth, GPU annotations
)

// Views lists every view, in help order.
var Views = []View{Overview, Operators, Kernels, Steps, Idle, Comm, Memory, Critical, Sequences, Modules, Streams}

// ParseView reads a view name.
func ParseView(s string) (View, error) {
	for _, v := range Views {
		if string(v) == s {
			return v, nil
		}
	}
	names := make([]string, len(Views))
	for i, v := range Views {
		names[i] = string(v)
	}
	return "", fmt.Errorf("unknown view %q (%s)", s, strings.Join(names, ", "))
}

// Document is a perf.Report as the output switch renders it (it implements
// report.Document): its JSON is the report itself; its text shows one view.
type Document struct {
	Report *perf.Report
	View   View
	// Name names the run folder (default: the first trace's file name
	// without its extensions).
	Name string
}

// New returns the document of rep showing view.
func New(rep *perf.Report, view View) *Document {
	if view == "" {
		view = Overview
	}
	return &Document{Report: rep, View: view}
}

// MarshalJSON writes the report.
func (d *Document) MarshalJSON() ([]byte, error) { return json.Marshal(d.Report) }

// RunName names the run folder.
func (d *Document) RunName() string {
	if d.Name != "" {
		return d.Name
	}
	if len(d.Report.Ranks) == 0 {
		return "trace"
	}
	return BaseName(d.Report.Ranks[0].Path)
}

// BaseName is a trace file's name without its extensions
// ("rank0.123.pt.trace.json.gz" -> "rank0.123").
func BaseName(path string) string {
	b := filepath.Base(filepath.Clean(path))
	for _, ext := range []string{".gz", ".xz", ".zst", ".zstd", ".json", ".trace", ".pt"} {
		b = strings.TrimSuffix(b, ext)
	}
	if b == "" || b == "." || b == "/" {
		return "trace"
	}
	return b
}

var _ report.Document = (*Document)(nil)
