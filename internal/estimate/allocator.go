package estimate

func round512(n int64) int64 { return (n + 511) / 512 * 512 }

// blockBytes is the block the CUDA caching allocator hands out for a request of n bytes, as
// torch.cuda.memory_allocated counts it: n rounded up to 512 B; a request over 10 MiB gets a
// segment rounded up to 2 MiB, and the allocator does not split off a remainder of 1 MiB or
// less (kSmallSize), so such a request occupies the whole rounded block.
func blockBytes(n int64) int64 {
	n = round512(n)
	if n > 10<<20 {
		if r := roundUp(n, 2<<20); r-n <= 1<<20 {
			return r
		}
	}
	return n
}

// tensorBytes sums the allocator blocks of a tensor list, each tensor's elements split over shard.
func tensorBytes(ts []tensor, times int, elem int64, shard int64) int64 {
	var n int64
	for _, t := range ts {
		n += blockBytes(ceilDiv(t.numel, t.shardOver(shard)) * elem)
	}
	return n * int64(times)
}

// rawBytes is tensorBytes without any allocator rounding.
func rawBytes(ts []tensor, times int, elem int64, shard int64) int64 {
	var n int64
	for _, t := range ts {
		n += ceilDiv(t.numel, t.shardOver(shard)) * elem
	}
	return n * int64(times)
}

func ceilDiv(a, b int64) int64 {
	if b <= 1 {
		return a
	}
	return (a + b - 1) / b
}

// segmentOverhead models the caching allocator's segments for the persistent tensors: sizes over
// 10 MiB are rounded up to 2 MiB, 1-10 MiB ones share 20 MiB segments, small ones 2 MiB segments.
func segmentOverhead(layerTs, otherTs []tensor, L int, sh shape, s Setup, shardP, shardG, shardO int64, master, opt bool) int64 {
	type kind struct {
		elem, shard int64
		n           int
	}
	kinds := []kind{{sh.pb, shardP, 1}}
	if !s.ForwardOnly {
		kinds = append(kinds, kind{sh.gb, shardG, 1})
		if master {
			kinds = append(kinds, kind{4, shardO, 1})
		}
		if opt {
			kinds = append(kinds, kind{sh.stateBytes, shardO, 2})
		}
	}
	var over, mid, small int64
	for _, k := range kinds {
		each := func(ts []tensor, times int64) {
			for _, t := range ts {
				b := round512(ceilDiv(t.numel, t.shardOver(k.shard)) * k.elem)
				switch {
				case b > 10<<20:
					over += (roundUp(b, 2<<20) - blockBytes(b)) * times * int64(k.n)
				case b > 1<<20:
					mid += b * times * int64(k.n)
				default:
					small += b * times * int64(k.n)
				}
			}
		}
		each(layerTs, int64(L))
		each(otherTs, 1)
	}
	return over + (roundUp(mid, 20<<20) - mid) + (roundUp(small, 2<<20) - small)
}

// shardOver is how many ranks share a tensor that ZeRO/FSDP shards over a group of n: expert
// tensors are sharded over the expert-data-parallel group, n/ep (Megatron, DeepSpeed-MoE).
func (t tensor) shardOver(n int64) int64 {
	if t.expert && t.ep > 1 {
		return max(1, n/t.ep)
	}
	return n
}
