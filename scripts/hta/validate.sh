#!/bin/sh
# Runs HTA's analyses (analyses.py) and ptscope on each trace and compares
# them (compare.py); docs/validation.md ("HTA's analyses") has the results.
#
# Usage: scripts/hta/validate.sh HTA_SOURCE_DIR OUT_DIR PTSCOPE_BINARY TRACE[=SEQ_OP]...
#
# TRACE=SEQ_OP also compares the kernel sequences of the operators named
# SEQ_OP (HTA's operator_name). Needs Debian's python3-pandas,
# python3-numpy, python3-networkx, python3-plotly and python3-pydot
# (/usr/bin/python3). Prints one summary line per trace; OUT_DIR keeps
# each trace's HTA and ptscope JSON and the comparison.
set -u
hta=$1 out=$2 bin=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
status=0
for arg in "$@"; do
	trace=${arg%%=*}
	op=
	[ "$trace" != "$arg" ] && op=${arg#*=}
	name=$(basename "$trace" | sed 's/\.json\.gz$//; s/\.json$//; s/\.pt\.trace$//')
	set --
	[ -n "$op" ] && set -- --seq-op "$op"
	start=$(date +%s)
	HTA_DISABLE_NS_ROUNDING=1 /usr/bin/python3 "$here/analyses.py" "$hta" "$trace" "$@" >"$out/$name.hta.json" 2>"$out/$name.hta.log"
	hta_s=$(( $(date +%s) - start ))
	set --
	[ -n "$op" ] && set -- --kernel-sequences-op "$op"
	"$bin" trace --json "$@" "$trace" >"$out/$name.ptscope.json" 2>"$out/$name.ptscope.log"
	python3 "$here/compare.py" "$out/$name.hta.json" "$out/$name.ptscope.json" >"$out/$name.compare.txt"
	rc=$?
	[ $rc -ne 0 ] && status=1
	echo "$name: $(tail -1 "$out/$name.compare.txt") (HTA ${hta_s} s)"
done
exit $status
