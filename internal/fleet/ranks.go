package fleet

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/rankname"
)

// Source says how an input's rank was recognised.
type Source uint8

// Rank sources, from the most to the least certain.
const (
	FromBundle      Source = iota // a ptscope run bundle's rankN folder
	FromDistributed               // a trace's distributedInfo.rank
	FromPath                      // "rank3" in the file or a folder name
)

var sourceNames = []string{"bundle", "distributed_info", "path"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return fmt.Sprintf("source(%d)", s)
}

// MarshalText writes the source's name.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a source's name.
func (s *Source) UnmarshalText(b []byte) error {
	for i, n := range sourceNames {
		if n == string(b) {
			*s = Source(i)
			return nil
		}
	}
	return fmt.Errorf("fleet: unknown rank source %q", b)
}

// Input is one artifact of one rank: a snapshot file, a trace file, or the
// snapshots of a bundle's rank folder (read together, as analyze reads a
// bundle).
type Input struct {
	Rank   int
	Kind   input.Kind // input.Snapshot or input.Trace
	Path   string     // the file; the rank folder for a bundle's snapshots
	Source Source
	// Bundle is the bundle the input belongs to (its manifest only, ranks
	// listed but not read: bundle.ListBundle); nil outside bundles.
	Bundle *bundle.Bundle
}

// Skipped is an input that was found but not made into a rank.
type Skipped struct {
	Path   string     `json:"path"`
	Kind   input.Kind `json:"kind"` // snapshot, trace or bundle; unknown for the standard input
	Reason string     `json:"reason"`
}

// Inputs are the artifacts found under some paths, by rank.
type Inputs struct {
	// Files are sorted by rank, then kind (snapshots first), then path.
	Files   []Input
	Skipped []Skipped
}

// Ranks returns the distinct ranks, ascending.
func (in *Inputs) Ranks() []int {
	var out []int
	for i, f := range in.Files {
		if i == 0 || f.Rank != in.Files[i-1].Rank {
			out = append(out, f.Rank)
		}
	}
	return out
}

// WithUnranked returns the inputs with the snapshots and traces that named
// no rank added as rank -1 (for exports, which keep every input).
func (in *Inputs) WithUnranked() *Inputs {
	out := &Inputs{Files: make([]Input, 0, len(in.Files)+len(in.Skipped))}
	for _, s := range in.Skipped {
		if s.Kind == input.Snapshot || s.Kind == input.Trace {
			out.Files = append(out.Files, Input{Rank: -1, Kind: s.Kind, Path: s.Path, Source: FromPath})
			continue
		}
		out.Skipped = append(out.Skipped, s)
	}
	out.Files = append(out.Files, in.Files...)
	sortInputs(out.Files)
	return out
}

// Of returns the inputs of one rank.
func (in *Inputs) Of(rank int) []Input {
	i := sort.Search(len(in.Files), func(i int) bool { return in.Files[i].Rank >= rank })
	j := i
	for j < len(in.Files) && in.Files[j].Rank == rank {
		j++
	}
	return in.Files[i:j]
}

