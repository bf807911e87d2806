package input

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

func TestRoundTrip(t *testing.T) {
	payload := bytes.Repeat([]byte("hello ptscope "), 1000)
	compressors := map[Compression]func(io.Writer) io.WriteCloser{
		Gzip: func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) },
		Xz: func(w io.Writer) io.WriteCloser {
			x, _ := xz.NewWriter(w)
			return x
		},
		Zstd: func(w io.Writer) io.WriteCloser {
			z, _ := zstd.NewWriter(w)
			return z
		},
	}
	for c, mk := range compressors {
		var buf bytes.Buffer
		w := mk(&buf)
		w.Write(payload)
		w.Close()
		r, err := NewSource(0, nil, nil).NewReader(&buf)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if r.Compression != c {
			t.Errorf("detected %q, want %q", r.Compression, c)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, payload) {
			t.Errorf("%s: round trip failed: %v", c, err)
		}
		r.Close()
	}
	r, _ := NewSource(0, nil, nil).NewReader(bytes.NewReader(payload))
	if got, _ := io.ReadAll(r); r.Compression != None || !bytes.Equal(got, payload) {
		t.Error("plain passthrough failed")
	}
}

func TestSniff(t *testing.T) {
	cases := map[string]Kind{
		"\x80\x04\x95":                           Snapshot,
		"(dp0\nVsegments\n":                      Snapshot, // protocol 0
		"}q\x00(X\x08\x00\x00\x00segments":       Snapshot, // protocol 1
		"]q\x00(}q\x01(":                         Snapshot, // protocol 1, a legacy list
		`{"segments": [], "device_traces":[]}`:   Snapshot,
		` {"schemaVersion": 1, "traceEvents": [`: Trace,
		`[{"ph":"X","ts":1}]`:                    Trace,
		`[[1,2],[[0,1]]]`:                        Timeline,
		"hello":                                  Unknown,
		"":                                       Unknown,
	}
	for in, want := range cases {
		if got := Sniff([]byte(in)); got != want {
			t.Errorf("Sniff(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFindFixtures(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "fixtures")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("shared fixtures not present")
	}
	files, err := NewSource(0, nil, nil).Find([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]Kind{}
	for _, f := range files {
		kinds[filepath.Base(f.Path)] = f.Kind
	}
	want := map[string]Kind{
		"gpt2s_train_fp32_b4_ctx512.pickle":              Snapshot,
		"gpt2_6l_dataloader_bottleneck.pt.trace.json.gz": Trace,
		"gpt2tiny_with_stack.pt.trace.json":              Trace,
		"gpt2tiny_memory_timeline.json":                  Timeline,
	}
	for name, k := range want {
		if kinds[name] != k {
			t.Errorf("%s: kind %q, want %q", name, kinds[name], k)
		}
	}
	if _, ok := kinds["README.md"]; ok {
		t.Error("README.md was taken as an input")
	}
}

func TestFindThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "20260101_000000_x")
	os.MkdirAll(run, 0o755)
	os.WriteFile(filepath.Join(run, "snap.pickle"), []byte("\x80\x04N."), 0o644)
	if err := os.Symlink("20260101_000000_x", filepath.Join(dir, "latest")); err != nil {
		t.Skip(err)
	}
	files, err := NewSource(0, nil, nil).Find([]string{filepath.Join(dir, "latest")})
	if err != nil || len(files) != 1 || files[0].Kind != Snapshot {
		t.Fatalf("Find(latest) = %v, %v", files, err)
	}
}

// A bundle's rank folder named on its own is a Bundle input (its bundle
// reads it, with its phases and windows), unless bundles are not wanted.
func TestFindBundleRankFolder(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte("{}"), 0o644)
	rank := filepath.Join(dir, "rank2")
	os.MkdirAll(rank, 0o755)
	os.WriteFile(filepath.Join(rank, "snapshot_end.pickle"), []byte("\x80\x04N."), 0o644)
	files, err := NewSource(0, nil, nil).Find([]string{rank})
	if err != nil || len(files) != 1 || files[0] != (File{rank, Bundle}) {
		t.Errorf("Find(rank2) = %v, %v", files, err)
	}
	files, err = NewSource(0, nil, nil).Find([]string{rank}, Snapshot)
	if err != nil || len(files) != 1 || files[0].Kind != Snapshot {
		t.Errorf("Find(rank2, Snapshot) = %v, %v", files, err)
	}
}

