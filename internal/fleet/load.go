package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/input"
	"github.com/ptscope/ptscope/internal/load"
	"github.com/ptscope/ptscope/internal/memory"
	"github.com/ptscope/ptscope/internal/perf"
)

// Options tune how a fleet's inputs are read and analysed.
type Options struct {
	// Workers is how many inputs are read and analysed at once (default
	// GOMAXPROCS).
	Workers int
	// MaxInFlightBytes bounds the size of the inputs being read at once
	// (compressed files count 8x their size on disk): a worker waits while
	// others hold more. One input is always admitted, whatever its size.
	// Default: DefaultMaxInFlightBytes, or a quarter of the memory budget
	// (Source's budget, --max-memory) when that is less.
	MaxInFlightBytes int64
	Snapshot         load.SnapshotOptions
	Trace            perf.Options
	// Source is where the inputs are opened and the memory budget they
	// are read within (nil: the default budget); the snapshot loader's
	// too, unless Snapshot names its own.
	Source *input.Source
	// Progress, when set, is told how many inputs are done.
	Progress func(done, total int)
}

// DefaultMaxInFlightBytes is the default of Options.MaxInFlightBytes.
const DefaultMaxInFlightBytes = 1 << 30

// Loaded is one input with its complete results, handed to a visitor
// before they are dropped.
type Loaded struct {
	Input
	// Memory is the analyze document of a snapshot input (one Input per
	// snapshot file; a bundle rank may hold several); nil for traces.
	Memory *memory.Report
	// Trace is the analysis of a trace input; nil for snapshots or when
	// it could not be read.
	Trace *perf.Rank
	// Err says why the input (or part of it) could not be read.
	Err error
}

// Each reads and analyses every input with Options.Workers workers and
// calls visit with each result in the order of in.Files, from one goroutine
// at a time. A result is dropped once visit returns, and workers run at
// most a few inputs ahead of the one visit waits for, so that memory holds
// a bounded number of results whatever the number of inputs. An input that
// cannot be read is visited with its error; visit's own error stops the
// walk and is returned, as is the context's.
func Each(ctx context.Context, in *Inputs, o Options, visit func(*Loaded) error) error {
	n := len(in.Files)
	o.Source = input.Or(o.Source)
	if o.Snapshot.Source == nil {
		o.Snapshot.Source = o.Source
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(min(workers, n), 1)
	budget := o.MaxInFlightBytes
	if budget <= 0 {
		// each reader may hold up to half of the memory budget
		// (Source.MaxInMemory); a quarter in flight leaves room for the
		// analyses and the results being visited
		budget = min(DefaultMaxInFlightBytes, o.Source.Budget()/4)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The window bounds how far ahead of the visitor the workers run:
	// results wait in slots until visited in order.
	window := 2 * workers
	slots := make([]chan *Loaded, n)
	for i := range slots {
		slots[i] = make(chan *Loaded, 1)
	}
	next := make(chan int)
	tokens := make(chan struct{}, window)
	gate := newByteGate(budget)
	var wg sync.WaitGroup
	go func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f := in.Files[i]
				cost := inputCost(f)
				if !gate.acquire(ctx, cost) {
					slots[i] <- &Loaded{Input: f, Err: ctx.Err()}
					continue
				}
				l := loadOne(ctx, f, o)
				gate.release(cost)
				slots[i] <- l
			}
		}()
	}
	defer wg.Wait()
	for i := 0; i < n; i++ {
		var l *Loaded
		select {
		case l = <-slots[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := visit(l); err != nil {
			cancel()
			return err
		}
		slots[i] = nil
		if o.Progress != nil {
			o.Progress(i+1, n)
		}
		<-tokens
	}
	return nil
}

// loadOne reads and analyses one input; a panic (a bug) becomes an error
// naming it.
func loadOne(ctx context.Context, f Input, o Options) (l *Loaded) {
	l = &Loaded{Input: f}
	defer func() {
		if p := recover(); p != nil {
			l.Memory, l.Trace = nil, nil
			l.Err = fmt.Errorf("%s: internal error: %v (please report it)", f.Path, p)
		}
	}()
	switch f.Kind {
	case input.Snapshot:
		var set *load.SnapshotSet
		if f.Source == FromBundle && f.Bundle != nil {
			var r *bundle.Rank
			if r, l.Err = bundle.ReadRank(f.Path, f.Rank); l.Err == nil {
				set, l.Err = load.BundleRank(ctx, f.Bundle, r, o.Snapshot)
			}
		} else {
			set, l.Err = load.Snapshots(ctx, []string{f.Path}, o.Snapshot)
		}
		if set != nil {
			l.Memory = set.Report
			_ = set.Close() // the summary keeps the report, not the models
		}
	case input.Trace:
		set, err := load.Traces(ctx, []string{f.Path}, load.TraceOptions{Analysis: o.Trace, Source: o.Source})
		if err != nil {
			l.Err = err
			return l
		}
		if len(set.Report.Ranks) != 1 {
			l.Err = fmt.Errorf("%s: %d traces where one was expected", f.Path, len(set.Report.Ranks))
			return l
		}
		r := &set.Report.Ranks[0]
		r.Rank = f.Rank
		for i := range r.Findings {
			if at := r.Findings[i].At; at != nil && at.Rank != nil {
				*at.Rank = f.Rank
			}
		}
		l.Trace = r
	default:
		l.Err = fmt.Errorf("%s: a %s is neither a snapshot nor a trace", f.Path, f.Kind)
	}
	return l
}

// inputCost is what an input counts against MaxInFlightBytes: its size on
// disk, 8x for compressed files (they expand as they are read).
func inputCost(f Input) int64 {
	paths := []string{f.Path}
	if f.Source == FromBundle && f.Kind == input.Snapshot {
		paths = nil
		names, _ := readDirNames(f.Path)
		for _, n := range names {
			if strings.HasPrefix(n, "snapshot_") {
				paths = append(paths, filepath.Join(f.Path, n))
			}
		}
	}
	var total int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		n := st.Size()
		switch strings.ToLower(filepath.Ext(p)) {
		case ".gz", ".xz", ".zst", ".zstd":
			n *= 8
		}
		total += n
	}
	return total
}

// byteGate admits work while the bytes in flight stay under a budget; work
// larger than the budget is admitted alone.
type byteGate struct {
	mu       sync.Mutex
	cond     *sync.Cond
	budget   int64
	inFlight int64
	busy     int
}

func newByteGate(budget int64) *byteGate {
	g := &byteGate{budget: budget}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *byteGate) acquire(ctx context.Context, n int64) bool {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.busy > 0 && g.inFlight+n > g.budget {
		if ctx.Err() != nil {
			return false
		}
		g.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	g.inFlight += n
	g.busy++
	return true
}

func (g *byteGate) release(n int64) {
	g.mu.Lock()
	g.inFlight -= n
	g.busy--
	g.cond.Broadcast()
	g.mu.Unlock()
}

func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// errorLine is err on one line, for per-rank error fields.
func errorLine(err error) string {
	if err == nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
