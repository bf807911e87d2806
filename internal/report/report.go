// Package report holds what every ptscope renderer shares: the Document
// interface every command's result implements for the one output switch
// (the JSON envelope its results open with is internal/envelope), text options (width, colour, how
// many steps and frames), width-aware text helpers and aligned tables.
// Renderers by result live in subpackages (memreport, tracereport,
// estreport, ...); run folders in rundir; charts in chart.
package report

import (
	"io"

	"github.com/ptscope/ptscope/internal/report/rundir"
)

// Steps selects which steps a text report lists.
type Steps uint8

const (
	// StepsSummary lists the first and last steps, the slowest and the
	// largest, and outliers, and says how many were left out.
	StepsSummary Steps = iota
	// StepsAll lists every step.
	StepsAll
)

// Stacks selects how much of each stack a text report prints.
type Stacks uint8

const (
	// StacksShort prints a few frames, always including the user's own
	// frame (the first outside torch and site-packages), and hides C++
	// frames when Python frames exist.
	StacksShort Stacks = iota
	// StacksFull prints every recorded frame.
	StacksFull
)

// TextOptions say how a text report is laid out. The zero value is not
// useful: start from DefaultText.
type TextOptions struct {
	Width int  // line width in columns; every line fits it
	Color bool // ANSI colour for severities
	// Mark, when set, starts the colour sequences instead of ESC: the
	// output goes through a term.SafeWriter, which escapes every other ESC
	// (names from inputs) and turns this mark into ESC.
	Mark   string
	Top    int    // rows of ranked tables (top allocations, operators, ...)
	Steps  Steps  // which steps to list
	Stacks Stacks // how much of each stack
}

// DefaultText are the options of a report written to a file: 100 columns,
// no colour, 10 rows, summarised steps, short stacks.
func DefaultText() TextOptions {
	return TextOptions{Width: 100, Top: 10}
}

// Document is a command's complete result as every output renders it: the
// JSON (the value itself, marshalled with encoding/json, which embeds
// Header), the terminal text, and the extra files of a run folder. A
// renderer trims (top rows, summarised steps); the document stays complete.
type Document interface {
	// WriteText writes the terminal report.
	WriteText(w io.Writer, o TextOptions) error
	// RunFiles are the files of a run folder besides report.txt and
	// report.json, which the output switch writes: README.md, charts.
	RunFiles(o TextOptions) ([]rundir.File, error)
	// RunName names the run folder when --name is not given (usually the
	// first input's base name without its extension).
	RunName() string
}
