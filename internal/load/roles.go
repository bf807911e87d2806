package load

import (
	"github.com/ptscope/ptscope/internal/bundle"
	"github.com/ptscope/ptscope/internal/memory"
)

// roleCategory is the analysis category of an inventory's tensor kind.
// Module buffers (state_dict entries that are not parameters, such as
// running statistics) count as parameters: model state that lives as long
// as the model.
var roleCategory = map[string]memory.Category{
	bundle.KindParameter:      memory.CatParameter,
	bundle.KindBuffer:         memory.CatParameter,
	bundle.KindGradient:       memory.CatGradient,
	bundle.KindOptimizerState: memory.CatOptimizerState,
}

// rankRoles turns a bundle rank's tensor inventories into roles: every
// tensor of every inventory names the allocation alive at its storage when
// the inventory was taken.
func rankRoles(r *bundle.Rank) []memory.Role {
	var out []memory.Role
	for i := range r.Inventories {
		inv := &r.Inventories[i]
		for _, t := range inv.Tensors {
			c, ok := roleCategory[t.Kind]
			if !ok || t.Ptr <= 0 {
				continue
			}
			out = append(out, memory.Role{Address: uint64(t.Ptr), TimeNS: inv.TimeUs * 1000, Category: c,
				Module: t.Module, Name: t.Name})
		}
	}
	return out
}
