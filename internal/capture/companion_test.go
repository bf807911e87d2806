//go:build !windows

package capture

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptscope/ptscope/internal/testfixture"
)

func embeddedCompanion(t *testing.T) (map[string][]byte, string) {
	t.Helper()
	files, _, err := companionFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 || files["sitecustomize.py"] == nil || files["ptscope_companion/__init__.py"] == nil {
		t.Fatalf("embedded companion: %d files", len(files))
	}
	return files, companionHash(files)
}

// sameAsEmbedded fails the test unless dir holds the embedded files.
func sameAsEmbedded(t *testing.T, dir string) {
	t.Helper()
	files, _ := embeddedCompanion(t)
	for n, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want the embedded %d bytes", n, len(got), err, len(want))
		}
	}
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

func TestInstallCompanion(t *testing.T) {
	t.Parallel()
	_, sum := embeddedCompanion(t)
	cache := filepath.Join(t.TempDir(), "cache")
	c1, err := InstallCompanion(cache)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Dir != filepath.Join(cache, "companion-"+sum) || c1.Warning != "" || c1.temp {
		t.Fatalf("first install %+v", c1)
	}
	sameAsEmbedded(t, c1.Dir)
	if m := modeOf(t, cache); m.Perm() != 0o700 {
		t.Errorf("cache folder mode %v, want 0700", m)
	}
	// what Python writes next to the sources is kept
	writeFile(t, filepath.Join(c1.Dir, "__pycache__", "sitecustomize.cpython-312.pyc"), "pyc")
	writeFile(t, filepath.Join(c1.Dir, "ptscope_companion", "__pycache__", "_capture.cpython-312.pyc"), "pyc")
	c2, err := InstallCompanion(cache)
	if err != nil || c2.Dir != c1.Dir || c2.Warning != "" {
		t.Errorf("second install %+v %v, want reuse of %s", c2, err, c1.Dir)
	}
	if _, err := os.Stat(filepath.Join(c1.Dir, "__pycache__", "sitecustomize.cpython-312.pyc")); err != nil {
		t.Errorf("__pycache__ not kept: %v", err)
	}
	c2.Remove() // the cache stays
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Errorf("cache holds %d entries, want 1 (no temporaries left)", len(entries))
	}
	// an existing cache folder of this user that others cannot write to is
	// made private
	if err := os.Chmod(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if c3, err := InstallCompanion(cache); err != nil || c3.Dir != c1.Dir {
		t.Errorf("0755 cache: %+v %v", c3, err)
	}
	if m := modeOf(t, cache); m.Perm() != 0o700 {
		t.Errorf("cache folder mode %v, want 0700", m)
	}
}

// A changed unpacked copy is replaced by the embedded files before the run.
func TestInstallCompanionTampered(t *testing.T) {
	t.Parallel()
	_, sum := embeddedCompanion(t)
	elsewhere := filepath.Join(t.TempDir(), "evil.py")
	writeFile(t, elsewhere, "import os; os.system('id')\n")
	tests := []struct {
		name   string
		tamper func(dir string) error
	}{
		{"content changed", func(d string) error {
			return os.WriteFile(filepath.Join(d, "sitecustomize.py"), []byte("import os; os.system('id')\n"), 0o644)
		}},
		{"one byte appended", func(d string) error {
			f, err := os.OpenFile(filepath.Join(d, "ptscope_companion", "_capture.py"), os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString("#")
				f.Close()
			}
			return err
		}},
		{"cut short", func(d string) error { return os.Truncate(filepath.Join(d, "ptscope_companion", "__init__.py"), 10) }},
		{"file missing", func(d string) error { return os.Remove(filepath.Join(d, "ptscope_companion", "__init__.py")) }},
		{"module planted", func(d string) error { return os.WriteFile(filepath.Join(d, "json.py"), []byte("x = 1\n"), 0o644) }},
		{"package planted", func(d string) error { return os.Mkdir(filepath.Join(d, "numpy"), 0o755) }},
		{"symlink", func(d string) error {
			p := filepath.Join(d, "sitecustomize.py")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink(elsewhere, p)
		}},
		{"pycache elsewhere", func(d string) error { return os.Mkdir(filepath.Join(d, "ptscope_companion", "x"), 0o755) }},
		{"not a folder", func(d string) error {
			if err := os.RemoveAll(d); err != nil {
				return err
			}
			return os.WriteFile(d, nil, 0o644)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cache := filepath.Join(t.TempDir(), "cache")
			c, err := InstallCompanion(cache)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.tamper(c.Dir); err != nil {
				t.Fatal(err)
			}
			c2, err := InstallCompanion(cache)
			if err != nil {
				t.Fatal(err)
			}
			if c2.Dir != filepath.Join(cache, "companion-"+sum) || c2.temp {
				t.Errorf("got %+v, want the cache folder, replaced", c2)
			}
			sameAsEmbedded(t, c2.Dir)
			files, dirs := mustFiles(t)
			if err := verifyCompanion(c2.Dir, files, dirs); err != nil {
				t.Errorf("after replacement: %v", err)
			}
			entries, _ := os.ReadDir(cache)
			if len(entries) != 1 {
				t.Errorf("cache holds %d entries, want 1", len(entries))
			}
		})
	}
}

