#!/bin/sh
# demo.sh - the story the README's first command tells: a 4-rank job with a
# planted bug, run the way a user debugs one (DIST_DEBUG=DETAIL under
# distrun), then the post-mortem of the trace it leaves.
#
#     examples/demo.sh            (after the build; trace.db lands in .)
#
# The job is example_bugs --bug shape: every rank all_reduces float32[1024]
# for three steps, then rank 3 passes float32[2048]. The checking layer
# stops the fourth all_reduce on every rank before it runs, distrun prints
# the report last and exits 10 (desync), and trace.db holds every rank's
# operations. This script exits 0 when that story happened as intended (the
# bug found, the trace readable) and 1 otherwise; distrun's 10 is the
# expected outcome, not a failure of the demo.
#
# DIST_DEMO_BIN overrides the directory of the built programs (build/bin).
set -u

src=$(cd "$(dirname "$0")/.." && pwd)
bin=${DIST_DEMO_BIN:-$src/build/bin}
for p in distrun example_bugs distview; do
  if [ ! -x "$bin/$p" ]; then
    echo "demo: $bin/$p is missing: build first (cmake -S . -B build && cmake --build build -j2)" >&2
    exit 1
  fi
done

step() { printf '\n==== %s\n\n' "$*"; }

rm -f trace.db
step "1. A 4-rank job with a planted bug: rank 3 all_reduces float32[2048], the others float32[1024]"
echo "\$ DIST_DEBUG=DETAIL distrun -n 4 example_bugs --bug shape"
DIST_DEBUG=DETAIL "$bin/distrun" -n 4 "$bin/example_bugs" --bug shape 2>&1
rc=$?
if [ "$rc" -ne 10 ]; then
  echo "demo: distrun exited $rc; the planted desync should make it exit 10" >&2
  exit 1
fi
if [ ! -s trace.db ]; then
  echo "demo: distrun left no trace.db in $(pwd)" >&2
  exit 1
fi

step "2. distrun exited 10 (desync), printed the report last and left trace.db"
echo "\$ distview summary trace.db"
"$bin/distview" summary trace.db || exit 1
echo
echo "\$ distview diagnose trace.db"
"$bin/distview" diagnose trace.db
drc=$?
if [ "$drc" -ne 10 ]; then
  echo "demo: distview diagnose exited $drc; it should find the desync (10)" >&2
  exit 1
fi

step "3. The post-mortem, in the terminal"
cat <<EOF
Open it with:

    $bin/distview trace.db

Look first at the header: the verdict (DESYNC, exit 10) and the report,
which names rank 3, the field that differs (its count: float32[2048]
against float32[1024]) and the line (bugs.c, in bug_shape). Below it, the
progress matrix shows each rank's operations; the '!' cells are the
all_reduce that was refused. Move onto one with the arrow keys and press
Enter for the detail pane: the four ranks' fingerprints side by side, the
difference marked. '?' lists the keys, q quits.

The same file answers plain SQL:

    sqlite3 trace.db 'SELECT rank, seq, op, shape, state FROM operations ORDER BY seq, rank'
EOF
exit 0
