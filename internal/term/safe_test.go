package term

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestSafeWriter: control bytes, C1 controls and bytes that are not UTF-8
// come out escaped, whatever the write boundaries; the writer's own mark
// comes out as ESC; text and JSON pass unchanged.
func TestSafeWriter(t *testing.T) {
	var b bytes.Buffer
	s := NewSafeWriter(&b)
	mark := s.Mark()
	in := "ok\tline\n" + "evil\x1b]0;owned\a\x1b[2J" + "\u009b31m" + "\xff\xc3" + mark + "[1mbold" + mark + "[0m" + "é✓\r\x7f" + "a\u202ecod.py"
	want := "ok\tline\n" + `evil\x1b]0;owned\x07\x1b[2J` + `\u009b31m` + `\xff\xc3` + "\x1b[1mbold\x1b[0m" + `é✓\x0d\x7f` + `a\u202ecod.py`
	for _, step := range []int{1, 2, 3, 7, len(in)} {
		b.Reset()
		for i := 0; i < len(in); i += step {
			if _, err := s.Write([]byte(in[i:min(i+step, len(in))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("writes of %d bytes: %q, want %q", step, b.String(), want)
		}
		if strings.Count(b.String(), "\x1b") != 2 {
			t.Errorf("writes of %d bytes: %d ESC bytes, want the mark's 2", step, strings.Count(b.String(), "\x1b"))
		}
	}
	// An input that holds part of a mark, or ESC NUL, prints escaped.
	b.Reset()
	s.Write([]byte("x\x1b\x00" + mark[2:6] + "y"))
	s.Flush()
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("a partial mark got through: %q", b.String())
	}
	// JSON stays valid and equal.
	js, _ := json.Marshal(map[string]string{"name": "a\x1b[2J\u009b\xffb"})
	b.Reset()
	s.Write(js)
	var back map[string]string
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["name"] != "a\x1b[2J\u009b\ufffdb" {
		t.Errorf("JSON through the writer: %s (%v)", b.String(), err)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"trace: reading x.json":          "trace: reading x.json",
		"evil\x1b]0;owned\a\x1b[2J.json": `evil\x1b]0;owned\x07\x1b[2J.json`,
		"r\u202eyp.json \u009b\xff":      `r\u202eyp.json \u009b\xff`,
		"naïve":                          "naïve",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
