package capture

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ptscope/ptscope/internal/bundle"
)

func ptr[T any](v T) *T { return &v }

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// childEnv is base with the companion first on PYTHONPATH, the bundle
// and configuration variables set, and extra (KEY=VALUE, a simulated
// rank's launcher variables) replacing any of the same name.
func childEnv(base []string, compDir, bundle, cfg string, extra ...string) []string {
	out := make([]string, 0, len(base)+3+len(extra))
	override := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		override[k] = true
	}
	pp := compDir
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PYTHONPATH":
			if v != "" {
				pp = compDir + string(os.PathListSeparator) + v
			}
			continue
		case "PTSCOPE_BUNDLE", "PTSCOPE_CONFIG":
			continue
		}
		if override[k] {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, extra...)
	return append(out, "PYTHONPATH="+pp, "PTSCOPE_BUNDLE="+bundle, "PTSCOPE_CONFIG="+cfg)
}

// tailer follows rank*/live.jsonl while the command runs.
type tailer struct {
	dir     string
	offsets map[string]int64
	last    map[string]bundle.Sample
	peak    map[string]bundle.Sample // per-field maxima
	partial map[string][]byte
}

func newTailer(dir string) *tailer {
	return &tailer{dir: dir, offsets: map[string]int64{}, last: map[string]bundle.Sample{}, peak: map[string]bundle.Sample{}, partial: map[string][]byte{}}
}

func (t *tailer) poll() {
	files, _ := filepath.Glob(filepath.Join(t.dir, "rank*", "live.jsonl"))
	for _, f := range files {
		key := filepath.Base(filepath.Dir(f))
		fh, _, err := bundle.OpenSideFile(f)
		if err != nil {
			continue
		}
		if _, err := fh.Seek(t.offsets[key], io.SeekStart); err == nil {
			data, _ := io.ReadAll(io.LimitReader(fh, 16<<20))
			t.offsets[key] += int64(len(data))
			buf := append(t.partial[key], data...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				var s bundle.Sample
				if json.Unmarshal(buf[:i], &s) == nil {
					t.add(key, s)
				}
				buf = buf[i+1:]
			}
			if len(buf) > bundle.MaxJSONLLineBytes {
				buf = nil // not a sample line; what follows up to the next newline fails to parse
			}
			t.partial[key] = append([]byte(nil), buf...)
		}
		fh.Close()
	}
}

func (t *tailer) add(key string, s bundle.Sample) {
	t.last[key] = s
	p := t.peak[key]
	p.MaxAllocatedBytes = max(p.MaxAllocatedBytes, s.MaxAllocatedBytes, s.AllocatedBytes)
	p.MaxReservedBytes = max(p.MaxReservedBytes, s.MaxReservedBytes, s.ReservedBytes)
	p.DeviceUsedBytes = max(p.DeviceUsedBytes, s.DeviceUsedBytes)
	p.HostRSSBytes = max(p.HostRSSBytes, s.HostRSSBytes)
	p.DeviceTotalBytes = max(p.DeviceTotalBytes, s.DeviceTotalBytes)
	t.peak[key] = p
}

func (t *tailer) keys() []string {
	keys := make([]string, 0, len(t.last))
	for k := range t.last {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := bundle.RankDirNumber(keys[i])
		b, _ := bundle.RankDirNumber(keys[j])
		if a != b {
			return a < b
		}
		return keys[i] < keys[j]
	})
	return keys
}
