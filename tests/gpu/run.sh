#!/usr/bin/env bash
# tests/gpu/run.sh - the device check of libdist's CUDA support (issue 27),
# for a machine with one NVIDIA GPU (H100/H200), CUDA 13, no package
# registry. From the repository root:
#     bash tests/gpu/run.sh            # uses build/gpu/gpu_check, else builds it
# It finds libcudart.so.13 and libnccl.so.2 (the CUDA toolkit's, else a
# Python environment's nvidia/*/lib, as PyTorch ships them), runs gpu_check
# (tests/gpu/gpu_check.c: every collective on a one-rank NCCL group, the
# cpu:cpu,cuda:nccl map, stream ordering, a non-blocking wait, a stuck
# kernel named by the monitor, GPU times), then checks the tracer's rank file
# for GPU rows. One "PASS <case>" / "FAIL <case>: why" line per case; exit 0
# when all pass, 1 when one fails, 2 on a usage error, 0 with "SKIP: why"
# when no GPU is visible. About a minute with a prebuilt binary; a build
# adds a few minutes (cmake, gcc, nvcc).
set -u

usage() {
  cat <<'USAGE'
usage: tests/gpu/run.sh [--build-dir DIR] [--rebuild] [--help]
  Runs libdist's device check on the first visible NVIDIA GPU.
  --build-dir DIR  where gpu_check is (DIR/gpu, the bundle with its
                   libraries, else DIR/bin), or is built (default: build;
                   into DIR-gpu when DIR has a gpu_check that does not load)
  --rebuild        build gpu_check even when DIR has one
  Prints PASS/FAIL per case and a summary; exit 0 all passed (or SKIP: no
  GPU visible), 1 a case failed, 2 usage error. Needs: an NVIDIA driver and
  GPU; libcudart.so.13 and libnccl.so.2 (/usr/local/cuda or a Python
  environment's nvidia/*/lib); to build: cmake, gcc, nvcc, SQLite and
  elfutils (libdw) headers. No network, no gdb. Takes about 1 minute.
USAGE
}

build_dir=build
rebuild=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --build-dir) [ $# -ge 2 ] || { echo "run.sh: --build-dir needs a directory" >&2; usage >&2; exit 2; }
                 build_dir=$2; shift ;;
    --rebuild) rebuild=1 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

cd "$(dirname "$0")/../.." || exit 2
root=$(pwd)
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac

# --- is there a GPU? ---------------------------------------------------------
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ] &&
   { [ -z "$CUDA_VISIBLE_DEVICES" ] || [ "$CUDA_VISIBLE_DEVICES" = "-1" ]; }; then
  echo "SKIP: no GPU visible (CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' hides every device)"
  exit 0
fi
if [ ! -e /dev/nvidiactl ] && ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "SKIP: no GPU visible (no /dev/nvidiactl and no nvidia-smi: no NVIDIA driver here)"
  exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$gpus" -eq 0 ]; then
    echo "SKIP: no GPU visible (nvidia-smi lists none)"
    exit 0
  fi
  nvidia-smi -L | head -1
fi

