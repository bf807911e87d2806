package estimate

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Device is the accelerator a rank runs on.
type Device struct {
	Name                 string   `json:"name"`
	Aliases              []string `json:"aliases,omitempty"`
	MemoryBytes          int64    `json:"memory_bytes"`
	Arch                 string   `json:"arch"`
	CUDAContextBytes     int64    `json:"cuda_context_bytes"`
	CublasWorkspaceBytes int64    `json:"cublas_workspace_bytes"`
}

type gpuFile struct {
	Comment string   `json:"_comment"`
	GPUs    []Device `json:"gpus"`
}

// GPUs lists the embedded GPU descriptions.
func GPUs() ([]Device, error) {
	b, err := presetFS.ReadFile("presets/gpus.json")
	if err != nil {
		return nil, err
	}
	var f gpuFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("presets/gpus.json: %w", err)
	}
	return f.GPUs, nil
}

// GPU looks up a GPU by name or alias (case-insensitive).
func GPU(name string) (Device, error) {
	gs, err := GPUs()
	if err != nil {
		return Device{}, err
	}
	var names []string
	for _, g := range gs {
		if strings.EqualFold(g.Name, name) {
			return g, nil
		}
		for _, a := range g.Aliases {
			if strings.EqualFold(a, name) {
				return g, nil
			}
		}
		names = append(names, g.Name)
	}
	sort.Strings(names)
	return Device{}, fmt.Errorf("unknown gpu %q (have %s)", name, strings.Join(names, ", "))
}

// DefaultDevice is used for the terms outside the model when no GPU is named: an sm90 GPU
// (the cuBLAS workspace and CUDA context of an H100) with no memory limit.
func DefaultDevice() Device {
	d, err := GPU("h100-80gb")
	if err != nil {
		return Device{Name: "unspecified", Arch: "sm90", CUDAContextBytes: 512 << 20, CublasWorkspaceBytes: 64 << 20}
	}
	d.Name, d.Aliases, d.MemoryBytes = "unspecified (sm90 overheads)", nil, 0
	return d
}
