package memory

import (
	"sort"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// AnnotationRange is one record_function range of a device's
// annotations: a START and the END of the same name that closes it.
type AnnotationRange struct {
	Name    string
	StartUS int64
	EndUS   int64 // 0 when Open
	Open    bool  // no END before the snapshot was taken
}

// AnnotationRanges pairs the START/END annotations of device d by name,
// each END closing the latest open START of its name (an END with none is
// dropped). Closed ranges come in the order of their ENDs, then the ranges
// still open when the snapshot was taken, by name. Annotations of another
// device are skipped when the snapshot has several traces (one trace: all
// are its device's). Phases and the Perfetto export read them alike.
func AnnotationRanges(s *snapshot.Snapshot, d int) []AnnotationRange {
	open := map[string][]int64{}
	var out []AnnotationRange
	for _, a := range s.Annotations {
		if a.Device != d && a.Device >= 0 && len(s.Traces) > 1 {
			continue
		}
		switch a.Stage {
		case "START":
			open[a.Name] = append(open[a.Name], a.TimeUS)
		case "END":
			st := open[a.Name]
			if len(st) == 0 {
				continue
			}
			out = append(out, AnnotationRange{Name: a.Name, StartUS: st[len(st)-1], EndUS: a.TimeUS})
			open[a.Name] = st[:len(st)-1]
		}
	}
	names := make([]string, 0, len(open))
	for name := range open {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, t0 := range open[name] {
			out = append(out, AnnotationRange{Name: name, StartUS: t0, Open: true})
		}
	}
	return out
}
