package rundir

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteWholeOrNothing: Write makes a folder with every file and points
// latest at it; a cancelled context or a bad file name leave no folder,
// no temporary folder, and latest where it was.
func TestWriteWholeOrNothing(t *testing.T) {
	out := t.TempDir()
	files := []File{{Name: "report.txt", Data: []byte("text\n")}, {Name: "report.json", Data: []byte("{}\n")}}
	dir, err := Write(context.Background(), out, "snap", files, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if b, err := os.ReadFile(filepath.Join(dir, f.Name)); err != nil || !bytes.Equal(b, f.Data) {
			t.Errorf("%s: %q, %v", f.Name, b, err)
		}
	}
	if l, err := os.Readlink(filepath.Join(out, LatestName)); err != nil || l != filepath.Base(dir) {
		t.Fatalf("latest -> %q, %v", l, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var told []string
	temp := func(p string) func() { told = append(told, p); return func() {} }
	if d, err := Write(ctx, out, "snap", files, temp); err == nil || d != "" {
		t.Errorf("cancelled: %q, %v", d, err)
	}
	if len(told) != 1 || !strings.HasPrefix(filepath.Base(told[0]), ".") {
		t.Errorf("temporary folders told: %q", told)
	}
	if _, err := Write(context.Background(), out, "snap", []File{{Name: "a"}, {Name: "../b"}}, nil); err == nil {
		t.Error("a bad file name was accepted")
	}
	ents, _ := os.ReadDir(out)
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("output folder holds %q, want the one run folder and latest", names)
	}
	if l, _ := os.Readlink(filepath.Join(out, LatestName)); l != filepath.Base(dir) {
		t.Errorf("latest moved to %q", l)
	}
	// The same second and name again: the next free name.
	dir2, err := Write(context.Background(), out, "snap", files, nil)
	if err != nil || dir2 == dir {
		t.Fatalf("second run: %q, %v", dir2, err)
	}
}
