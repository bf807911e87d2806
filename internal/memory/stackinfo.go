package memory

import (
	"sync"

	"github.com/ptscope/ptscope/internal/snapshot"
)

// StackInfo answers, for any stack of a snapshot, its result form (every
// frame with its kind and the user's frame) and its source, named as the
// analysis names them, for views that look at blocks one by one (the web
// UI's block panel and breakdowns at any entry). Safe for concurrent use.
type StackInfo struct {
	mu     sync.Mutex
	c      *stacks
	groups *groupMatcher
}

// NewStackInfo classifies the frames of s.
func NewStackInfo(s *snapshot.Snapshot) *StackInfo { return &StackInfo{c: newStacks(s)} }

// Stack returns stack id (shared: do not modify).
func (x *StackInfo) Stack(id snapshot.StackID) *Stack {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.c.stack(id)
}

// Source returns the source and module of stack id, as Result.Sources and
// Result.Modules name them for a stack without a module path.
func (x *StackInfo) Source(id snapshot.StackID) (name, module string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.c.source(id)
}

// Group returns the keyword group (the default rules) of an allocation
// from its stack and module path (meta, "" when none recorded), as
// Result.Groups names it for allocations without a bundle label.
func (x *StackInfo) Group(id snapshot.StackID, meta string) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.groups == nil {
		x.groups = newGroupMatcher(x.c.s, DefaultRules(), x.c.kinds)
	}
	return x.groups.group(id, meta, "")
}
