package browsertests

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bin is the ptscope binary the tests run, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	if Chromium() == "" {
		fmt.Println("browsertests: no Chromium installed (apt-get install chromium-headless-shell, or set PTSCOPE_CHROMIUM): skipped")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "ptscope-browsertests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The window: every check runs at 1280 x 800.
const winW, winH = 1280, 800

func browser(t *testing.T) *Browser {
	t.Helper()
	b, err := NewBrowser(winW, winH)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func serve(t *testing.T, args ...string) *Server {
	t.Helper()
	s, err := Serve(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func open(t *testing.T, b *Browser, u string, ready ...string) {
	t.Helper()
	if err := b.Open(u); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	for _, id := range ready {
		if err := b.Ready(id, time.Minute); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
}

func eval[T any](t *testing.T, b *Browser, expr string) T {
	t.Helper()
	v, err := Eval[T](b, expr)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func ready(t *testing.T, b *Browser, id string) {
	t.Helper()
	if err := b.Ready(id, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func until(t *testing.T, b *Browser, what, expr string) {
	t.Helper()
	if err := b.Until(expr, 30*time.Second); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// noErrors fails on any uncaught exception or console error so far.
func noErrors(t *testing.T, b *Browser) {
	t.Helper()
	if errs := b.Errors(); len(errs) > 0 {
		t.Fatalf("page errors: %s", strings.Join(errs, "; "))
	}
}

// onlyFrom fails on a request to anything but host (or, with host "", any
// request but file:// and data:).
func onlyFrom(t *testing.T, b *Browser, host string) {
	t.Helper()
	for _, u := range b.Requests() {
		pu, err := url.Parse(u)
		if err != nil || host == "" && pu.Scheme != "file" && pu.Scheme != "data" ||
			host != "" && pu.Host != host && pu.Scheme != "about" && pu.Scheme != "data" {
			t.Errorf("request outside %q: %s", host, u)
		}
	}
}

// extract unpacks a committed bundle (tar.xz) into a temporary folder.
func extract(t *testing.T, archive string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xJf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar %s: %v: %s", archive, err, out)
	}
	return dir
}

// copyTo copies files into dir under new names (name -> source).
func copyTo(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// numbersInside checks that every numeric cell and header of every table
// on the page lies inside the window and shows its whole text.
func numbersInside(t *testing.T, b *Browser, where string) {
	t.Helper()
	bad := eval[[]string](t, b, `(() => { const out = [], W = window.innerWidth;
	  for (const c of document.querySelectorAll('.table td.num, .table th.num')) {
	    const r = c.getBoundingClientRect(), box = c.closest('.tablewrap').getBoundingClientRect();
	    if (r.width === 0 && r.height === 0) continue; // a hidden table
	    // inside the window, inside the table's box (which clips), the whole text shown
	    if (r.left < Math.max(0, box.left) - 0.5 || r.right > Math.min(W, box.right) + 0.5 || c.scrollWidth > c.clientWidth + 1)
	      out.push(c.closest('[data-testid]')?.dataset.testid + ': "' + c.innerText + '" at ' + Math.round(r.left) + '-' + Math.round(r.right) + ' (text ' + c.scrollWidth + ' px in ' + c.clientWidth + ')');
	  }
	  return out.slice(0, 8); })()`)
	if len(bad) > 0 {
		t.Errorf("%s: numbers outside a %d px window or cut: %s", where, winW, strings.Join(bad, "; "))
	}
	// names cut in the middle stay inside their cell, start and end visible
	cut := eval[[]string](t, b, `(() => { const out = [];
	  for (const m of document.querySelectorAll('.table td .mid')) {
	    const r = m.getBoundingClientRect(), c = m.closest('td').getBoundingClientRect();
	    if (r.width === 0 && r.height === 0) continue;
	    const parts = [...m.children].map((p) => p.getBoundingClientRect());
	    if (r.left < c.left - 0.5 || r.right > c.right + 0.5 || parts.some((p) => p.left < c.left - 0.5 || p.right > c.right + 0.5))
	      out.push(m.closest('[data-testid]')?.dataset.testid + ': "' + m.title + '" at ' + Math.round(r.left) + '-' + Math.round(r.right) + ' in ' + Math.round(c.left) + '-' + Math.round(c.right));
	  }
	  return out.slice(0, 8); })()`)
	if len(cut) > 0 {
		t.Errorf("%s: names outside their cells: %s", where, strings.Join(cut, "; "))
	}
	if n := eval[int](t, b, `document.querySelectorAll('.table td.num').length`); n == 0 {
		t.Errorf("%s: no numeric cell", where)
	}
}

// ticks returns the tick labels a chart drew (data-xticks, data-yticks).
func ticks(t *testing.T, b *Browser, id, axis string) []string {
	t.Helper()
	return eval[[]string](t, b, fmt.Sprintf(`JSON.parse(document.querySelector('[data-testid=%s]').dataset.%sticks || '[]')`, id, axis))
}

// withUnits checks that labels are there and each carries one of units.
func withUnits(t *testing.T, what string, labels []string, units ...string) {
	t.Helper()
	if len(labels) < 2 {
		t.Errorf("%s: %d tick labels %q", what, len(labels), labels)
		return
	}
	for _, l := range labels {
		ok := false
		for _, u := range units {
			ok = ok || strings.HasSuffix(l, " "+u)
		}
		if !ok {
			t.Errorf("%s: tick label %q has no unit (%s)", what, l, strings.Join(units, ", "))
		}
	}
}
