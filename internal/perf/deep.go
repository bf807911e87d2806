package perf

import "math"

// deepPart is what one window adds to the deeper analyses: HTA's critical
// path, kernel sequences, launch statistics, queue lengths, copy
// bandwidth, GPU annotations and per-stream idle intervals, and the
// plugin's module view, communication operators and memory by operator
// (docs/trace.md, "Deeper analyses"). The streams' queues and idle
// intervals and the copy bandwidth are time series of the whole trace: a
// trace analysed in windows leaves them out (Rank.Skipped).
type deepPart struct {
	crit     []StepCriticalPath // without their paths
	longest  StepCriticalPath   // the step with the longest path, with it
	critSync bool
	seqs     map[string]*KernelSequence
	anno     gpuAnnoPart
	mods     map[string]*Module
	comm     []commOpCall
	mem      map[memOpKey]*MemoryOp
	memCalls map[string]int
	launch   launchPart
	whole    bool // the window is the whole trace
	streams  []StreamStats
	bw       []CopyBandwidth
}

// deepAnalyses computes a window's part.
func deepAnalyses(g *graph, w *window, opt Options) deepPart {
	p := deepPart{whole: g.own == nil}
	prep := newCPPrep(g)
	crit := async(func() []StepCriticalPath {
		out := make([]StepCriticalPath, len(w.steps))
		parallel(len(w.steps), func(k int) { out[k] = prep.step(w.steps[k]) })
		return out
	})
	p.critSync = prep.hasSync
	mt := buildModuleTree(g)
	starts := make([]int64, 0, len(w.steps)+1)
	for _, st := range w.steps {
		starts = append(starts, st.hostS)
	}
	if w.hostTo != math.MaxInt64 {
		starts = append(starts, w.hostTo)
	}
	p.seqs = kernelSequences(g, mt, opt.SequenceOp, starts)
	p.mods = moduleRows(g, mt)
	p.anno = gpuAnnotations(g)
	p.comm = commOps(g)
	p.mem = memoryOps(g)
	p.memCalls = memoryOpCalls(g)
	p.launch = launchStatsOf(g, w.steps, &prep.names) // filled by newCPPrep
	if p.whole {
		p.streams = streamStats(prep)
		p.bw = copyBandwidth(g)
	}
	p.crit = crit()
	for k := range p.crit {
		p.keepLongest(p.crit[k])
		p.crit[k].Path = nil
	}
	return p
}

// add merges the next window's part.
func (d *deepPart) add(p *deepPart) {
	if d.seqs == nil {
		*d = deepPart{seqs: map[string]*KernelSequence{}, anno: newGPUAnnoPart(), mods: map[string]*Module{},
			mem: map[memOpKey]*MemoryOp{}, memCalls: map[string]int{}, whole: true}
	}
	d.crit = append(d.crit, p.crit...)
	if p.longest.Step != "" {
		d.keepLongest(p.longest)
	}
	d.critSync = d.critSync || p.critSync
	addSequences(d.seqs, p.seqs)
	d.anno.add(p.anno)
	addModuleRows(d.mods, p.mods)
	d.comm = append(d.comm, p.comm...)
	addMemoryOps(d.mem, p.mem)
	for n, c := range p.memCalls {
		d.memCalls[n] += c
	}
	d.launch.add(p.launch)
	d.whole = d.whole && p.whole
	d.streams, d.bw = p.streams, p.bw
}

// keepLongest keeps s's path if it is the longest yet (the first of equal
// ones).
func (d *deepPart) keepLongest(s StepCriticalPath) {
	if d.longest.Step == "" || s.LengthNS > d.longest.LengthNS {
		d.longest = s
		d.longest.Items = nil
	}
}

// finish writes the deeper analyses into r.
func (d *deepPart) finish(r *Rank) {
	if d.seqs == nil {
		d.add(&deepPart{})
	}
	r.CriticalPath = finishCriticalPath(d.crit, d.longest, d.critSync, !d.whole)
	r.KernelSequences = finishSequences(d.seqs)
	r.GPUAnnotations = d.anno.rows()
	r.Modules = finishModules(d.mods)
	r.commCalls = d.comm
	r.CommOps = commOpRows(d.comm)
	r.MemoryOps = finishMemoryOps(d.mem, d.memCalls)
	d.launch.finish(&r.Launch)
	r.Streams, r.CopyBandwidth = d.streams, d.bw
	if !d.whole {
		r.Streams, r.CopyBandwidth = nil, nil
		r.Skipped = []string{"streams: queue lengths and idle intervals are series over the whole trace",
			"copy_bandwidth: a series over the whole trace"}
	}
	if r.Streams == nil {
		r.Streams = []StreamStats{}
	}
	if r.CopyBandwidth == nil {
		r.CopyBandwidth = []CopyBandwidth{}
	}
}
