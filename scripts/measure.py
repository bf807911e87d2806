"""Runs a command and prints its wall time and the peak RSS of the process
tree it started: python3 scripts/measure.py LABEL CMD ARGS... (stdlib only)."""
import resource, subprocess, sys, time

label, cmd = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
p = subprocess.run(cmd, stdout=subprocess.DEVNULL)
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
print(f"{label}\t{dt:.3f}\t{rss/1024:.1f}\t{p.returncode}", flush=True)
sys.exit(p.returncode)
