package memreport

import (
	"fmt"
	"strings"

	"github.com/ptscope/ptscope/internal/units"
)

// Markdown renders the findings page (README.md of a run folder).
func Markdown(doc *Document) string {
	var b strings.Builder
	b.WriteString("# ptscope analyze\n\n")
	for _, in := range doc.Inputs {
		fmt.Fprintf(&b, "## %s\n\n", in.Path)
		if in.Error != "" {
			fmt.Fprintf(&b, "Could not be read: %s\n\n", in.Error)
			continue
		}
		for _, d := range in.Devices {
			fmt.Fprintf(&b, "### Device %d\n\n", d.Device)
			fmt.Fprintf(&b, "- Peak allocated: **%s** (%d B), reserved %s; pattern **%s**; efficiency at the peak %s.\n",
				units.Bytes(d.Peak.AllocatedBytes), d.Peak.AllocatedBytes, units.Bytes(d.Peak.ReservedBytes), d.Pattern,
				units.Percent(d.FragmentationOut.PeakRatio))
			if len(d.CategoriesAtPeak) > 0 {
				var parts []string
				for _, c := range d.CategoriesAtPeak {
					parts = append(parts, fmt.Sprintf("%s %s", c.Name, units.Bytes(c.Bytes)))
				}
				fmt.Fprintf(&b, "- At the peak: %s.\n", strings.Join(parts, ", "))
			}
			b.WriteString("\n")
			if len(d.Findings) == 0 {
				b.WriteString("No findings.\n\n")
			}
			for _, f := range d.Findings {
				fmt.Fprintf(&b, "- **%s** `%s`: %s\n", f.Severity, f.ID, f.Message)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("Charts: memory_timeline.png, overview.png, top_consumers.png, categories.png, block_sizes.png, efficiency.png. Full data: report.json; text report: analysis_report.txt.\n")
	return b.String()
}
