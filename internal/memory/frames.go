package memory

import (
	"path"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// isNoise reports frames every stack has that say nothing about the program
// (the same filter MemoryViz and _memory_viz.py apply).
func isNoise(f *snapshot.Frame) bool {
	n, fn := f.Name, f.Filename
	for _, s := range []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	for _, s := range []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c", "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"} {
		if strings.Contains(fn, s) {
			return true
		}
	}
	return false
}

// isCpp reports C++ frames (recorded with stacks="all").
func isCpp(f *snapshot.Frame) bool {
	fn := f.Filename
	return fn == "??" || fn == "" || strings.HasSuffix(fn, ".cpp") || strings.HasSuffix(fn, ".h") ||
		strings.HasSuffix(fn, ".cc") || strings.HasSuffix(fn, ".cu") || strings.HasSuffix(fn, ".cuh")
}

// isInternal reports frames of PyTorch itself and of C++ (not user code).
func isInternal(f *snapshot.Frame) bool {
	if isCpp(f) {
		return true
	}
	fn := f.Filename
	if strings.Contains(fn, "<frozen ") {
		return true
	}
	for _, m := range []string{"site-packages/", "dist-packages/"} {
		if i := strings.LastIndex(fn, m); i >= 0 {
			return strings.HasPrefix(fn[i+len(m):], "torch/")
		}
	}
	return strings.Contains(fn, "/torch/") || strings.HasPrefix(fn, "torch/")
}

// isAllocatorPlumbing reports C++ frames between an op and the allocator
// (c10 allocator, at::empty, dispatcher), hidden in short stacks.
func isAllocatorPlumbing(f *snapshot.Frame) bool {
	if !isCpp(f) {
		return false
	}
	n := strings.TrimPrefix(f.Name, "void ")
	for _, p := range []string{"c10::", "at::detail::", "at::native::empty", "at::empty", "at::_ops::", "at::TensorBase", "at::(anonymous", "at::native::(anonymous", "std::", "caffe2::", "at::Tensor::", "_object*", "torch::autograd::VariableType::", "torch::ADInplaceOrView::"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// SourceFrame returns the first frame outside PyTorch internals, or the
// first meaningful frame if the whole stack is internal.
func SourceFrame(s *snapshot.Snapshot, id snapshot.StackID) (snapshot.Frame, bool) {
	var first *snapshot.Frame
	for _, fid := range s.Stacks[id] {
		f := &s.Frames[fid]
		if isNoise(f) || isAllocatorPlumbing(f) {
			continue
		}
		if first == nil {
			first = f
		}
		if !isInternal(f) {
			return *f, true
		}
	}
	if first != nil {
		return *first, true
	}
	return snapshot.Frame{}, false
}

// ShortFrame renders a frame as "file.py:123 name" with the path trimmed to
// what identifies it (after site-packages, or the last two elements).
func ShortFrame(f snapshot.Frame) string {
	return TrimPath(f.Filename) + ":" + strconv.Itoa(f.Line) + " " + f.Name
}

// TrimPath shortens a source path for display.
func TrimPath(p string) string {
	for _, m := range []string{"site-packages/", "dist-packages/"} {
		if i := strings.LastIndex(p, m); i >= 0 {
			return p[i+len(m):]
		}
	}
	dir, file := path.Split(p)
	if dir == "" {
		return file
	}
	return path.Base(dir) + "/" + file
}

// ShortStack returns up to n meaningful frames of a stack, innermost first,
// skipping noise and collapsing runs of module-call plumbing.
func ShortStack(s *snapshot.Snapshot, id snapshot.StackID, n int, full bool) []snapshot.Frame {
	var out []snapshot.Frame
	for _, fid := range s.Stacks[id] {
		f := s.Frames[fid]
		if !full {
			if isNoise(&f) || isAllocatorPlumbing(&f) {
				continue
			}
			if strings.HasSuffix(f.Filename, "torch/nn/modules/module.py") && (f.Name == "_call_impl" || f.Name == "_wrapped_call_impl") {
				continue
			}
		}
		out = append(out, f)
		if n > 0 && len(out) >= n {
			break
		}
	}
	return out
}
