package view

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/timeline"
)

// Input status values.
const (
	statusQueued  = "queued"
	statusLoading = "loading"
	statusReady   = "ready"
	statusError   = "error"
)

// Input is one file the server shows: a snapshot (one view per device) or
// a profiler trace. Inputs are numbered in the order found and referred to
// by that number only, so that no request names a path.
type Input struct {
	ID     int    `json:"id"`
	Path   string `json:"path"`
	Kind   string `json:"kind"` // snapshot or trace
	Run    string `json:"run,omitempty"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// LoadNS is how long reading and analysing took.
	LoadNS  int64        `json:"load_ns,omitempty"`
	Devices []DeviceInfo `json:"devices,omitempty"`
	Bytes   int64        `json:"bytes,omitempty"`

	mem   []*memDevice
	trace *traceInput
	// memReport and traceReport are the analyses as load returned them
	// (the results above belong to them): one side of a diff.
	memReport   *memory.Report
	traceReport *perf.Report
	size        int64          // file size when found
	rank        *bundle.Rank   // the bundle rank it belongs to, if any
	bundle      *bundle.Bundle // and that rank's bundle
	peers       *peerSet       // the other inputs, for views that compare them
}

// DeviceInfo summarises one device of a snapshot for the input list.
type DeviceInfo struct {
	Device  int   `json:"device"`
	Entries int   `json:"entries"`
	Peak    int64 `json:"peak_allocated_bytes"`
}

type memDevice struct {
	result *memory.Result
	device int
	phases []memory.PhaseRow // from the bundle the snapshot came from

	// The timeline index is built after the input is ready (its analysis
	// is what the first page shows), on a goroutine of its own or by the
	// first view that needs it, whichever comes first.
	once  sync.Once
	build func() *timeline.Memory
	tl    *timeline.Memory
}

// timeline is the device's timeline index, built on first use.
func (md *memDevice) timeline() *timeline.Memory {
	md.once.Do(func() {
		if md.build != nil { // nil: made with its index (--html)
			md.tl, md.build = md.build(), nil
		}
	})
	return md.tl
}

type traceInput struct {
	model  *kineto.Trace
	result *perf.Rank
	tl     *timeline.Trace
}

// inputs is the server's list, safe for concurrent use; loading happens on
// two goroutines, one large input at a time (loadLoop).
type inputs struct {
	mu    sync.RWMutex
	list  []*Input
	byKey map[string]int // path -> id
	queue chan *Input
	opts  memory.Options
	// afterRead runs between decoding and analysing a snapshot
	afterRead func()
	src       *input.Source // finds and opens the inputs; their memory budget
	peers     *peerSet
}

func newInputs() *inputs {
	in := &inputs{byKey: map[string]int{}, queue: make(chan *Input, 1<<16), src: input.Or(nil)}
	in.peers = &peerSet{ready: in.ready}
	return in
}

// ready returns the inputs loaded so far.
func (in *inputs) ready() []*Input {
	in.mu.RLock()
	defer in.mu.RUnlock()
	var out []*Input
	for _, it := range in.list {
		if it.Status == statusReady {
			out = append(out, it)
		}
	}
	return out
}

// add registers a found file (once per path) and queues it for loading.
func (in *inputs) add(path string, kind input.Kind, run string, size int64, rank *bundle.Rank, b *bundle.Bundle) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.byKey[path]; ok {
		return
	}
	it := &Input{ID: len(in.list), Path: path, Kind: string(kind), Run: run, Status: statusQueued, size: size, rank: rank, bundle: b,
		peers: in.peers}
	in.byKey[path] = it.ID
	in.list = append(in.list, it)
	select {
	case in.queue <- it:
	default:
		it.Status, it.Error = statusError, "too many inputs queued"
	}
}

// get returns input id.
func (in *inputs) get(id int) (*Input, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	if id < 0 || id >= len(in.list) {
		return nil, false
	}
	return in.list[id], true
}

// snapshot copies the public fields of every input.
func (in *inputs) snapshot() []Input {
	in.mu.RLock()
	defer in.mu.RUnlock()
	out := make([]Input, len(in.list))
	for i, it := range in.list {
		out[i] = Input{ID: it.ID, Path: it.Path, Kind: it.Kind, Run: it.Run, Status: it.Status, Error: it.Error,
			LoadNS: it.LoadNS, Devices: it.Devices, Bytes: it.Bytes}
	}
	return out
}

// busy reports whether an input is queued or loading.
func (in *inputs) busy() bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	for _, it := range in.list {
		if it.Status == statusQueued || it.Status == statusLoading {
			return true
		}
	}
	return false
}

// loadLoop loads queued inputs until ctx ends.
//
// Two loaders take the queue, so that one slow input (a large one, or a
// hostile one until its limit stops it) never leaves the others queued;
// inputs of more than an eighth of the budget load one at a time
// (reading two large ones at once would double the peak memory for little
// gain).
func (in *inputs) loadLoop(ctx context.Context) {
	big := make(chan struct{}, 1)
	bigSize := in.src.Budget() / 8
	worker := func() {
		for {
			select {
			case <-ctx.Done():
				return
			case it := <-in.queue:
				if it.size >= bigSize {
					select {
					case big <- struct{}{}:
					case <-ctx.Done():
						return
					}
				}
				in.load(ctx, it)
				if it.size >= bigSize {
					<-big
				}
			}
		}
	}
	go worker()
	worker()
}

// load reads and analyses one input; a failure (or a panic in a reader or
// analysis) becomes the input's one-line error and leaves the others alone.
func (in *inputs) load(ctx context.Context, it *Input) {
	in.setStatus(it, statusLoading, "")
	start := time.Now()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%s: internal error: %v (please report it)", it.Path, r)
			}
		}()
		switch it.Kind {
		case string(input.Snapshot):
			err = in.loadSnapshot(ctx, it)
		case string(input.Trace):
			err = in.loadTrace(ctx, it)
		default:
			err = fmt.Errorf("%s: not a snapshot or trace", it.Path)
		}
	}()
	in.mu.Lock()
	defer in.mu.Unlock()
	it.LoadNS = time.Since(start).Nanoseconds()
	if err != nil {
		it.Status, it.Error = statusError, strings.ReplaceAll(err.Error(), "\n", " ")
		return
	}
	it.Status = statusReady
}

func (in *inputs) setStatus(it *Input, status, msg string) {
	in.mu.Lock()
	it.Status, it.Error = status, msg
	in.mu.Unlock()
}

func (in *inputs) loadSnapshot(ctx context.Context, it *Input) error {
	if it.rank != nil && it.bundle != nil && it.Path == it.rank.Dir {
		return in.loadRun(ctx, it)
	}
	o := load.SnapshotOptions{Memory: in.opts, AfterRead: in.afterRead, Source: in.src}
	var set *load.SnapshotSet
	var err error
	if it.rank != nil && it.bundle != nil {
		// a bundle's snapshot, read with what its rank recorded (the
		// process's memory limit, inventories, phases), as analyze reads it
		set, err = load.BundleSnapshot(ctx, it.bundle, it.rank, it.Path, o)
	} else {
		set, err = load.Snapshots(ctx, []string{it.Path}, o)
	}
	if err != nil {
		return err
	}
	if len(set.Inputs) != 1 || set.Inputs[0].Snapshot == nil {
		return fmt.Errorf("%s: not one snapshot", it.Path)
	}
	return in.setSnapshot(it, set, 0)
}

// loadRun reads a bundle rank recorded in stack windows as one run (its
// input's path is the rank folder): the peak view's snapshot, with the
// run's steps, pattern and end (load.BundleRank).
func (in *inputs) loadRun(ctx context.Context, it *Input) error {
	set, err := load.BundleRank(ctx, it.bundle, it.rank, load.SnapshotOptions{Memory: in.opts, AfterRead: in.afterRead, Source: in.src})
	for k, m := range set.Inputs {
		if m.Path == it.rank.Dir && m.Snapshot != nil {
			return in.setSnapshot(it, set, k)
		}
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s: no snapshot of the run could be read", it.Path)
}

// setSnapshot makes input k of set the server's view of it.
func (in *inputs) setSnapshot(it *Input, set *load.SnapshotSet, k int) error {
	m := set.Inputs[k]
	run := len(set.Report.Inputs[k].StackWindows) > 0
	var devs []*memDevice
	var infos []DeviceInfo
	for _, a := range m.Devices {
		snap, dev, replay, ph := m.Snapshot, a.Result.Device, a.Replay, a.Phases
		md := &memDevice{result: a.Result, device: dev,
			build:  func() *timeline.Memory { return timeline.NewMemory(snap, dev, replay, ph) },
			phases: set.Report.Inputs[k].Phases} // a bundle's (of every window of a run); none for a bare snapshot
		devs = append(devs, md)
		infos = append(infos, DeviceInfo{Device: a.Result.Device, Entries: a.Result.Entries, Peak: a.Result.Peak.AllocatedBytes})
	}
	if len(devs) == 0 {
		return fmt.Errorf("%s: the snapshot holds no device with segments or trace entries", it.Path)
	}
	for _, md := range devs {
		go md.timeline()
	}
	in.mu.Lock()
	it.mem, it.Devices, it.Bytes, it.memReport = devs, infos, m.Snapshot.InputBytes, set.Report
	if run {
		it.Bytes = set.Report.Inputs[k].Bytes
		if k != 0 || len(set.Report.Inputs) != 1 {
			// one side of a diff: this run alone
			rep := memory.NewReport()
			rep.Inputs = []*memory.Input{set.Report.Inputs[k]}
			it.memReport = rep
		}
	}
	in.mu.Unlock()
	return nil
}

func (in *inputs) loadTrace(ctx context.Context, it *Input) error {
	set, err := load.Traces(ctx, []string{it.Path}, load.TraceOptions{KeepModels: true, Source: in.src})
	if err != nil {
		return err
	}
	if len(set.Models) != 1 || set.Models[0] == nil || len(set.Report.Ranks) != 1 {
		return fmt.Errorf("%s: not one trace", it.Path)
	}
	t := set.Models[0]
	ti := &traceInput{model: t, result: &set.Report.Ranks[0], tl: timeline.NewTrace(t)}
	in.mu.Lock()
	it.trace, it.Bytes, it.traceReport = ti, t.Bytes, set.Report
	in.mu.Unlock()
	return nil
}

// scan finds the inputs under roots, root by root in the order given
// (each folder's files sorted by path): snapshots and traces, and the files
// of ptscope run bundles (labelled with the bundle's folder as their run).
// A root that cannot be read (a missing path, a file of no known kind) is
// listed with its error and the others are served. Rescans search the
// folders only: a file given by name (or "-", the standard input, which
// can be read once) is found by the first scan. A file in a folder is
// added once its size has not changed since the previous scan, so that one
// still being written by a running capture is not read half-way. scan
// returns an error only when no root could be read.
func (in *inputs) scan(roots []string, seen map[string]int64, initial bool) error {
	type found struct {
		path   string
		kind   input.Kind
		run    string
		rank   *bundle.Rank
		bundle *bundle.Bundle
	}
	var firstErr error
	failed := 0
	for _, root := range roots {
		if !initial && !isDir(root) {
			continue
		}
		files, err := in.src.Find([]string{root}, input.Snapshot, input.Trace, input.Bundle)
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			if initial {
				in.addError(root, string(input.Unknown), err)
			}
			continue
		}
		var batch []found
		for _, f := range files {
			if f.Kind != input.Bundle {
				batch = append(batch, found{f.Path, f.Kind, "", nil, nil})
				continue
			}
			b, err := bundle.ReadBundle(f.Path)
			if err != nil {
				in.addError(f.Path, string(input.Bundle), err)
				continue
			}
			for k := range b.Ranks {
				r := &b.Ranks[k]
				part := load.WindowParts(r) // a rank recorded in stack windows: one run
				if part != nil && b.Manifest.Status == bundle.StatusRunning && r.Info.Unfinished() {
					// a rank still recording: its windows one by one as they
					// are saved (an input of the run would keep the windows of
					// the scan that found it); the run once it has ended
					part = nil
				}
				if part != nil {
					batch = append(batch, found{r.Dir, input.Snapshot, filepath.Base(b.Dir), r, b})
				}
				for _, p := range r.Snapshots {
					if !part[filepath.Base(p)] {
						batch = append(batch, found{p, input.Snapshot, filepath.Base(b.Dir), r, b})
					}
				}
				for _, p := range r.Traces {
					batch = append(batch, found{p, input.Trace, filepath.Base(b.Dir), r, b})
				}
			}
		}
		sort.SliceStable(batch, func(i, j int) bool { return batch[i].path < batch[j].path })
		for _, f := range batch {
			var size int64
			if st, err := os.Stat(f.path); err == nil {
				size = st.Size()
			} else if !initial {
				continue
			}
			prev, ok := seen[f.path]
			seen[f.path] = size
			if !initial && (!ok || prev != size) {
				continue // new or growing: wait until a scan sees the same size
			}
			in.add(f.path, f.kind, f.run, size, f.rank, f.bundle)
		}
	}
	if initial && failed < len(roots) {
		return nil // the roots that failed are listed with their error
	}
	return firstErr
}

// isDir reports whether path is a folder (or a link to one).
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// addError lists an input that could not even be opened (a broken bundle).
func (in *inputs) addError(path, kind string, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.byKey[path]; ok {
		return
	}
	it := &Input{ID: len(in.list), Path: path, Kind: kind, Status: statusError, Error: strings.ReplaceAll(err.Error(), "\n", " ")}
	in.byKey[path] = it.ID
	in.list = append(in.list, it)
}
