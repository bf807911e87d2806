package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// WriteFileAtomic writes data to path through a temporary file renamed
// over it (mode 0644).
func WriteFileAtomic(path string, data []byte) error { return writeAtomic(path, data, 0o644) }

func writeAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.tmp%d", filepath.Base(path), os.Getpid()))
	os.Remove(tmp) // a leftover keeps its mode; this one gets perm
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// WriteManifest writes dir/manifest.json, readable by its owner only (mode
// 0600): it holds the command line and the host.
func WriteManifest(dir string, m *Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, "manifest.json"), append(data, '\n'), 0o600)
}

// procRecord is a .ptscope/proc/<pid>.json marker left by the companion in
// every Python process it loaded in.
type procRecord struct {
	Pid            int    `json:"pid"`
	Python         string `json:"python"`
	Torch          string `json:"torch"`
	TorchInstalled *bool  `json:"torch_installed"`
	CUDAAvailable  *bool  `json:"cuda_available"`
	CUDAInit       bool   `json:"cuda_initialized"`
	Skipped        bool   `json:"skipped"`
}

// FinishManifest fills the per-rank facts, files and warnings after the run.
func FinishManifest(dir string, m *Manifest, ranks []int) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n, ok := rankDirNumber(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		info := RankInfo{Dir: e.Name(), Rank: n}
		if data, err := ReadSideFile(filepath.Join(dir, e.Name(), "process.json"), MaxJSONSideFileBytes); err == nil {
			if err := json.Unmarshal(data, &info); err != nil {
				m.Warnings = append(m.Warnings, fmt.Sprintf("%s/process.json: %v", e.Name(), err))
			}
			info.Dir = e.Name()
		} else if errors.Is(err, fs.ErrNotExist) {
			m.Warnings = append(m.Warnings, fmt.Sprintf("%s: the process ended before writing process.json (killed?)", e.Name()))
		} else {
			m.Warnings = append(m.Warnings, err.Error())
		}
		if info.Unfinished() {
			m.Warnings = append(m.Warnings, fmt.Sprintf("%s: the process did not finish normally; no end snapshot", e.Name()))
		}
		m.Ranks = append(m.Ranks, info)
	}
	sort.SliceStable(m.Ranks, func(i, j int) bool { return m.Ranks[i].Rank < m.Ranks[j].Rank })
	for _, r := range m.Ranks {
		if m.DeviceName == "" && r.DeviceName != "" {
			m.DeviceName, m.DeviceTotalMemoryBytes = r.DeviceName, r.DeviceTotalMemoryBytes
		}
		if m.AllocatorSettings == nil && r.AllocatorSettings != nil {
			m.AllocatorSettings = r.AllocatorSettings
		}
		if m.TorchVersion == "" {
			m.TorchVersion, m.CUDAVersion = r.TorchVersion, r.CUDAVersion
		}
		if r.WorldSize != nil && *r.WorldSize > m.WorldSize {
			m.WorldSize = *r.WorldSize
		}
		if r.OOM != nil {
			m.Warnings = append(m.Warnings, r.OOM.warning(r.Rank, r.Dir))
		}
	}
	if m.WorldSize == 0 && len(m.Ranks) > 0 {
		m.WorldSize = len(m.Ranks)
	}
	if len(m.Ranks) == 0 {
		if w := noCaptureWarning(dir, ranks); w != "" {
			m.Warnings = append(m.Warnings, w)
		}
	}
	if n, err := countLines(filepath.Join(dir, "companion.log"), maxLogBytes); err == nil && n > 0 {
		m.Warnings = append(m.Warnings, fmt.Sprintf("the companion logged %d message(s); see %s", n, filepath.Join(dir, "companion.log")))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.Warnings = append(m.Warnings, err.Error())
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && name != "manifest.json" {
			if rel, err := filepath.Rel(dir, p); err == nil {
				m.Files = append(m.Files, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	sort.Strings(m.Files)
}

// NoCapturePrefix starts the warning that nothing was captured (--quiet
// leaves it out of the terminal output).
const NoCapturePrefix = "nothing was captured: "

// noCaptureWarning explains, in one line, why no rank was captured.
func noCaptureWarning(dir string, ranks []int) string {
	procs, _ := filepath.Glob(filepath.Join(dir, ".ptscope", "proc", "*.json"))
	var loaded, withTorch, skipped, noTorch, noCUDA, cudaInit int
	python, torchVer := "", ""
	for _, p := range procs {
		data, err := ReadSideFile(p, MaxJSONSideFileBytes)
		if err != nil {
			continue
		}
		var r procRecord
		if json.Unmarshal(data, &r) != nil {
			continue
		}
		loaded++
		switch {
		case r.Skipped:
			skipped++
		case r.Torch != "":
			withTorch++
			torchVer = r.Torch
			if r.CUDAInit {
				cudaInit++
			}
			if r.CUDAAvailable != nil && !*r.CUDAAvailable {
				noCUDA++
			}
		case r.TorchInstalled != nil && !*r.TorchInstalled:
			noTorch++
			python = r.Python
		}
	}
	switch {
	case loaded == 0:
		return NoCapturePrefix + "no Python process loaded the ptscope companion (is the command a Python program or launcher such as python or torchrun? python -I, -E or -S ignore PYTHONPATH)"
	case skipped == loaded:
		return fmt.Sprintf(NoCapturePrefix+"no process matched --ranks %v", ranks)
	case withTorch == 0 && noTorch > 0:
		return fmt.Sprintf(NoCapturePrefix+"PyTorch is not installed in the command's Python %s (the command ran without capture)", python)
	case withTorch == 0:
		return NoCapturePrefix + "the command never imported torch"
	case cudaInit > 0:
		return NoCapturePrefix + "torch initialised CUDA but no process allocated GPU memory"
	case noCUDA == withTorch:
		return fmt.Sprintf(NoCapturePrefix+"torch %s reports no usable CUDA device (torch.cuda.is_available() is False)", torchVer)
	default:
		return NoCapturePrefix + "torch never initialised CUDA (no GPU visible, or a CPU-only run)"
	}
}
