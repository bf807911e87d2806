package input

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

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
	return fmt.Sprintf("the data read so far needs %s, more than the memory budget (--max-memory %s)",
		units.Bytes(e.Live), units.Bytes(e.Budget))
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
