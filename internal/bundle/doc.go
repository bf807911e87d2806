// Package bundle is the format of a `ptscope run` bundle: its layout, the
// manifest, the per-rank side files and the Go reader of all of them. The
// launcher (internal/capture) and its embedded Python companion write it;
// every reader (load, fleet, web, cli) reads it through this package only.
//
// Layout (user-facing details and every field: docs/bundle.md):
//
//	BUNDLE/                       YYYYMMDD_HHMMSS_<name>; an --out folder's "latest" points at one
//	  manifest.json               Manifest: written by the launcher at the start ("running") and
//	                              at the end (FinishManifest, WriteManifest)
//	  companion.log               problems the companion hit, if any (counted into Manifest.Warnings)
//	  rank<R>[_pid<P>]/           one per captured process (RankDirNumber)
//	    process.json              RankInfo, written by the companion at exit
//	    oom.json                  OOM, written by the companion at the first out-of-memory error
//	    snapshot_*.pickle         allocator snapshots (step<N>, window<K>, signal<K>_step<N>, oom, end)
//	    *.pt.trace.json.gz        profiler traces, named by step
//	    phases.jsonl              Phase lines
//	    live.jsonl                Sample lines
//	    tensors.jsonl             Inventory and Region lines (tensor roles by address)
//	    simulation.json           a simulated rank's facts (read by the launcher into Simulation)
//	  .ptscope/                   the launcher's and companion's markers (not part of the format)
//
// The companion writes the rank files as JSON with the field names of the
// types here (their json tags are the schema); a change to one side is a
// change to both, and to docs/bundle.md. Every side file is read as a
// regular file of bounded size (ReadSideFile, OpenSideFile and the Max*
// limits), never through a symlink or from a FIFO, since a bundle is also an
// input that may come from anywhere.
package bundle
