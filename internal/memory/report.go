package memory

import (
	"github.com/ptscope/ptscope/internal/envelope"
	"github.com/ptscope/ptscope/internal/whatif"
)

// Report is the document of `ptscope analyze` (docs/json.md): the v2
// envelope, every input with the results of its devices, and a comparison
// when there are several.
type Report struct {
	envelope.Header
	Inputs     []*Input     `json:"inputs"`
	Comparison []CompareRow `json:"comparison,omitempty"` // two or more device results only
}

// NewReport returns an empty analyze document.
func NewReport() *Report {
	return &Report{Header: envelope.NewHeader("analyze"), Inputs: []*Input{}}
}

// Input is one analysed file (or one rank of a ptscope run bundle).
type Input struct {
	Path    string      `json:"path"`
	Format  string      `json:"format"`
	Bytes   int64       `json:"bytes"` // decompressed bytes read
	Devices []*Result   `json:"devices"`
	Bundle  *BundleInfo `json:"bundle,omitempty"`
	Phases  []PhaseRow  `json:"phases,omitempty"` // bundles only
	// StackWindows are the windows of a bundle rank that recorded its
	// allocator history only in windows (BundleInfo.HistoryMode
	// "windows"), a snapshot each; Devices then holds the rank's run read
	// as one (docs/analyze.md).
	StackWindows []StackWindow `json:"stack_windows,omitempty"`
	// Advice, for a bundle rank that ran out of memory or came near its
	// device's limit: the peak its job needs and the cheapest changes that
	// fit, predicted from the run (internal/whatif).
	Advice *whatif.Advice `json:"advice,omitempty"`
	Error  string         `json:"error,omitempty"` // the input could not be read
}

// StackWindow is a span of steps of a ptscope run whose allocations were
// recorded with Python stacks and saved in a snapshot of their own.
type StackWindow struct {
	FirstStep int    `json:"first_step"` // 0-based; -1: the set-up before step 0
	LastStep  int    `json:"last_step"`
	Reason    string `json:"reason"` // setup, warmup, periodic, peak, capacity, requested, all, unlisted
	// Snapshot is the file of the rank folder holding the window's trace;
	// "" when it was not written (over --max-snapshot-size).
	Snapshot string `json:"snapshot,omitempty"`
	StartNS  int64  `json:"start_ns"`
	EndNS    int64  `json:"end_ns"`
	Entries  int    `json:"entries"` // trace entries of its snapshot
	// PeakAllocatedBytes is the most allocated in the snapshot's replay;
	// 0 when it was not written or could not be read.
	PeakAllocatedBytes int64 `json:"peak_allocated_bytes"`
	// View marks the window whose snapshot the view at the peak comes
	// from (BundleInfo.PeakSnapshot).
	View  bool   `json:"view,omitempty"`
	Error string `json:"error,omitempty"` // its snapshot could not be read
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
	// SkippedSnapshots are the rank's snapshots not analysed, and why.
	SkippedSnapshots []SkippedSnapshot `json:"skipped_snapshots,omitempty"`
	// HistoryMode is "windows" when the rank recorded its allocator
	// history only in stack windows (Input.StackWindows); absent when
	// the history covered the run.
	HistoryMode string `json:"history_mode,omitempty"`
	// PeakSnapshot, in history mode "windows", is the snapshot of the
	// rank folder the view at the peak comes from: the window whose
	// replay peaks highest, or the out-of-memory snapshot.
	PeakSnapshot string `json:"peak_snapshot,omitempty"`
	// Unfinished is set when the rank's process had not finished when the
	// bundle was read (it was killed, or still runs): process.json has no
	// end time, there is no end snapshot, and what it recorded after its
	// last record (the last saved window, the last flush of its phases)
	// is missing.
	Unfinished bool `json:"unfinished,omitempty"`
}

