package input

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ptscope/ptscope/internal/units"
)

// minBudget is the smallest budget accepted: below it the readers' own
// buffers and tables would not fit.
const minBudget = 64 << 20

// DefaultBudget is half of the memory the process may use: physical RAM, or
// the cgroup's limit when lower (containers, batch jobs), and at least
// 1 GiB. It is a fact of the machine, measured once.
func DefaultBudget() int64 {
	defaultOnce.Do(func() {
		total := physicalMemory()
		if c := cgroupLimit(); c > 0 && (total == 0 || c < total) {
			total = c
		}
		if total <= 0 {
			total = 8 << 30
		}
		defaultBudget = max(total/2, 1<<30)
	})
	return defaultBudget
}

var (
	defaultOnce   sync.Once
	defaultBudget int64
)

// Budget returns the memory budget in bytes: how much memory reading one
// command's inputs may take (ptscope's --max-memory). The readers derive
// their limits from it (the longest string, the most values, the
// decompressed bytes held in memory) and check the live heap against it as
// they go, so that a hostile or damaged input ends with a clear error
// instead of exhausting the machine.
func (s *Source) Budget() int64 { return s.budget }

// BudgetNote says where the budget comes from, for error messages.
func (s *Source) BudgetNote() string {
	return "--max-memory " + units.Bytes(s.Budget())
}

// MaxString is the longest string or bytes value a reader accepts: a
// sixteenth of the budget, between 1 MiB and 1 GiB. No PyTorch artifact
// holds a string of more than a few kilobytes.
func (s *Source) MaxString() int { return int(min(max(s.Budget()/16, 1<<20), 1<<30)) }

// MaxValues is the most decoded values a reader keeps in one container or
// on a decoder's stack: a value costs 16 bytes there, and more wherever
// it is kept, so a sixty-fourth of the budget.
func (s *Source) MaxValues() int { return int(max(s.Budget()/64, 1<<16)) }

// MaxInMemory is the most decompressed bytes a reader holds in memory at
// once: half of the budget (the decoded result takes about as much again).
func (s *Source) MaxInMemory() int64 { return s.Budget() / 2 }

// BudgetError reports a live heap over the budget.
type BudgetError struct {
	Live, Budget int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s of memory in use, over the memory budget (--max-memory %s; raise it, or give fewer inputs at once)",
		units.Bytes(e.Live), units.Bytes(e.Budget))
}

// Track records that name is being read from its start (Open does it;
// readers that map a file call it themselves), for the message of Watch.
func (s *Source) Track(name string) {
	s.progressName.Store(&name)
	s.progressOff.Store(0)
}

// Progress records the input offset a reader reached (readers that do not
// read through a Reader, as a mapped file's, call it now and then).
func (s *Source) Progress(off int64) { s.progressOff.Store(off) }

// Watch starts a watchdog that checks every 100 ms, until ctx is done,
// whether the live heap, as the last collection measured it, exceeds the
// budget; if so it sends one error on the returned channel, naming the
// input and the offset being read (a *BudgetError wrapped), and stops. It
// is the backstop of the readers' own checks: it also covers what comes
// after reading (the analyses), where no reader is there to stop, so its
// caller must give up on the work in progress when it fires (cli returns
// exit 2 at once). The live heap is the process's: a process that reads
// several Sources at once measures them together. The runtime's soft
// memory limit, set just above the budget by cli, makes the collector run
// often enough near the budget for the measure to be fresh.
func (s *Source) Watch(ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		m := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			metrics.Read(m)
			live := int64(m[0].Value.Uint64())
			if b := s.Budget(); live > b {
				where := ""
				if n := s.progressName.Load(); n != nil {
					where = Name(*n) + ": "
					if off := s.progressOff.Load(); off > 0 {
						where += fmt.Sprintf("offset %d: ", off)
					}
				}
				ch <- fmt.Errorf("%s%w", where, &BudgetError{Live: live, Budget: b})
				return
			}
		}
	}()
	return ch
}

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
var heapMu sync.Mutex

func heapObjects() int64 {
	heapMu.Lock()
	defer heapMu.Unlock()
	metrics.Read(heapSample)
	if heapSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(heapSample[0].Value.Uint64())
}

// CheckMemory returns a *BudgetError when the live heap exceeds the budget.
// It is cheap (a runtime metric) unless the heap, garbage included, is over
// the budget: then it collects once to measure what is really live.
func (s *Source) CheckMemory() error {
	b := s.Budget()
	if heapObjects() <= b {
		return nil
	}
	runtime.GC()
	if live := heapObjects(); live > b {
		return &BudgetError{Live: live, Budget: b}
	}
	return nil
}

func physicalMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// cgroupLimit returns the memory limit of the process's cgroup (v2 or v1),
// or 0 when there is none.
func cgroupLimit() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}
