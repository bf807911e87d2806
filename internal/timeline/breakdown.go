package timeline

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/ptscope/ptscope/internal/memory"
)

// By is what a breakdown groups blocks by.
type By uint8

// Breakdown keys.
const (
	ByCategory    By = iota
	ByStack          // the allocation's stack
	BySource         // the user's source line (memory.SourceFrame)
	ByModule         // the module path (ptscope run bundles), exact
	ByModuleGroup    // the module path with numbers as "*" (layers.*.mlp)
	ByGroup          // the keyword group (memory.DefaultRules)
)

var byNames = [...]string{"category", "stack", "source", "module", "module_group", "group"}

func (b By) String() string { return byNames[b] }

// ParseBy reads a breakdown key's name.
func ParseBy(s string) (By, error) {
	for i, n := range byNames {
		if n == s {
			return By(i), nil
		}
	}
	return 0, fmt.Errorf("unknown breakdown %q (category, stack, source, module, module_group, group)", s)
}

// Row is one group of a breakdown: blocks allocated after an entry whose
// key is Key (the id Memory.Key returns for them).
type Row struct {
	Key   int32  `json:"key"`
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	Count int    `json:"count"`
}

// keys are the per-block keys of every breakdown but category, built on
// first use (source frames and module groups cost a pass over the stacks).
type keys struct {
	once        sync.Once
	source      []int32 // per stack: index into sourceNames
	sourceNames []string
	moduleGroup []int32 // per string id: index into groupNames
	groupNames  []string
	group       []int32 // per block: index into keywordNames
	keywords    []string
}

var digits = regexp.MustCompile(`(^|\.)\d+(\.|$)`)

// moduleGroupName replaces the numbers of a module path with "*"
// ("model.layers.3.mlp" -> "model.layers.*.mlp").
func moduleGroupName(p string) string {
	for {
		q := digits.ReplaceAllString(p, "$1*$2")
		if q == p {
			return q
		}
		p = q
	}
}

func (m *Memory) keys() *keys {
	k := &m.keyTable
	k.once.Do(func() {
		s := m.Snap
		idx := map[string]int32{}
		intern := func(names *[]string, v string) int32 {
			if i, ok := idx[v]; ok {
				return i
			}
			idx[v] = int32(len(*names))
			*names = append(*names, v)
			return idx[v]
		}
		k.source = make([]int32, len(s.Stacks))
		for id := range s.Stacks {
			name, _ := m.Stacks.Source(uint32(id))
			k.source[id] = intern(&k.sourceNames, name)
		}
		clear(idx)
		k.moduleGroup = make([]int32, len(s.Strings))
		for id, str := range s.Strings {
			name := "(none)"
			if id > 0 && str != "" {
				name = moduleGroupName(str)
			}
			k.moduleGroup[id] = intern(&k.groupNames, name)
		}
		clear(idx)
		type pair struct{ stack, meta uint32 }
		seen := map[pair]int32{}
		k.group = make([]int32, len(m.Blocks))
		for id := range m.Blocks {
			a := m.Alloc(id)
			p := pair{a.Stack, a.Metadata}
			g, ok := seen[p]
			if !ok {
				meta := ""
				if a.Metadata > 0 && int(a.Metadata) < len(s.Strings) {
					meta = s.Strings[a.Metadata]
				}
				g = intern(&k.keywords, m.Stacks.Group(a.Stack, meta))
				seen[p] = g
			}
			k.group[id] = g
		}
	})
	return k
}

// Key returns block id's key in breakdown by.
func (m *Memory) Key(by By, id int) int32 {
	if by == ByCategory {
		return int32(m.cats[id])
	}
	a := m.Alloc(id)
	switch by {
	case ByStack:
		return int32(a.Stack)
	case BySource:
		return m.keys().source[a.Stack]
	case ByModule:
		return int32(a.Metadata)
	case ByModuleGroup:
		return m.keys().moduleGroup[a.Metadata]
	case ByGroup:
		return m.keys().group[id]
	}
	return 0
}

// ValidKey reports whether key is one of breakdown by's keys (KeyName
// names it).
func (m *Memory) ValidKey(by By, key int32) bool {
	if key < 0 {
		return false
	}
	n := 0
	switch by {
	case ByCategory:
		n = int(memory.CatBeforeRecording) + 1
	case ByStack:
		n = len(m.Snap.Stacks)
	case BySource:
		n = len(m.keys().sourceNames)
	case ByModule:
		n = len(m.Snap.Strings)
	case ByModuleGroup:
		n = len(m.keys().groupNames)
	case ByGroup:
		n = len(m.keys().keywords)
	}
	return int(key) < n
}

// KeyName names a key of breakdown by.
func (m *Memory) KeyName(by By, key int32) string {
	switch by {
	case ByCategory:
		return memory.Category(key).String()
	case ByStack:
		name, _ := m.Stacks.Source(uint32(key))
		return fmt.Sprintf("stack %d: %s", key, name)
	case BySource:
		return m.keys().sourceNames[key]
	case ByModule:
		if key <= 0 || int(key) >= len(m.Snap.Strings) || m.Snap.Strings[key] == "" {
			return "(none)"
		}
		return m.Snap.Strings[key]
	case ByModuleGroup:
		return m.keys().groupNames[key]
	case ByGroup:
		return m.keys().keywords[key]
	}
	return ""
}

// Breakdown groups the blocks allocated after entry i by key, largest
// first. Every group is returned; callers trim.
func (m *Memory) Breakdown(i int, by By) []Row {
	ids, _ := m.AllocatedLiveAt(i)
	rows := map[int32]*Row{}
	for _, id := range ids {
		key := m.Key(by, int(id))
		r := rows[key]
		if r == nil {
			r = &Row{Key: key}
			rows[key] = r
		}
		r.Bytes += m.Blocks[id].Size
		r.Count++
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		r.Name = m.KeyName(by, r.Key)
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Row) int {
		if a.Bytes != b.Bytes {
			return cmp.Compare(b.Bytes, a.Bytes)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