// SkippedSnapshot is a snapshot of a bundle's rank that analyze left out
// because another of the rank's snapshots holds what it would show.
type SkippedSnapshot struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// PhaseRow is one forward/backward/optimizer phase recorded by ptscope run,
// with the peak inside it taken from the snapshot's timeline.
type PhaseRow struct {
	Phase                string `json:"phase"`
	Rank                 int    `json:"rank"`
	Step                 int    `json:"step"`
	StartNS              int64  `json:"start_ns"`
	EndNS                int64  `json:"end_ns"`
	AllocatedBeforeBytes int64  `json:"allocated_before_bytes"`
	AllocatedAfterBytes  int64  `json:"allocated_after_bytes"`
	DeltaBytes           int64  `json:"delta_bytes"`
	PeakBytes            int64  `json:"peak_bytes"` // -1 when the snapshot does not cover the phase
	ReservedAfterBytes   int64  `json:"reserved_after_bytes"`
	// MaxAllocatedBytes and MaxReservedBytes are torch's running maxima
	// (max_memory_allocated, max_memory_reserved) as the phase ended, or
	// as it began where that was higher (a reset between phases).
	MaxAllocatedBytes int64 `json:"max_allocated_bytes"`
	MaxReservedBytes  int64 `json:"max_reserved_bytes"`
}

// PhasePeaks are the highest allocated and reserved memory that rows (one
// rank's phases) saw: torch's running maxima as the phases read them, or
// their own counters where higher (phases of bundles that predate the
// maxima). For a bundle rank without allocator snapshots they are its
// peaks.
func PhasePeaks(rows []PhaseRow) (allocated, reserved int64) {
	for _, ph := range rows {
		allocated = max(allocated, ph.MaxAllocatedBytes, ph.PeakBytes, ph.AllocatedBeforeBytes, ph.AllocatedAfterBytes)
		reserved = max(reserved, ph.MaxReservedBytes, ph.ReservedAfterBytes)
	}
	return allocated, reserved
}

// CompareRow is one device of one input in the comparison of several.
type CompareRow struct {
	Input                 string   `json:"input"`
	Device                int      `json:"device"`
	PeakAllocatedBytes    int64    `json:"peak_allocated_bytes"`
	PeakReservedBytes     int64    `json:"peak_reserved_bytes"`
	EndAllocatedBytes     int64    `json:"end_allocated_bytes"`
	EfficiencyAtPeakRatio float64  `json:"efficiency_at_peak_ratio"`
	Pattern               Pattern  `json:"pattern"`
	TopCategory           Category `json:"top_category"` // unknown when nothing was alive
	Steps                 int      `json:"steps"`
	OOMs                  int      `json:"ooms"`
}

// Compare fills the comparison of a report with two or more device
// results (and clears it otherwise), and flags the ranks of a run whose
// peaks differ (rank-imbalance).
func (rep *Report) Compare() {
	rep.rankImbalance()
	var rows []CompareRow
	for _, x := range rep.Inputs {
		for _, d := range x.Devices {
			r := CompareRow{Input: x.Path, Device: d.Device, PeakAllocatedBytes: d.Peak.AllocatedBytes,
				PeakReservedBytes: d.Peak.ReservedBytes, EndAllocatedBytes: d.End.AllocatedBytes,
				EfficiencyAtPeakRatio: d.Fragmentation.EfficiencyAtPeak, Pattern: d.Pattern, Steps: len(d.Steps), OOMs: d.OOMCount()}
			if len(d.Categories) > 0 {
				r.TopCategory = d.Categories[0].Category
			}
			rows = append(rows, r)
		}
	}
	if len(rows) < 2 {
		rows = nil
	}
	rep.Comparison = rows
}

// RunPeakAllocatedBytes is the peak allocated memory of device result d of
// in as a threshold or a summary of runs counts it: the replay's peak, and
// for a run recorded in stack windows the higher of it and the process's
// own max_memory_allocated (the run may have peaked outside every window,
// where the peak view cannot show it).
func (in *Input) RunPeakAllocatedBytes(d *Result) int64 {
	if len(in.StackWindows) > 0 {
		return max(d.Peak.AllocatedBytes, d.Peak.ProcessMaxAllocatedBytes)
	}
	return d.Peak.AllocatedBytes
}
