#!/bin/sh
# check_layers.sh - core's levels and the arrows between them (ARCHITECTURE.md).
#
# Usage: tools/check_layers.sh [BUILD_DIR]     (default: build)
#
# Reads two kinds of arrow between the files of core/src:
#   includes  #include "x.h" of every .c and .h, resolved as the compiler
#             does (the file's own folder first, then core/src);
#   symbols   what each object of dist_core uses (nm: U) and which object
#             defines it (nm: T, D, B, R, ...), from BUILD_DIR's objects.
# Each file belongs to the level of its folder (table below). An arrow may
# point only to a lower level; an arrow to the same level or a higher one in
# another folder (a sibling backend, say) fails the check. Inside one folder
# every arrow is allowed; the circles there are listed so they stay seen.
# It also fails when a part above core (wrapper_pg, tracer, monitor,
# viewer, bench, libdist) includes a header of core/src or puts core/src on
# its include path: they use core/include/dist/ (public, seams, internal/).
#
# Needs only sh, awk, find, sed and nm (binutils). Exit 0: clean; 1: an
# arrow points the wrong way (each printed with the file and the include or
# symbol); 2: usage (no objects found: build first).
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}

# The levels, bottom first. Same rank: siblings that never reach each other.
levels='
base 0
net 1
reduce 1
store 2
job 3
pg 4
backends/cpu 5
backends/mpi 5
backends/nccl 5
backends 6
api 7
'

objdir="$build/core/CMakeFiles/dist_core.dir/src"
if [ ! -d "$objdir" ]; then
  echo "check_layers: no objects under $objdir (build first, or name the build folder)" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT INT TERM

# --- include arrows: "from to include" -------------------------------------
find core/src -name '*.[ch]' | sed 's|^core/src/||' | sort > "$tmp/files"
while read -r f; do
  d=$(dirname "$f")
  sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "core/src/$f" |
  while read -r inc; do
    if [ -f "core/src/$d/$inc" ]; then
      to="$d/$inc"
    elif [ -f "core/src/$inc" ]; then
      to=$inc
    else
      continue
    fi
    echo "$f $to include:$inc"
  done
done < "$tmp/files" > "$tmp/inc_edges"

# --- symbol arrows: "from to symbol" ----------------------------------------
: > "$tmp/nm"
nobj=0
for f in $(grep '\.c$' "$tmp/files"); do
  o="$objdir/$f.o"
  [ -f "$o" ] || continue # a backend this build has not (mpi, nccl)
  nobj=$((nobj + 1))
  nm -P "$o" | awk -v f="$f" '{ print f, $1, $2 }' >> "$tmp/nm"
done
if [ "$nobj" = 0 ]; then
  echo "check_layers: no object of core/src under $objdir (build first)" >&2
  exit 2
fi
awk '
  $3 == "U" { use[NR] = $1 " " $2; next }
  $3 ~ /^[TDBRVWGSCi]$/ { def[$2] = $1 }
  END { for (i in use) { split(use[i], u, " "); if (u[2] in def && def[u[2]] != u[1])
          print u[1], def[u[2]], "symbol:" u[2] } }
' "$tmp/nm" | sort > "$tmp/sym_edges"

