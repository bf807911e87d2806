package input

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
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
		r, err := NewReader(&buf)
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
	r, _ := NewReader(bytes.NewReader(payload))
	if got, _ := io.ReadAll(r); r.Compression != None || !bytes.Equal(got, payload) {
		t.Error("plain passthrough failed")
	}
}

func TestSniff(t *testing.T) {
	cases := map[string]Kind{
		"\x80\x04\x95":                           Snapshot,
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
	files, err := Find([]string{dir})
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
	files, err := Find([]string{filepath.Join(dir, "latest")})
	if err != nil || len(files) != 1 || files[0].Kind != Snapshot {
		t.Fatalf("Find(latest) = %v, %v", files, err)
	}
}