# --- the CUDA runtime and NCCL ------------------------------------------------
# The toolkit's first, then every Python environment's nvidia/*/lib (PyTorch
# ships NCCL as nvidia-nccl-cu13, the runtime as nvidia-cuda-runtime).
find_lib() { # name -> a directory holding it, or nothing
  local name=$1 d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$name" ] && { echo "$d"; return; }
  done
  local py site
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    for site in $("$py" -c 'import site,sys
p=site.getsitepackages() if hasattr(site,"getsitepackages") else []
p.append(site.getusersitepackages()); print("\n".join(p))' 2>/dev/null); do
      for d in "$site"/nvidia/*/lib; do
        [ -e "$d/$name" ] && { echo "$d"; return; }
      done
    done
  done
}
libpath=""
for lib in libcudart.so.13 libnccl.so.2; do
  d=$(find_lib "$lib")
  if [ -z "$d" ]; then
    echo "FAIL libraries: $lib not found (looked in /usr/local/cuda and python nvidia/*/lib)"
    exit 1
  fi
  echo "using $d/$lib"
  libpath="$libpath:$d"
done
export LD_LIBRARY_PATH="${libpath#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- the binary ---------------------------------------------------------------
# DIR/gpu holds gpu_check with its libraries (carry just that); DIR/bin and
# DIR/lib are the build tree's.
bin="$build_dir/gpu/gpu_check"
[ -x "$bin" ] || bin="$build_dir/bin/gpu_check"
export LD_LIBRARY_PATH="$build_dir/gpu:$build_dir/lib:$LD_LIBRARY_PATH"
runs() { [ -x "$1" ] && ! ldd "$1" 2>/dev/null | grep -q 'not found'; }
if [ $rebuild = 1 ] || ! runs "$bin"; then
  [ -x "$bin" ] && { echo "note: $bin does not load here:"; ldd "$bin" | grep 'not found'; }
  out="$build_dir"
  [ -x "$bin" ] && out="$build_dir-gpu"
  echo "building gpu_check in $out"
  if ! cmake -S . -B "$out" -DDIST_BUILD_TESTS=OFF -DDIST_BUILD_VIEWER=OFF \
         -DDIST_WITH_MPI=OFF >"$out.log" 2>&1 ||
     ! cmake --build "$out" --target gpu_check -j"$(nproc)" >>"$out.log" 2>&1; then
    echo "FAIL build: see $out.log"; tail -20 "$out.log"; exit 1
  fi
  bin="$out/bin/gpu_check"
  export LD_LIBRARY_PATH="$out/lib:$LD_LIBRARY_PATH"
fi

# --- run ----------------------------------------------------------------------
trace=$(mktemp -d /tmp/dist-gpu-check-XXXXXX)
export DIST_TRACE="$trace" DIST_JOB_ID=gpucheck
log="$trace/gpu_check.out"
start=$(date +%s)
timeout -k 10 270 "$bin" >"$log" 2>"$trace/gpu_check.err"
rc=$?
grep -E '^(PASS|FAIL|SKIP)' "$log"
if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then
  echo "FAIL gpu_check: exit status $rc$([ $rc -eq 124 ] && echo ' (timed out after 270 s)')"
  tail -30 "$trace/gpu_check.err"
  exit 1
fi
grep -q '^SKIP' "$log" && exit 0
[ $rc -ne 0 ] && { echo "--- stderr (last 40 lines):"; tail -40 "$trace/gpu_check.err"; }

# --- the tracer's GPU rows ---------------------------------------------------
db=$(sed -n 's/^TRACE //p' "$log")
trace_rc=0
if [ -z "$db" ]; then
  echo "FAIL trace_db: gpu_check recorded no trace (DIST_TRACE=$trace)"; trace_rc=1
elif command -v python3 >/dev/null 2>&1; then
  python3 - "$db" <<'PY' || trace_rc=1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT seq, t_ns, message FROM events WHERE kind = 'gpu'").fetchall()
ops = dict(db.execute("SELECT seq, t_enqueued_ns FROM operations").fetchall())
bad = [r for r in rows if not r[2].startswith("gpu_ns=") or int(r[2][7:]) <= 0
       or r[0] not in ops or r[1] < ops[r[0]]]
if len(rows) < 10 or bad:
    print("FAIL trace_db: %d gpu rows, %d bad (start before enqueue or no duration): %s"
          % (len(rows), len(bad), bad[:3]))
    sys.exit(1)
print("PASS trace_db: %d gpu rows, each after its operation's enqueue" % len(rows))
PY
else
  echo "SKIP trace_db: no python3 to read $db"
fi
echo "took $(( $(date +%s) - start )) s; output in $trace"
if [ $rc -ne 0 ] || [ $trace_rc -ne 0 ]; then echo "FAIL"; exit 1; fi
echo "PASS"
exit 0
