// Package memreport renders memory analyses (internal/memory results) as a
// terminal report, a Markdown findings page, a comparison table and charts.
// It only formats: every number comes from the analysis.
package memreport

import (
	"github.com/ptscope/ptscope/internal/memory"
)

// Input is one analysed file: what the analyze command reports per input.
type Input struct {
	Path    string           `json:"path"`
	Format  string           `json:"format"`
	Bytes   int64            `json:"bytes"`
	Devices []*memory.Device `json:"devices"`
	Bundle  *BundleInfo      `json:"bundle,omitempty"`
	Phases  []PhaseRow       `json:"phases,omitempty"`
	Error   string           `json:"error,omitempty"`
}

// BundleInfo describes the ptscope run bundle an input came from.
type BundleInfo struct {
	Dir              string `json:"dir"`
	Rank             int    `json:"rank"`
	GPU              string `json:"gpu,omitempty"`
	DeviceTotalBytes int64  `json:"device_total_bytes,omitempty"`
	Simulated        bool   `json:"simulated,omitempty"`
	Mode             string `json:"mode,omitempty"`       // capture | simulate-world | fake
	Simulation       string `json:"simulation,omitempty"` // what was simulated and what is not counted
}

// Document is the JSON document of `ptscope analyze --json`.
type Document struct {
	SchemaVersion int          `json:"schema_version"`
	Tool          string       `json:"tool"`
	Command       string       `json:"command"`
	Inputs        []*Input     `json:"inputs"`
	Comparison    []CompareRow `json:"comparison,omitempty"`
}

// CompareRow is one row of the cross-input table.
type CompareRow struct {
	Input              string  `json:"input"`
	Device             int     `json:"device"`
	PeakAllocatedBytes int64   `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64   `json:"peak_reserved_bytes"`
	EndAllocatedBytes  int64   `json:"end_allocated_bytes"`
	EfficiencyRatio    float64 `json:"efficiency_ratio"`
	Pattern            string  `json:"pattern"`
	TopCategory        string  `json:"top_category"`
	Steps              int     `json:"steps"`
	OOMs               int     `json:"ooms"`
}

// Compare builds the comparison rows of several inputs.
func Compare(in []*Input) []CompareRow {
	var out []CompareRow
	for _, x := range in {
		for _, d := range x.Devices {
			r := CompareRow{Input: x.Path, Device: d.Device, PeakAllocatedBytes: d.Peak.AllocatedBytes,
				PeakReservedBytes: d.Peak.ReservedBytes, EndAllocatedBytes: d.End.AllocatedBytes,
				EfficiencyRatio: d.FragmentationOut.PeakRatio, Pattern: d.Pattern, Steps: len(d.Steps), OOMs: len(d.OOMs)}
			if len(d.CategoriesAtPeak) > 0 {
				r.TopCategory = d.CategoriesAtPeak[0].Name
			}
			out = append(out, r)
		}
	}
	return out
}

// PhaseRow is one forward/backward/optimizer phase recorded by ptscope run,
// with the peak inside it taken from the snapshot's timeline.
type PhaseRow struct {
	Phase                string `json:"phase"`
	Rank                 int    `json:"rank"`
	Step                 int    `json:"step"`
	AllocatedBeforeBytes int64  `json:"allocated_before_bytes"`
	AllocatedAfterBytes  int64  `json:"allocated_after_bytes"`
	DeltaBytes           int64  `json:"delta_bytes"`
	PeakBytes            int64  `json:"peak_bytes"` // -1 when the snapshot does not cover the phase
	ReservedAfterBytes   int64  `json:"reserved_after_bytes"`
}