func mustFiles(t *testing.T) (map[string][]byte, map[string]bool) {
	files, dirs, err := companionFiles()
	if err != nil {
		t.Fatal(err)
	}
	return files, dirs
}

// plantCompanion makes dir look like a companion cache whose sitecustomize
// creates marker when Python starts, owned by uid (when not -1).
func plantCompanion(t *testing.T, dir, marker string, uid int) {
	t.Helper()
	_, sum := embeddedCompanion(t)
	evil := filepath.Join(dir, "companion-"+sum)
	files, _ := embeddedCompanion(t)
	for n, data := range files {
		writeFile(t, filepath.Join(evil, n), string(data))
	}
	writeFile(t, filepath.Join(evil, "sitecustomize.py"), "open("+pyString(marker)+", 'w').write('planted ran')\n")
	if uid >= 0 {
		_ = filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err == nil {
				err = os.Lchown(p, uid, uid)
			}
			return err
		})
	}
}

func pyString(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// needRoot skips the ownership cases unless the tests run as root (only
// root can make a folder another user's).
func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting a folder of another user needs root")
	}
}

// The companion folder another user created is never used, and nothing in
// it runs: the checks fall back to a new private folder for the run.
func TestInstallCompanionUntrusted(t *testing.T) {
	t.Parallel()
	const nobody = 65534
	tests := []struct {
		name   string
		root   bool
		plant  func(t *testing.T, base, marker string) string // returns the cache folder to pass
		reason string
	}{
		{"cache folder of another user", true, func(t *testing.T, base, marker string) string {
			c := filepath.Join(base, "ptscope-cache-0")
			plantCompanion(t, c, marker, nobody)
			if err := os.Chmod(c, 0o700); err != nil {
				t.Fatal(err)
			}
			return c
		}, "is owned by uid 65534, not by this user"},
		{"cache folder of another user, open to all", true, func(t *testing.T, base, marker string) string {
			c := filepath.Join(base, "ptscope-cache-0")
			plantCompanion(t, c, marker, nobody)
			if err := os.Chmod(c, 0o777); err != nil {
				t.Fatal(err)
			}
			return c
		}, "is owned by uid 65534"},
		{"companion folder of another user in mine", true, func(t *testing.T, base, marker string) string {
			c := filepath.Join(base, "cache")
			plantCompanion(t, c, marker, -1)
			_, sum := embeddedCompanion(t)
			if err := os.Chown(filepath.Join(c, "companion-"+sum), nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return c
		}, ""}, // replaced in place: the cache folder is mine
		{"parent of another user", true, func(t *testing.T, base, marker string) string {
			p := filepath.Join(base, "theirs")
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			c := filepath.Join(p, "cache")
			plantCompanion(t, c, marker, -1)
			return c
		}, "theirs is owned by uid 65534, neither this user"},
		{"cache folder writable by all", false, func(t *testing.T, base, marker string) string {
			c := filepath.Join(base, "cache")
			plantCompanion(t, c, marker, -1)
			if err := os.Chmod(c, 0o777); err != nil {
				t.Fatal(err)
			}
			return c
		}, "is writable by others (mode 0777)"},
		{"cache folder is a symlink", false, func(t *testing.T, base, marker string) string {
			real := filepath.Join(base, "real")
			plantCompanion(t, real, marker, -1)
			if err := os.Chmod(real, 0o700); err != nil {
				t.Fatal(err)
			}
			c := filepath.Join(base, "cache")
			if err := os.Symlink(real, c); err != nil {
				t.Fatal(err)
			}
			return c
		}, "is not a folder"},
		{"parent writable by all, not sticky", false, func(t *testing.T, base, marker string) string {
			p := filepath.Join(base, "open")
			if err := os.Mkdir(p, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o777); err != nil {
				t.Fatal(err)
			}
			c := filepath.Join(p, "cache")
			plantCompanion(t, c, marker, -1)
			return c
		}, "open is writable by everyone (mode 0777) and not sticky"},
	}
	py, pyErr := testfixture.PythonPath()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.root {
				needRoot(t)
			}
			base := t.TempDir()
			marker := filepath.Join(t.TempDir(), "marker")
			cache := tt.plant(t, base, marker)
			c, err := InstallCompanion(cache)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				c.Remove()
				if c.temp {
					if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
						t.Errorf("per-run folder %s left behind: %v", c.Dir, err)
					}
				}
			}()
			sameAsEmbedded(t, c.Dir)
			if tt.reason != "" {
				if !c.temp || !strings.Contains(c.Warning, tt.reason) || !strings.HasPrefix(filepath.Base(c.Dir), "ptscope-companion-") {
					t.Errorf("got %+v, want a per-run folder and a warning saying %q", c, tt.reason)
				}
				if m := modeOf(t, c.Dir); m.Perm() != 0o700 {
					t.Errorf("per-run folder mode %v, want 0700", m)
				}
				if strings.HasPrefix(c.Dir, base) {
					t.Errorf("per-run folder %s inside the untrusted one", c.Dir)
				}
			} else if c.temp || c.Warning != "" {
				t.Errorf("got %+v, want the replaced cache", c)
			}
			if pyErr == nil {
				cmd := exec.Command(py, "-c", "pass")
				cmd.Env = append(os.Environ(), "PYTHONPATH="+c.Dir)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("python with the companion: %v\n%s", err, out)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("the planted sitecustomize ran")
				}
			}
		})
	}
}

