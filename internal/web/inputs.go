package web

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ptscope/ptscope/internal/capture"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/kineto"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
	"github.com/ptscope/ptscope/internal/snapshot"
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
	size  int64 // file size when found
}

// DeviceInfo summarises one device of a snapshot for the input list.
type DeviceInfo struct {
	Device  int   `json:"device"`
	Entries int   `json:"entries"`
	Peak    int64 `json:"peak_allocated_bytes"`
}

type memDevice struct {
	result *memory.Device
	tl     *timeline.Memory
}

type traceInput struct {
	model  *kineto.Trace
	result *perf.Rank
	tl     *timeline.Trace
}

// inputs is the server's list, safe for concurrent use; loading happens on
// one goroutine, one input at a time (a server holds many inputs; reading
// two large ones at once would double the peak memory for little gain).
type inputs struct {
	mu    sync.RWMutex
	list  []*Input
	byKey map[string]int // path -> id
	queue chan *Input
	opts  memory.Options
}

func newInputs() *inputs {
	return &inputs{byKey: map[string]int{}, queue: make(chan *Input, 1<<16)}
}

// add registers a found file (once per path) and queues it for loading.
func (in *inputs) add(path string, kind input.Kind, run string, size int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.byKey[path]; ok {
		return
	}
	it := &Input{ID: len(in.list), Path: path, Kind: string(kind), Run: run, Status: statusQueued, size: size}
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

// loadLoop loads queued inputs until ctx ends.
func (in *inputs) loadLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-in.queue:
			in.load(ctx, it)
		}
	}
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
			err = in.loadSnapshot(it)
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

func (in *inputs) loadSnapshot(it *Input) error {
	s, err := snapshot.ReadFile(it.Path)
	if err != nil {
		return err
	}
	var devs []*memDevice
	var infos []DeviceInfo
	for _, d := range s.Devices() {
		a := memory.Analyze(s, d, in.opts)
		devs = append(devs, &memDevice{result: a, tl: timeline.NewMemory(s, d, a.Replay, a.Phases)})
		infos = append(infos, DeviceInfo{Device: d, Entries: a.Entries, Peak: a.Peak.AllocatedBytes})
	}
	if len(devs) == 0 {
		return fmt.Errorf("%s: the snapshot holds no device with segments or trace entries", it.Path)
	}
	in.mu.Lock()
	it.mem, it.Devices, it.Bytes = devs, infos, s.InputBytes
	in.mu.Unlock()
	return nil
}

func (in *inputs) loadTrace(ctx context.Context, it *Input) error {
	t, err := kineto.ReadFile(ctx, it.Path, kineto.Options{})
	if err != nil {
		return err
	}
	r := perf.Analyze(t, perf.Options{})
	ti := &traceInput{model: t, result: r, tl: timeline.NewTrace(t)}
	in.mu.Lock()
	it.trace, it.Bytes = ti, t.Bytes
	in.mu.Unlock()
	return nil
}

// scan finds the inputs under roots: snapshots and traces, and the files of
// ptscope run bundles (labelled with the bundle's folder as their run). A
// file is added once its size has not changed since the previous scan, so
// that one still being written by a running capture is not read half-way.
func (in *inputs) scan(roots []string, seen map[string]int64, initial bool) error {
	files, err := input.Find(roots, input.Snapshot, input.Trace, input.Bundle)
	if err != nil {
		return err
	}
	type found struct {
		path string
		kind input.Kind
		run  string
	}
	var all []found
	for _, f := range files {
		if f.Kind != input.Bundle {
			all = append(all, found{f.Path, f.Kind, ""})
			continue
		}
		b, err := capture.ReadBundle(f.Path)
		if err != nil {
			in.addError(f.Path, string(input.Bundle), err)
			continue
		}
		for _, r := range b.Ranks {
			for _, p := range r.Snapshots {
				all = append(all, found{p, input.Snapshot, filepath.Base(b.Dir)})
			}
			for _, p := range r.Traces {
				all = append(all, found{p, input.Trace, filepath.Base(b.Dir)})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].path < all[j].path })
	for _, f := range all {
		st, err := os.Stat(f.path)
		if err != nil {
			continue
		}
		prev, ok := seen[f.path]
		seen[f.path] = st.Size()
		if !initial && (!ok || prev != st.Size()) {
			continue // new or growing: wait until a scan sees the same size
		}
		in.add(f.path, f.kind, f.run, st.Size())
	}
	return nil
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
