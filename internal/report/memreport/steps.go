package memreport

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

// stepRole says why a summarised step row is shown.
type stepRole struct {
	index int
	roles []string
}

// pickSteps chooses the steps a summary lists: the first and the last,
// the slowest and the largest full step, and the outliers.
func pickSteps(steps []memory.StepRow, hasTime bool) []stepRole {
	roles := map[int][]string{}
	add := func(i int, r string) { roles[i] = append(roles[i], r) }
	add(0, "first")
	add(len(steps)-1, "last")
	slow, large := -1, -1
	for i, s := range steps {
		if s.Partial {
			continue
		}
		if hasTime && (slow < 0 || s.DurationNS > steps[slow].DurationNS) {
			slow = i
		}
		if large < 0 || s.PeakAllocatedBytes > steps[large].PeakAllocatedBytes {
			large = i
		}
	}
	if slow >= 0 {
		add(slow, "slowest")
	}
	if large >= 0 {
		add(large, "largest")
	}
	outliers := 0
	for i, s := range steps {
		if s.Outlier && outliers < maxOutlierRows {
			outliers++
			if len(roles[i]) == 0 {
				add(i, "outlier")
			}
		}
	}
	var out []stepRole
	for i := range steps {
		if r, ok := roles[i]; ok {
			out = append(out, stepRole{i, r})
		}
	}
	return out
}

// Step summaries list every step up to allStepsUpTo steps, else the
// chosen ones with at most maxOutlierRows outliers.
const (
	allStepsUpTo   = 12
	maxOutlierRows = 8
)

func writeSteps(p *printer, d *memory.Result) {
	o := p.o
	if len(d.Steps) == 0 {
		p.section("Steps: none found (no annotations, optimizer frames or repeating pattern)")
		return
	}
	p.section(fmt.Sprintf("Steps (%d, found from %s): pattern %s", len(d.Steps), d.StepSource.Describe(), strings.ToUpper(d.Pattern.String())))
	var rows []stepRole
	if o.Steps == report.StepsAll || len(d.Steps) <= allStepsUpTo {
		for i := range d.Steps {
			rows = append(rows, stepRole{index: i})
		}
	} else {
		rows = pickSteps(d.Steps, d.HasTime)
	}
	t := &report.Table{Header: []string{"step", "entries", "duration", "peak allocated", "end allocated", "note"}}
	for _, r := range rows {
		s := d.Steps[r.index]
		var note []string
		if s.Partial {
			note = append(note, "partial")
		}
		note = append(note, r.roles...)
		if s.Outlier && len(r.roles) == 0 {
			note = append(note, "outlier")
		}
		dur := "-"
		if d.HasTime || s.DurationNS > 0 {
			dur = units.Duration(s.DurationNS)
		}
		entries, peak := "-", units.Bytes(s.PeakAllocatedBytes)
		if s.StartIndex >= 0 {
			entries = units.Count(int64(s.EndIndex - s.StartIndex))
		}
		if s.PeakLowerBound {
			// a run recorded in windows: no window holds the step, and
			// torch's running maximum did not rise in it
			note = append(note, "peak at least")
		}
		t.Rows = append(t.Rows, []string{s.Name, entries, dur, peak, units.Bytes(s.EndAllocatedBytes), strings.Join(note, ", ")})
	}
	p.table(t)
	if left := len(d.Steps) - len(rows); left > 0 {
		p.f("  … %d more steps (--steps all)", left)
	}
	if l := d.Leak; l != nil {
		p.wrap(fmt.Sprintf("%s per step, %s over %d steps; allocations made in those steps and never freed:",
			units.Bytes(l.PerStepBytes), units.Bytes(l.GrowthBytes), l.Steps), "  leak: ", "    ")
		n := min(len(l.Stacks), 5)
		for _, s := range l.Stacks[:n] {
			p.line(report.CutMiddle(fmt.Sprintf("    %s in %s allocations from %s", units.Bytes(s.Bytes), units.Count(int64(s.Count)), s.Source), o.Width))
			if _, user := s.Short(1); user != nil && memory.ShortFrame(*user) != s.Source {
				p.line(report.CutMiddle("      … "+memory.ShortFrame(*user), o.Width))
			}
		}
		p.more(len(l.Stacks)-n, "leaking stacks")
	}
}

func writePhases(p *printer, phases []memory.PhaseRow) {
	p.section("Phases (ptscope run)")
	rows := phases
	left := 0
	if p.o.Steps != report.StepsAll && len(phases) > 3*allStepsUpTo {
		rows, left = pickPhaseRows(phases)
	}
	t := &report.Table{Header: []string{"step", "phase", "rank", "allocated before", "after", "delta", "peak in phase", "reserved after"}}
	for _, ph := range rows {
		peak := "-"
		if ph.PeakBytes >= 0 {
			peak = units.Bytes(ph.PeakBytes)
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(ph.Step), ph.Phase, strconv.Itoa(ph.Rank), units.Bytes(ph.AllocatedBeforeBytes),
			units.Bytes(ph.AllocatedAfterBytes), units.Bytes(ph.DeltaBytes), peak, units.Bytes(ph.ReservedAfterBytes)})
	}
	p.table(t)
	if left > 0 {
		p.f("  … %d more phases (--steps all)", left)
	}
}

// pickPhaseRows keeps the phases of the first and last steps and of the
// step with the highest phase peak.
func pickPhaseRows(phases []memory.PhaseRow) ([]memory.PhaseRow, int) {
	first, last := phases[0].Step, phases[len(phases)-1].Step
	top := phases[0]
	for _, ph := range phases {
		if ph.PeakBytes > top.PeakBytes {
			top = ph
		}
	}
	var out []memory.PhaseRow
	for _, ph := range phases {
		if ph.Step == first || ph.Step == last || ph.Step == top.Step {
			out = append(out, ph)
		}
	}
	return out, len(phases) - len(out)
}
