#!/bin/sh
# Layers: the modules of a source directory (NAME.c and NAME.h make module
# NAME) must depend on each other without a circle, judged by which of the
# directory's own headers each file includes. Prints every circle found and
# fails if there is one.
#
#   tests/layers.sh [DIR...]     (default: src/lang)
#
# An include names a module of DIR when it is "NAME.h" (beside the file) or
# "D/NAME.h" where D is DIR's last component ("lang/ast.h" from src/lang).
. "${top_srcdir:-.}/tests/lib.sh"
[ $# -gt 0 ] || set -- src/lang

for dir in "$@"; do
    case $dir in /*) path=$dir ;; *) path=$top_srcdir/$dir ;; esac
    if [ ! -d "$path" ]; then
        fail "$dir: no such directory"
        continue
    fi
    last=$(basename "$path")
    for f in "$path"/*.c "$path"/*.h; do
        [ -f "$f" ] || continue
        from=$(basename "$f")
        from=${from%.*}
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r inc; do
                case $inc in
                */*) [ "${inc%/*}" = "$last" ] || continue ;;
                esac
                name=${inc##*/}
                [ -f "$path/$name" ] || continue
                to=${name%.h}
                [ "$to" = "$from" ] || echo "$from $to"
            done
    done | sort -u >"$tmp/edges"
    # Depth-first search; a grey module met again closes a circle.
    awk -v dir="$dir" '
        { succ[$1] = succ[$1] " " $2; node[$1] = 1; node[$2] = 1 }
        function visit(n, path,    parts, k, m, i) {
            state[n] = 1
            stack[++depth] = n
            split(succ[n], parts, " ")
            for (k in parts) {
                m = parts[k]
                if (state[m] == 1) {
                    line = ""
                    for (i = 1; i <= depth; i++)
                        if (started || stack[i] == m) { started = 1; line = line stack[i] " -> " }
                    started = 0
                    print dir ": circle: " line m
                    found = 1
                } else if (!state[m]) {
                    visit(m)
                }
            }
            depth--
            state[n] = 2
        }
        END {
            for (n in node) if (!state[n]) visit(n)
            exit found
        }' "$tmp/edges" >"$tmp/circles"
    if [ -s "$tmp/circles" ]; then
        cat "$tmp/circles" >&2
        fail "$dir: modules include each other in a circle"
    else
        pass
    fi
done
finish
