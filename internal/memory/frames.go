package memory

import (
	"path"
	"strconv"
	"strings"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// isNoise reports frames every stack has that say nothing about the program
// (the filter MemoryViz and _memory_viz.py apply, plus the CPython API,
// libc and thread start frames of stacks="all" recordings).
func isNoise(f *snapshot.Frame) bool {
	n, fn := f.Name, f.Filename
	for _, s := range []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	if isCpp(f) {
		for _, p := range []string{"Py", "_Py", "__libc", "__clone", "pthread_", "start_thread", "std::error_code::"} {
			if strings.HasPrefix(n, p) {
				return true
			}
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
		strings.HasSuffix(fn, ".cc") || strings.HasSuffix(fn, ".cu") || strings.HasSuffix(fn, ".cuh") ||
		strings.HasSuffix(fn, ".c")
}

// isAllocatorPlumbing reports C++ frames between an op and the allocator
// (c10 allocator, at::empty, dispatcher, autograd's engine), hidden in
// short stacks.
func isAllocatorPlumbing(f *snapshot.Frame) bool {
	if !isCpp(f) {
		return false
	}
	n := strings.TrimPrefix(f.Name, "void ")
	for _, p := range []string{"c10::", "at::detail::", "at::native::empty", "at::empty", "at::_ops::", "at::TensorBase", "at::(anonymous",
		"at::native::(anonymous", "std::", "caffe2::", "at::Tensor::", "_object*", "torch::autograd::VariableType::",
		"torch::ADInplaceOrView::", "torch::autograd::Engine::", "torch::autograd::Node::", "torch::autograd::python::PythonEngine::",
		"at::autocast::"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// frameKind classifies a frame.
func frameKind(f *snapshot.Frame) FrameKind {
	if isNoise(f) || isAllocatorPlumbing(f) {
		return FramePlumbing
	}
	if isCpp(f) {
		return FrameCpp
	}
	fn := f.Filename
	if strings.HasSuffix(fn, "torch/nn/modules/module.py") && (f.Name == "_call_impl" || f.Name == "_wrapped_call_impl") {
		return FramePlumbing
	}
	if strings.Contains(fn, "<frozen ") {
		return FrameLibrary
	}
	for _, m := range []string{"site-packages/", "dist-packages/"} {
		if i := strings.LastIndex(fn, m); i >= 0 {
			if strings.HasPrefix(fn[i+len(m):], "torch/") {
				return FrameTorch
			}
			return FrameLibrary
		}
	}
	if strings.Contains(fn, "/torch/") || strings.HasPrefix(fn, "torch/") {
		return FrameTorch
	}
	if strings.Contains(fn, "/lib/python") || strings.HasPrefix(fn, "<") {
		return FrameLibrary // the standard library, <string>, <stdin>
	}
	return FrameUser
}

// stacks classifies the frames of a snapshot once and builds result stacks
// from its stack ids, caching what every stack needs.
type stacks struct {
	s     *snapshot.Snapshot
	kinds []FrameKind // per FrameID
	built map[snapshot.StackID]*Stack
}

func newStacks(s *snapshot.Snapshot) *stacks {
	k := make([]FrameKind, len(s.Frames))
	for i := range s.Frames {
		k[i] = frameKind(&s.Frames[i])
	}
	return &stacks{s: s, kinds: k, built: map[snapshot.StackID]*Stack{}}
}

// frames returns every frame of a stack with its kind.
func (c *stacks) frames(id snapshot.StackID) []Frame {
	ids := c.s.Stacks[id]
	out := make([]Frame, len(ids))
	for i, fid := range ids {
		f := &c.s.Frames[fid]
		out[i] = Frame{Filename: f.Filename, Line: f.Line, Name: f.Name, Kind: c.kinds[fid]}
	}
	return out
}

// stack returns the result form of a stack (shared: do not modify).
func (c *stacks) stack(id snapshot.StackID) *Stack {
	if st, ok := c.built[id]; ok {
		return st
	}
	st := &Stack{Frames: c.frames(id), UserFrame: -1}
	for i, f := range st.Frames {
		if f.Kind == FrameUser {
			st.UserFrame = i
			break
		}
	}
	st.AutogradNode = autogradNode(st.Frames)
	c.built[id] = st
	return st
}

// hasPython reports whether a stack holds any Python frame.
func (c *stacks) hasPython(id snapshot.StackID) bool {
	for _, fid := range c.s.Stacks[id] {
		if c.kinds[fid].IsPython() {
			return true
		}
	}
	return false
}

// autogradNode finds the backward node in C++ frames such as
// "torch::autograd::generated::NllLossBackward0::apply(...)".
func autogradNode(fs []Frame) string {
	const gen = "torch::autograd::generated::"
	for _, f := range fs {
		if f.Kind != FrameCpp {
			continue
		}
		i := strings.Index(f.Name, gen)
		if i < 0 {
			continue
		}
		rest := f.Name[i+len(gen):]
		end := strings.IndexAny(rest, ":(<")
		if end < 0 {
			end = len(rest)
		}
		if node := strings.TrimSuffix(rest[:end], "_apply_functional"); node != "" {
			return node
		}
	}
	return ""
}

// source names where a stack's memory comes from: the first Python frame
// outside PyTorch; for stacks without Python frames the backward node, or
// the first meaningful C++ function; else the first PyTorch frame.
func (c *stacks) source(id snapshot.StackID) (name, module string) {
	st := c.stack(id)
	var torch, cpp *Frame
	for i := range st.Frames {
		f := &st.Frames[i]
		switch f.Kind {
		case FrameUser, FrameLibrary:
			return ShortFrame(*f), TrimPath(f.Filename)
		case FrameTorch:
			if torch == nil {
				torch = f
			}
		case FrameCpp:
			if cpp == nil {
				cpp = f
			}
		}
	}
	switch {
	case torch != nil:
		return ShortFrame(*torch), TrimPath(torch.Filename)
	case st.AutogradNode != "":
		return st.AutogradNode + " (backward)", "<autograd backward>"
	case cpp != nil:
		return cppName(cpp.Name), "<C++>"
	}
	return NoStack, NoStack
}

// NoStack names memory whose allocation recorded no frames.
const NoStack = "<no stack recorded>"

// cppName shortens a C++ function signature to its qualified name: no
// parameter list, template arguments collapsed to "<…>", anonymous
// namespaces kept ("at::{anonymous}::create_out").
func cppName(n string) string {
	n = strings.TrimPrefix(n, "void ")
	n = strings.ReplaceAll(n, "(anonymous namespace)", "{anonymous}")
	var b strings.Builder
	depth := 0
	for _, r := range n {
		switch {
		case r == '<':
			if depth == 0 {
				b.WriteString("<…>")
			}
			depth++
		case r == '>' && depth > 0:
			depth--
		case depth > 0:
		case r == '(':
			return b.String()
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ShortFrame renders a frame as "file.py:123 name" with the path trimmed to
// what identifies it (after site-packages, or the last two elements); a C++
// frame without a file is its function's qualified name.
func ShortFrame(f Frame) string {
	if (f.Kind == FrameCpp || f.Kind == FramePlumbing) && (f.Filename == "??" || f.Filename == "" || f.Line == 0) {
		return cppName(f.Name)
	}
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

// Short is the stack as short views show it: at most n frames, innermost
// first, without plumbing, and without C++ frames when Python frames exist.
// When the user's frame (or, for stacks without Python frames, the user's
// frame of the backward caller) lies beyond those n frames, it is returned
// as user so that a view can show it after a gap: the user's line is never
// cut. n <= 0 means no limit.
func (s *Stack) Short(n int) (head []Frame, user *Frame) {
	python := false
	for _, f := range s.Frames {
		if f.Kind.IsPython() {
			python = true
			break
		}
	}
	var want *Frame // the user's frame, wherever it is
	switch {
	case s.UserFrame >= 0 && s.UserFrame < len(s.Frames):
		want = &s.Frames[s.UserFrame]
	case !python:
		for i := range s.Caller {
			if s.Caller[i].Kind == FrameUser {
				want = &s.Caller[i]
				break
			}
		}
	}
	shown := false
	for i := range s.Frames {
		f := &s.Frames[i]
		if f.Kind == FramePlumbing || python && f.Kind == FrameCpp {
			continue
		}
		if n > 0 && len(head) >= n {
			break
		}
		head = append(head, *f)
		shown = shown || f == want
	}
	if want != nil && !shown {
		u := *want
		return head, &u
	}
	return head, nil
}
