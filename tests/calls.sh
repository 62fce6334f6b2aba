#!/bin/sh
# calls.sh OBJDIR: fail when the object files of OBJDIR call each other in a
# circle. Module A calls module B when A's object uses a function B's object
# defines (nm); the calls must form no cycle. Objects are named after their
# source (libtool's "lib_la-" prefix is dropped). Prints a cycle's modules.
set -u
dir=${1:?usage: calls.sh OBJDIR}
objs=$(ls "$dir"/*.o 2>/dev/null)
[ -n "$objs" ] || { echo "calls.sh: no object files in $dir" >&2; exit 77; }
work=$(mktemp -d) || exit 2
trap 'rm -rf "$work"' EXIT
for o in $objs; do
    m=$(basename "$o" .o); m=${m##*-}
    nm -g --defined-only "$o" | awk -v m="$m" '$2 ~ /^[TDBR]$/ {print $3, m}' >>"$work/defs"
    nm -u "$o" | awk -v m="$m" '{print $2, m}' >>"$work/uses"
done
sort -u "$work/defs" -o "$work/defs"
sort -u "$work/uses" -o "$work/uses"
# symbol definer user -> "user definer", self-calls left out
join "$work/defs" "$work/uses" | awk '$2 != $3 {print $3, $2}' | sort -u >"$work/edges"
if ! tsort "$work/edges" >/dev/null 2>"$work/err"; then
    echo "calls.sh: $dir: the calls form a cycle:" >&2
    sed -n 's/^tsort: //p' "$work/err" | grep -v 'input contains a loop' >&2
    exit 1
fi
echo "calls.sh: $dir: $(wc -l <"$work/edges") module calls, no cycle"
