// Package load turns inputs (files, folders, bundles, '-' for stdin) into
// models and their complete analysis results, together, so that a command
// renders the result once and a long-running server (ptscope serve) can keep
// both in memory and answer views from them. It reads every artifact kind
// ptscope knows: allocator snapshots and ptscope run bundles (snapshots.go,
// bundle.go) and Kineto traces (traces.go). It never prints and never
// changes process-wide settings (GC, huge pages); the CLI owns those.
package load
