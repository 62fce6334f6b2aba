#!/bin/sh
# layers.sh DIR: fail when the files of DIR include each other in a circle.
# A module is a .c and its .h of the same name; module A depends on module B
# when a.c or a.h includes b.h (by any path ending in /b.h or "b.h") and b.h
# is a file of DIR. The dependencies must form no cycle: prints the modules
# of a cycle and exits 1 when they do.
set -u
dir=${1:?usage: layers.sh DIR}
[ -d "$dir" ] || { echo "layers.sh: $dir is not a directory" >&2; exit 2; }
edges=$(mktemp) || exit 2
trap 'rm -f "$edges" "$edges.err"' EXIT
for f in "$dir"/*.c "$dir"/*.h; do
    [ -f "$f" ] || continue
    from=$(basename "$f"); from=${from%.*}
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(.*\)".*/\1/p' "$f" |
    while read -r inc; do
        to=$(basename "$inc")
        [ -f "$dir/$to" ] || continue
        to=${to%.h}
        [ "$to" = "$from" ] || echo "$from $to"
    done
done | sort -u >"$edges"
if ! tsort "$edges" >/dev/null 2>"$edges.err"; then
    echo "layers.sh: $dir: the includes form a cycle:" >&2
    sed -n 's/^tsort: //p' "$edges.err" | grep -v 'input contains a loop' >&2
    exit 1
fi
n=$(wc -l <"$edges")
echo "layers.sh: $dir: $n dependencies, no cycle"