// With HOME and XDG_CACHE_HOME unset (batch jobs, containers) the cache is
// $TMPDIR/ptscope-cache-<uid>, a name anyone can take first: when someone
// did, the run gets a folder of a unique name instead.
func TestInstallCompanionNoHome(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("HOME", "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("TMPDIR", tmp)
	if err := os.Chmod(tmp, os.ModeSticky|0o777); err != nil { // a shared /tmp
		t.Fatal(err)
	}
	predictable := filepath.Join(tmp, "ptscope-cache-"+strconv.Itoa(os.Getuid()))
	c, err := InstallCompanion("")
	if err != nil || c.Dir != filepath.Join(predictable, "companion-"+companionHash(mustFilesOnly(t))) || c.temp {
		t.Fatalf("own cache: %+v %v", c, err)
	}
	if err := os.RemoveAll(predictable); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "marker")
	if os.Geteuid() == 0 {
		plantCompanion(t, predictable, marker, 65534)
	} else {
		plantCompanion(t, predictable, marker, -1)
		if err := os.Chmod(predictable, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	c, err = InstallCompanion("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove()
	if !c.temp || filepath.Dir(c.Dir) != tmp || !strings.HasPrefix(filepath.Base(c.Dir), "ptscope-companion-") || !strings.Contains(c.Warning, predictable) {
		t.Errorf("planted cache: %+v", c)
	}
	c2, err := InstallCompanion("")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Remove()
	if c2.Dir == c.Dir {
		t.Errorf("two runs share the per-run folder %s", c.Dir)
	}
}

func mustFilesOnly(t *testing.T) map[string][]byte {
	f, _ := mustFiles(t)
	return f
}

// End to end: a run whose cache folder was planted runs nothing from it,
// says so in the manifest, and removes its per-run folder afterwards.
func TestRunPlantedCompanion(t *testing.T) {
	t.Parallel()
	py := needPython(t)
	o := testOptions(t)
	marker := filepath.Join(t.TempDir(), "marker")
	plantCompanion(t, o.CacheDir, marker, -1)
	if err := os.Chmod(o.CacheDir, 0o777); err != nil {
		t.Fatal(err)
	}
	r := runIt(t, o, py, "-c", "import os, sys; print(os.environ['PYTHONPATH'].split(os.pathsep)[0]); print('ptscope_companion' in sys.modules)")
	lines := strings.Fields(r.stdout)
	if r.res.ExitCode != 0 || len(lines) != 2 {
		t.Fatalf("exit %d stdout %q stderr %q", r.res.ExitCode, r.stdout, r.stderr)
	}
	if lines[1] != "True" {
		t.Errorf("the embedded companion did not load: %q", r.stdout)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the planted sitecustomize ran")
	}
	if strings.HasPrefix(lines[0], o.CacheDir) || !strings.HasPrefix(filepath.Base(lines[0]), "ptscope-companion-") {
		t.Errorf("companion folder %s", lines[0])
	}
	if _, err := os.Stat(lines[0]); !os.IsNotExist(err) {
		t.Errorf("per-run folder %s left behind: %v", lines[0], err)
	}
	if w := strings.Join(r.res.Manifest.Warnings, "\n"); !strings.Contains(w, "companion cache not used ("+o.CacheDir+" is writable by others") {
		t.Errorf("warnings %q", w)
	}
}
