package input

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ptscope/ptscope/internal/units"
)

// The memory budget: how much memory reading one command's inputs may take
// (ptscope's --max-memory). The readers derive their limits from it (the
// longest string, the most values, the decompressed bytes held in memory)
// and check the live heap against it as they go, so that a hostile or
// damaged input ends with a clear error instead of exhausting the machine.
var budget atomic.Int64

// minBudget is the smallest budget accepted: below it the readers' own
// buffers and tables would not fit.
const minBudget = 64 << 20

// DefaultBudget is half of the memory the process may use: physical RAM, or
// the cgroup's limit when lower (containers, batch jobs), and at least
// 1 GiB.
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

// SetBudget sets the budget (0 restores the default).
func SetBudget(n int64) {
	if n > 0 {
		n = max(n, minBudget)
	}
	budget.Store(n)
}

// Budget returns the memory budget in bytes.
func Budget() int64 {
	if b := budget.Load(); b > 0 {
		return b
	}
	return DefaultBudget()
}

// BudgetNote says where the budget comes from, for error messages.
func BudgetNote() string {
	return "--max-memory " + units.Bytes(Budget())
}

// MaxString is the longest string or bytes value a reader accepts: a
// sixteenth of the budget, between 1 MiB and 1 GiB. No PyTorch artifact
// holds a string of more than a few kilobytes.
func MaxString() int { return int(min(max(Budget()/16, 1<<20), 1<<30)) }

// MaxValues is the most decoded values a reader keeps in one container or
// on a decoder's stack: a value costs 16 bytes there, and more wherever
// it is kept, so a sixty-fourth of the budget.
func MaxValues() int { return int(max(Budget()/64, 1<<16)) }

// MaxInMemory is the most decompressed bytes a reader holds in memory at
// once: half of the budget (the decoded result takes about as much again).
func MaxInMemory() int64 { return Budget() / 2 }

// BudgetError reports a live heap over the budget.
type BudgetError struct {
	Live, Budget int64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s of memory in use, over the memory budget (--max-memory %s; raise it, or give fewer inputs at once)",
		units.Bytes(e.Live), units.Bytes(e.Budget))
}

// Progress: the input being read and the decompressed bytes read from it,
// for a message when the budget runs out (Watch).
var (
	progressName atomic.Pointer[string]
	progressOff  atomic.Int64
)

// Track records that name is being read from its start (Open does it;
// readers that map a file call it themselves).
func Track(name string) {
	progressName.Store(&name)
	progressOff.Store(0)
}

// Progress records the input offset a reader reached (readers that do not
// read through a Reader, as a mapped file's, call it now and then).
func Progress(off int64) { progressOff.Store(off) }

// Watch starts (once per process) a watchdog that checks every 100 ms
// whether the live heap, as the last collection measured it, exceeds the
// budget; if so it writes one line to w (the latest one given), naming the
// input and the offset being read, and exits with code 2. It is the
// backstop of the readers' own checks: it also covers what comes after
// reading (the analyses), where no reader is there to stop. The runtime's
// soft memory limit (set just above the budget) makes the collector run
// often enough near the budget for the measure to be fresh.
func Watch(w io.Writer) {
	watchTo.Store(&w)
	watchOnce.Do(func() {
		go func() {
			s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			for range time.Tick(100 * time.Millisecond) {
				metrics.Read(s)
				live := int64(s[0].Value.Uint64())
				if b := Budget(); live > b {
					w := *watchTo.Load()
					where := ""
					if n := progressName.Load(); n != nil {
						where = Name(*n) + ": "
						if off := progressOff.Load(); off > 0 {
							where += fmt.Sprintf("offset %d: ", off)
						}
					}
					fmt.Fprintf(w, "ptscope: %s%v\n", where, &BudgetError{Live: live, Budget: b})
					os.Exit(2)
				}
			}
		}()
	})
}

var (
	watchOnce sync.Once
	watchTo   atomic.Pointer[io.Writer]
)

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
func CheckMemory() error {
	b := Budget()
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
