#!/bin/sh
# src/runtime's files call downward only: no include cycle among them, and
# the data floor (pool, block_map, ranges, stats) includes nothing above it.
top=${top_srcdir:-.}
sh "$top/tests/layers.sh" "$top/src/runtime" || exit 1
for f in pool.c pool.h block_map.c block_map.h ranges.c ranges.h stats.h; do
    bad=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(.*\)".*/\1/p' "$top/src/runtime/$f" |
        grep -v -e '^runtime/pool\.h$' -e '^runtime/block_map\.h$' -e '^runtime/ranges\.h$' \
            -e '^runtime/stats\.h$')
    [ -z "$bad" ] || { echo "runtime_layers.sh: $f (data floor) includes $bad" >&2; exit 1; }
done
# The calls themselves, from the built objects (libtool's PIC objects).
objs=${top_builddir:-.}/src/runtime/.libs
if [ -d "$objs" ]; then
    sh "$top/tests/calls.sh" "$objs" || exit 1
fi