# --- levels and verdict ------------------------------------------------------
cat "$tmp/inc_edges" "$tmp/sym_edges" | awk -v levels="$levels" -v nobj="$nobj" '
  function folder(p,   d) { d = p; if (sub(/\/[^\/]*$/, "", d) == 0) d = "."; return d }
  BEGIN {
    n = split(levels, l, "\n")
    for (i = 1; i <= n; i++) if (split(l[i], w, " ") == 2) { rank[w[1]] = w[2]; order[++nl] = w[1] }
  }
  FNR == NR { files[$1] = folder($1); next }
  {
    from = $1; to = $2; what = $3
    ff = folder(from); ft = folder(to)
    if (!(ff in rank)) { unknown[ff] = 1; next }
    if (!(ft in rank)) { unknown[ft] = 1; next }
    if (ff == ft) {
      if (from ~ /\.c$/ && to ~ /\.c$/ && what ~ /^symbol:/) { fe[from, to] = 1; fnodes[ff] = fnodes[ff] " " from }
      next
    }
    kind = what ~ /^include:/ ? "inc" : "sym"
    arrow[ff " -> " ft, kind]++
    arrows[ff " -> " ft] = 1
    if (rank[ft] >= rank[ff]) {
      bad++
      printf "UPWARD %s -> %s: core/src/%s -> core/src/%s (%s)\n", ff, ft, from, to, what
    }
  }
  END {
    print "levels (bottom first), from " nobj " objects and every core/src file:"
    for (i = 1; i <= nl; i++) {
      lv = order[i]; s = ""; k = 0
      for (f in files) if (files[f] == lv) { names[++k] = substr(f, length(lv) + 2); nf[lv]++ }
      for (x = 2; x <= k; x++) for (j = x; j > 1 && names[j - 1] > names[j]; j--) {
        y = names[j]; names[j] = names[j - 1]; names[j - 1] = y }
      for (x = 1; x <= k; x++) s = s " " names[x]
      printf "  %d %-14s %2d files:%s\n", rank[lv], lv, nf[lv], s
    }
    print "arrows between levels (includes, symbols):"
    for (i = 1; i <= nl; i++) for (j = 1; j <= nl; j++) {
      a = order[i] " -> " order[j]
      if (a in arrows) {
        ok = rank[order[j]] < rank[order[i]] ? "down" : "WRONG WAY"
        printf "  %-30s %3d %4d  %s\n", a, arrow[a, "inc"], arrow[a, "sym"], ok
      }
    }
    for (f in files) if (!(files[f] in rank)) unknown[files[f]] = 1
    for (u in unknown) { printf "UNKNOWN folder core/src/%s: add it to the table of levels\n", u; bad++ }
    # Circles inside a level: files that reach each other through calls.
    print "circles inside a level (files that call each other, directly or not):"
    nc = 0
    for (lv in fnodes) {
      m = split(fnodes[lv], ns, " "); k = 0
      delete seen; delete node
      for (i = 1; i <= m; i++) if (!(ns[i] in seen)) { seen[ns[i]] = 1; node[++k] = ns[i] }
      for (i = 1; i <= k; i++) for (j = 1; j <= k; j++) r[i, j] = (node[i], node[j]) in fe
      for (x = 1; x <= k; x++) for (i = 1; i <= k; i++) if (r[i, x]) for (j = 1; j <= k; j++) if (r[x, j]) r[i, j] = 1
      delete done
      for (i = 1; i <= k; i++) {
        if (i in done || !r[i, i]) continue
        s = ""
        for (j = 1; j <= k; j++) if (r[i, j] && r[j, i]) { done[j] = 1; s = s " " substr(node[j], length(lv) + 2) }
        printf "  %s:%s\n", lv, s; nc++
      }
      for (i = 1; i <= k; i++) for (j = 1; j <= k; j++) delete r[i, j]
    }
    if (nc == 0) print "  none"
    exit bad ? 1 : 0
  }
' "$tmp/files" - > "$tmp/report" || status=$?
cat "$tmp/report"
status=${status:-0}

# --- parts above core --------------------------------------------------------
find core/src -name '*.h' -exec basename {} \; | sort -u > "$tmp/core_headers"
above=0
for part in wrapper_pg tracer monitor viewer bench libdist; do
  [ -d "$part" ] || continue
  # An include path into core/src (comments aside) lets any header in.
  bad=$(grep -n 'core/src' "$part/CMakeLists.txt" 2>/dev/null | grep -v '^[0-9]*:[[:space:]]*#' || :)
  if [ -n "$bad" ]; then
    echo "$bad" | sed "s|^|ABOVE $part/CMakeLists.txt:|; s|\$|  (core/src on an include path)|"
    above=$((above + 1))
  fi
  for f in $(find "$part" -name '*.[ch]'); do
    d=$(dirname "$f")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
      [ -f "$d/$inc" ] && continue
      # The part's own headers live in its src/ or include/ folder.
      [ -f "$part/src/$inc" ] || [ -f "$part/include/$inc" ] && continue
      if [ -f "core/src/$inc" ] || grep -qx "$(basename "$inc")" "$tmp/core_headers"; then
        echo "ABOVE $f includes \"$inc\", a header of core/src"
        above=$((above + 1))
      fi
    done
  done
done
echo "parts above core including core/src: $above"
[ "$above" = 0 ] || status=1
if [ "$status" = 0 ]; then echo "check_layers: ok"; else echo "check_layers: FAILED"; fi
exit "$status"
