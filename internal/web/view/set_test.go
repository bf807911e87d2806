package view

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ptscope/ptscope/internal/testfixture"
)

// testSnapshot is a committed real snapshot (the server's tests serve it
// as their input 0).
func testSnapshot(t testing.TB) string {
	return filepath.Join(testfixture.Root(t), "testdata", "snapshots", "validate_gpt2tiny_fp32.pickle.xz")
}

func traceFile(t testing.TB, parts ...string) string {
	return filepath.Join(append([]string{testfixture.Root(t), "testdata", "traces"}, parts...)...)
}

// loadSet finds the inputs under roots and waits until all are loaded.
func loadSet(t testing.TB, roots ...string) *Set {
	t.Helper()
	s := NewSet(SetOptions{})
	if err := s.Scan(roots, true); err != nil {
		t.Fatal(err)
	}
	go s.Load(t.Context())
	deadline := time.Now().Add(30 * time.Second)
	for s.Loading() {
		if time.Now().After(deadline) {
			t.Fatal("inputs did not load")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// ask answers path ("trace/summary?input=0") as the server's route does,
// without HTTP: a binary answer as it is, others as their JSON.
func ask(t testing.TB, s *Set, path string) []byte {
	t.Helper()
	name, query, _ := strings.Cut(path, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Answer(name, q)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b, ok := v.(RawBody); ok {
		return b
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The statuses a view's refusal carries are net/http's.
func TestErrorStatuses(t *testing.T) {
	for got, want := range map[int]int{statusBadRequest: http.StatusBadRequest, statusNotFound: http.StatusNotFound,
		statusUnprocessableEntity: http.StatusUnprocessableEntity, statusServiceUnavailable: http.StatusServiceUnavailable} {
		if got != want {
			t.Errorf("status %d, net/http's %d", got, want)
		}
	}
	s := loadSet(t, testSnapshot(t))
	for _, c := range []struct {
		name, query string
		status      int
	}{{"mem/view", "input=9", 404}, {"mem/view", "input=x", 400}, {"trace/view", "input=0", 400}, {"nothing", "", 404}} {
		q, _ := url.ParseQuery(c.query)
		_, err := s.Answer(c.name, q)
		e, ok := err.(*Error)
		if !ok || e.Status != c.status {
			t.Errorf("%s?%s: %v, want status %d", c.name, c.query, err, c.status)
		}
	}
}
