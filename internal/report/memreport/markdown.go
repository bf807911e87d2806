package memreport

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/report"
	"github.com/ptscope/ptscope/internal/units"
)

// Markdown renders the findings page of a run folder (README.md): per
// device the peak, what filled it, the findings with their
// recommendations, the largest sources and the charts.
func Markdown(rep *memory.Report, o report.TextOptions) string {
	o = normalize(o)
	var b strings.Builder
	b.WriteString("# ptscope analyze\n\n")
	n := 0
	for _, in := range rep.Inputs {
		n += len(in.Devices)
	}
	k := 0
	for _, in := range rep.Inputs {
		fmt.Fprintf(&b, "## %s\n\n", mdEscape(in.Path))
		if in.Error != "" {
			fmt.Fprintf(&b, "Could not be read: %s\n\n", mdEscape(in.Error))
			continue
		}
		for _, d := range in.Devices {
			suffix := ""
			if n > 1 {
				suffix = "_" + strconv.Itoa(k)
			}
			k++
			mdDevice(&b, in, d, suffix, o)
		}
	}
	if len(rep.Comparison) > 1 {
		b.WriteString("## Comparison\n\n| input | device | peak allocated | peak reserved | efficiency at the peak | pattern | top category | steps | OOMs |\n|---|---:|---:|---:|---:|---|---|---:|---:|\n")
		_, names := inputNames(rep.Comparison)
		for i, r := range rep.Comparison {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %d | %d |\n", mdEscape(names[i]), r.Device, units.Bytes(r.PeakAllocatedBytes),
				units.Bytes(r.PeakReservedBytes), units.Percent(r.EfficiencyAtPeakRatio), r.Pattern, r.TopCategory, r.Steps, r.OOMs)
		}
		b.WriteString("\n")
	}
	b.WriteString("Full data: report.json (docs/json.md); text report: report.txt.\n")
	return b.String()
}

func mdDevice(b *strings.Builder, in *memory.Input, d *memory.Result, suffix string, o report.TextOptions) {
	fmt.Fprintf(b, "### Device %d\n\n", d.Device)
	if d.HasHistory {
		fmt.Fprintf(b, "- Peak allocated: **%s** (%s B), reserved %s at the peak (%s at most); efficiency at the peak %s.\n",
			units.Bytes(d.Peak.AllocatedBytes), units.Count(d.Peak.AllocatedBytes), units.Bytes(d.Peak.ReservedAtPeakBytes),
			units.Bytes(d.Peak.ReservedBytes), units.Percent(d.Fragmentation.EfficiencyAtPeak))
		fmt.Fprintf(b, "- %d steps (from %s), pattern **%s**.\n", len(d.Steps), d.StepSource.Describe(), d.Pattern)
	} else {
		fmt.Fprintf(b, "- No allocation history: at dump time **%s** allocated, %s reserved.\n", units.Bytes(d.End.AllocatedBytes),
			units.Bytes(d.End.ReservedBytes))
	}
	if len(d.Categories) > 0 {
		var parts []string
		for _, c := range d.Categories {
			parts = append(parts, fmt.Sprintf("%s %s", c.Category, units.Bytes(c.Bytes)))
		}
		fmt.Fprintf(b, "- Alive then: %s.\n", strings.Join(parts, ", "))
	}
	b.WriteString("\n#### Findings\n\n")
	if len(d.Findings) == 0 {
		b.WriteString("None.\n")
	}
	for _, f := range d.Findings {
		fmt.Fprintf(b, "- **%s** `%s`: %s", f.Severity, f.ID, mdEscape(f.Message))
		if f.Recommendation != "" {
			fmt.Fprintf(b, " *%s*", mdEscape(f.Recommendation))
		}
		b.WriteString("\n")
	}
	if len(d.Sources) > 0 {
		b.WriteString("\n#### Largest sources\n\n| source | bytes | share | count |\n|---|---:|---:|---:|\n")
		for i, g := range d.Sources {
			if i >= o.Top {
				break
			}
			fmt.Fprintf(b, "| `%s` | %s | %s | %d |\n", strings.ReplaceAll(g.Name, "`", "'"), units.Bytes(g.Bytes), share(g.Bytes, d.Peak.AllocatedBytes), g.Count)
		}
	}
	b.WriteString("\n#### Charts\n\n")
	for _, c := range DeviceCharts(in, d) {
		fmt.Fprintf(b, "![%s](%s%s.svg)\n", strings.ReplaceAll(c.Name, "_", " "), c.Name, suffix)
	}
	b.WriteString("\n")
}

// mdEscape keeps text from being read as Markdown markup.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "*", `\*`, "_", `\_`, "<", "&lt;", ">", "&gt;", "`", "'").Replace(s)
}