// Count returns how many inputs are of kind k.
func (in *Inputs) Count(k input.Kind) int {
	n := 0
	for _, f := range in.Files {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// RankOfPath returns the rank named by the file name of path or, failing
// that, by the nearest folder above it that names one (rankname's rule),
// not going above root (a folder the user gave, which may itself be a
// rank's folder).
func RankOfPath(path, root string) (int, bool) {
	path = filepath.Clean(path)
	root = filepath.Clean(root)
	for p := path; ; p = filepath.Dir(p) {
		if n, ok := rankname.Of(filepath.Base(p)); ok {
			return n, true
		}
		if p == root || filepath.Dir(p) == p {
			return 0, false
		}
	}
}

// distributedPattern finds distributedInfo's rank in a trace's header,
// which Kineto writes before the events.
var distributedPattern = regexp.MustCompile(`"distributedInfo"\s*:\s*\{[^{}]*"rank"\s*:\s*(\d+)`)

// headBytes is how much of a trace Find reads for its distributedInfo.
const headBytes = 64 << 10

// Find expands paths (files or folders, searched recursively by content)
// into the snapshots and traces they hold, each with its rank, keeping the
// kinds asked for (input.Snapshot, input.Trace; bundles are opened and
// their rank folders listed, not read). A rank is recognised from a
// bundle's rankN folder, from a trace's distributedInfo, or from "rankN" in
// the file's name or the nearest folder name above it; an input with none of
// these is not made into a rank but listed in Skipped, so that unrelated
// files beside the ranks do not count as ranks. src finds and opens them (nil:
// the default Source).
func Find(src *input.Source, paths []string, kinds ...input.Kind) (*Inputs, error) {
	src = input.Or(src)
	want := func(k input.Kind) bool {
		for _, x := range kinds {
			if x == k {
				return true
			}
		}
		return false
	}
	out := &Inputs{}
	for _, root := range paths {
		if root == "-" {
			// the standard input has no rank, and can be read only once
			out.Skipped = append(out.Skipped, Skipped{Path: root, Kind: input.Unknown, Reason: "the standard input has no rank"})
			continue
		}
		files, err := src.Find([]string{root}, append([]input.Kind{input.Bundle}, kinds...)...)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			switch f.Kind {
			case input.Bundle:
				if err := out.addBundle(f.Path, want); err != nil {
					return nil, err
				}
			case input.Trace:
				if n, ok := traceRank(src, f.Path); ok {
					out.Files = append(out.Files, Input{Rank: n, Kind: f.Kind, Path: f.Path, Source: FromDistributed})
					continue
				}
				out.addByPath(f, root)
			default:
				out.addByPath(f, root)
			}
		}
	}
	sortInputs(out.Files)
	return out, nil
}

// sortInputs orders inputs by rank, then kind (snapshots first), then path.
func sortInputs(fs []Input) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Rank != b.Rank {
			return a.Rank < b.Rank
		}
		if a.Kind != b.Kind {
			return a.Kind == input.Snapshot
		}
		return a.Path < b.Path
	})
}

func (out *Inputs) addByPath(f input.File, root string) {
	if n, ok := RankOfPath(f.Path, root); ok {
		out.Files = append(out.Files, Input{Rank: n, Kind: f.Kind, Path: f.Path, Source: FromPath})
		return
	}
	out.Skipped = append(out.Skipped, Skipped{Path: f.Path, Kind: f.Kind, Reason: fmt.Sprintf("a %s with no rank in its name or folder", f.Kind)})
}

// addBundle lists a bundle's ranks: one snapshot input per rank folder with
// snapshots (analysed together, with the bundle's device capacity and
// phases) and one trace input per trace.
func (out *Inputs) addBundle(dir string, want func(input.Kind) bool) error {
	b, err := bundle.ListBundle(dir)
	if err != nil {
		return err
	}
	if len(b.Ranks) == 0 {
		out.Skipped = append(out.Skipped, Skipped{Path: dir, Kind: input.Bundle, Reason: "a bundle with no rank folder"})
	}
	for _, r := range b.Ranks {
		snaps, traces, err := rankFiles(r.Dir)
		if err != nil {
			return err
		}
		if want(input.Snapshot) && snaps {
			out.Files = append(out.Files, Input{Rank: r.Rank, Kind: input.Snapshot, Path: r.Dir, Source: FromBundle, Bundle: b})
		}
		if want(input.Trace) {
			for _, t := range traces {
				out.Files = append(out.Files, Input{Rank: r.Rank, Kind: input.Trace, Path: t, Source: FromBundle, Bundle: b})
			}
		}
	}
	return nil
}

// rankFiles tells whether a bundle's rank folder holds snapshots (or phases,
// which stand for them in runs without memory history) and lists its
// traces, by name as bundle.ReadRank does, without reading them.
func rankFiles(dir string) (snaps bool, traces []string, err error) {
	entries, err := readDirNames(dir)
	if err != nil {
		return false, nil, err
	}
	for _, name := range entries {
		switch {
		case strings.HasPrefix(name, "."):
		case strings.HasPrefix(name, "snapshot_") && strings.HasSuffix(name, ".pickle"), name == "phases.jsonl":
			snaps = true
		case strings.Contains(name, ".pt.trace.json"):
			traces = append(traces, filepath.Join(dir, name))
		}
	}
	sort.Strings(traces)
	return snaps, traces, nil
}

// traceRank reads distributedInfo.rank from the head of a trace.
func traceRank(src *input.Source, path string) (int, bool) {
	head, err := src.ReadHead(path, headBytes)
	if err != nil && len(head) == 0 {
		return 0, false
	}
	if i := strings.Index(string(head), `"traceEvents"`); i >= 0 {
		head = head[:i]
	}
	m := distributedPattern.FindSubmatch(head)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(m[1]))
	return n, err == nil
}
