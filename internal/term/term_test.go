package term

import (
	"bytes"
	"os"
	"testing"
)

func TestWidth(t *testing.T) {
	var b bytes.Buffer
	t.Setenv("COLUMNS", "")
	if got := Width(&b); got != DefaultWidth {
		t.Fatalf("no COLUMNS, not a terminal: %d", got)
	}
	t.Setenv("COLUMNS", "132")
	if got := Width(&b); got != 132 {
		t.Fatalf("COLUMNS=132: %d", got)
	}
	t.Setenv("COLUMNS", "10")
	if got := Width(&b); got != MinWidth {
		t.Fatalf("COLUMNS=10: %d", got)
	}
	t.Setenv("COLUMNS", "wide")
	if got := Width(&b); got != DefaultWidth {
		t.Fatalf("COLUMNS=wide: %d", got)
	}
}

func TestNotTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) || IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a file is not a terminal")
	}
	t.Setenv("NO_COLOR", "")
	if Color(f) {
		t.Fatal("no colour into a file")
	}
}

func TestProgressSilentOffTerminal(t *testing.T) {
	var b bytes.Buffer
	p := StartProgress(&b, "analyze: reading x")
	p.SetBytes(10, 100)
	p.Stop()
	p.Stop() // twice is fine
	if b.Len() != 0 {
		t.Fatalf("progress wrote %q to a non-terminal", b.String())
	}
	if got := p.line(); !bytes.Contains([]byte(got), []byte("analyze: reading x  10%")) {
		t.Fatalf("line %q", got)
	}
}