// TestStdinAndPipes reads "-" and a named pipe: Find tells their kind from
// a buffered prefix and Open hands over the same stream, whole.
func TestStdinAndPipes(t *testing.T) {
	payload := []byte("\x80\x04" + strings.Repeat("N0", 50_000) + "N.")
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(payload)
	w.Close()
	src := NewSource(0, bytes.NewReader(gz.Bytes()), nil)
	defer src.Close()
	files, err := src.Find([]string{"-"})
	if err != nil || len(files) != 1 || files[0].Kind != Snapshot || files[0].Path != "-" {
		t.Fatalf("Find(-) = %v, %v", files, err)
	}
	// a second Find (a command's loader after its own check) knows the
	// kind without reading the stream again
	if again, err := src.Find([]string{"-"}); err != nil || len(again) != 1 || again[0].Kind != Snapshot {
		t.Fatalf("second Find(-) = %v, %v", again, err)
	}
	r, err := src.Open("-")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, payload) || r.Compression != Gzip {
		t.Fatalf("stdin: %d bytes (%v), compression %q", len(got), err, r.Compression)
	}
	r.Close()

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			f.Write(payload)
			f.Close()
		}
	}()
	files, err = src.Find([]string{fifo})
	if err != nil || len(files) != 1 || files[0].Kind != Snapshot {
		t.Fatalf("Find(fifo) = %v, %v", files, err)
	}
	r, err = src.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("fifo: %d bytes, %v", len(got), err)
	}
}

func TestNameAndEscape(t *testing.T) {
	for in, want := range map[string]string{
		"runs/snap.pickle":    "runs/snap.pickle",
		"é ü/名前.pickle":       "é ü/名前.pickle",
		"evil\x1b[2Jname":     `"evil\x1b[2Jname"`,
		"line\nbreak":         `"line\nbreak"`,
		"bad\xffutf8":         `"bad\xffutf8"`,
		"c1\u0085control":     `"c1\u0085control"`,
		"tab\there":           `"tab\there"`,
		`quote"and\backslash`: `quote"and\backslash`,
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %s, want %s", in, got, want)
		}
	}
	if got := Escape("x: \x1b]0;title\x07 y"); got != `x: \x1b]0;title\a y` {
		t.Errorf("Escape = %s", got)
	}
}

// TestFindSkipsUnreadable: an unreadable subfolder or file inside a folder
// is skipped and the skips are summed up in one warning line, while the
// readable inputs are still found. Permissions do not bind root, so as root
// the test runs itself again as nobody.
func TestFindSkipsUnreadable(t *testing.T) {
	dir := os.Getenv("PTSCOPE_UNREADABLE_DIR")
	if dir == "" {
		dir = t.TempDir()
		os.Chmod(dir, 0o755)
		os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's parent is private too
		for _, d := range []string{"ok", "locked", "locked/inner"} {
			os.MkdirAll(filepath.Join(dir, d), 0o755)
		}
		snap := []byte("\x80\x04N.")
		for _, f := range []string{"ok/a.pickle", "locked/inner/b.pickle", "c.pickle"} {
			os.WriteFile(filepath.Join(dir, f), snap, 0o644)
		}
		os.Chmod(filepath.Join(dir, "locked"), 0o000)
		os.Chmod(filepath.Join(dir, "c.pickle"), 0o000)
		defer os.Chmod(filepath.Join(dir, "locked"), 0o755)
		if os.Getuid() == 0 {
			// The build folder of the test binary is private: run a copy.
			bin := filepath.Join(t.TempDir(), "input.test")
			os.Chmod(filepath.Dir(bin), 0o755)
			if b, err := os.ReadFile(os.Args[0]); err != nil || os.WriteFile(bin, b, 0o755) != nil {
				t.Skip("cannot copy the test binary")
			}
			cmd := exec.Command(bin, "-test.run=^TestFindSkipsUnreadable$", "-test.v")
			cmd.Env = append(os.Environ(), "PTSCOPE_UNREADABLE_DIR="+dir)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				if strings.Contains(string(out), "--- FAIL") {
					t.Fatalf("as nobody:\n%s", out)
				}
				t.Skipf("cannot run as nobody: %v %s", err, out)
			}
			if !strings.Contains(string(out), "--- PASS: TestFindSkipsUnreadable") {
				t.Fatalf("as nobody:\n%s", out)
			}
			return
		}
	}
	var warnings bytes.Buffer
	src := NewSource(0, nil, &warnings)
	files, err := src.Find([]string{dir})
	if err != nil || len(files) != 1 || filepath.Base(files[0].Path) != "a.pickle" {
		t.Fatalf("Find = %v, %v", files, err)
	}
	w := warnings.String()
	if strings.Count(w, "\n") != 1 || !strings.Contains(w, "skipped 2 unreadable entries") || !strings.Contains(w, "permission denied") {
		t.Fatalf("warnings: %q", w)
	}
}

// Escape leaves no control that would drive a terminal or reorder the
// line: C0, C1, DEL, bidirectional controls and bytes that are not UTF-8.
func TestEscapeBidi(t *testing.T) {
	for in, want := range map[string]string{
		"plain name.pickle":     "plain name.pickle",
		"a\u202eelkcip.b":       `a\u202eelkcip.b`,
		"x\u2066y\u2069":        `x\u2066y\u2069`,
		"\x1b]0;title\x07":      `\x1b]0;title\a`,
		"caf\u00e9 \u00b5s":     "caf\u00e9 \u00b5s",
		"bad \xff byte":         `bad \xff byte`,
		"mark\u200fright\u061c": `mark\u200fright\u061c`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
