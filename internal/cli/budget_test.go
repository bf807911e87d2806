package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ptscope/ptscope/internal/units"
)

// longStringPickle is a protocol-4 pickle holding one str of n bytes: over
// the longest string a reader accepts (a sixteenth of the budget) for a
// small budget.
func longStringPickle(n int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x80, 4, 'X'})
	binary.Write(&b, binary.LittleEndian, uint32(n))
	b.Write(bytes.Repeat([]byte{'a'}, n))
	b.WriteByte('.')
	return b.Bytes()
}

// Main runs many times in one process, one after another and side by
// side, each command with its own --max-memory: the budget travels as a
// value (input.Source), not as process-wide state, so each run's limit is
// its own and a run's message names its budget.
func TestMainTwiceBudgets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "long.pickle")
	if err := os.WriteFile(path, longStringPickle(9<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	try := func(budget string) (int, string) {
		var o, e bytes.Buffer
		code := Main(context.Background(), []string{"analyze", "--max-memory", budget, path}, strings.NewReader(""), &o, &e)
		return code, e.String()
	}
	// 64 MiB and 128 MiB allow strings of 4 and 8 MiB: the 9 MiB one is
	// refused, each time with the run's own budget
	note := func(b string) string {
		n, _ := units.ParseBytes(b)
		return fmt.Sprintf("(--max-memory %s)", units.Bytes(n))
	}
	for _, b := range []string{"64MiB", "128MiB"} {
		code, stderr := try(b)
		want := note(b)
		if code != ExitUsage || !strings.Contains(stderr, "exceeds the limit") || !strings.Contains(stderr, want) {
			t.Errorf("--max-memory %s: exit %d, stderr %q; want exit 2 and %q", b, code, stderr, want)
		}
	}
	// 1 GiB allows 64 MiB: the string passes and the file is refused for
	// what it is (a str, not a snapshot)
	if code, stderr := try("1GiB"); code != ExitUsage || strings.Contains(stderr, "exceeds the limit") {
		t.Errorf("--max-memory 1GiB: exit %d, stderr %q; want another error than the string limit", code, stderr)
	}
	// side by side: no run sees another's budget
	var wg sync.WaitGroup
	for i := range 6 {
		b := []string{"64MiB", "128MiB"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, stderr := try(b)
			want := note(b)
			if code != ExitUsage || !strings.Contains(stderr, want) {
				t.Errorf("parallel --max-memory %s: exit %d, stderr %q", b, code, stderr)
			}
		}()
	}
	wg.Wait()
	// and a real snapshot still reads after them, with the default budget
	var o, e bytes.Buffer
	if code := Main(context.Background(), []string{"analyze", "--json", snap("validate_gpt2tiny_fp32.pickle.xz")}, strings.NewReader(""), &o, &e); code != 0 || !strings.Contains(o.String(), `"schema_version":2`) {
		t.Errorf("analyze after: exit %d, stderr %q", code, e.String())
	}
}
