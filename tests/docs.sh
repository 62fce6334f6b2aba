#!/bin/sh
# One story everywhere: the commands and options that `umpol help` and each
# command's --help list (made from one table, src/cli/commands.c) are the ones
# umpol(1) and README.md document, and the environment variables the runtime
# reads are the ones umpol(7) documents. Nothing is listed here by hand: new
# commands, options and variables are picked up from the sources.
. "${top_srcdir:-.}/tests/lib.sh"
man1="${top_builddir:-.}/man/umpol.1"
man7="${top_builddir:-.}/man/umpol.7"
readme="$top_srcdir/README.md"

# Sorted, unique words of stdin (one per line), for comparisons with comm.
words() { tr ' ' '\n' | sed '/^$/d' | sort -u; }

# same WHAT A B: files A and B hold the same words; names what differs.
same() {
    only_a=$(comm -23 "$2" "$3" | tr '\n' ' ')
    only_b=$(comm -13 "$2" "$3" | tr '\n' ' ')
    if [ -n "$only_a$only_b" ]; then
        fail "$1: only in the first: ${only_a:-none}; only in the second: ${only_b:-none}"
    else
        pass
    fi
}

# umpol(1), one line per option mention: COMMAND WHERE TOKEN, WHERE being
# "synopsis" (the SYNOPSIS line of COMMAND), "entry" (its line in COMMANDS) or
# "item" (the first line of an option's own paragraph under it); and one
# COMMAND WHERE - line per command seen in each place.
awk '
function norm(s) { gsub(/\\f[BIRP]/, "", s); gsub(/\\-/, "-", s); gsub(/"/, " ", s); return s }
function emit(where, s,   t) {
    s = " " norm(s)
    while (match(s, /[ \[(,]--?[A-Za-z][A-Za-z0-9-]*/)) {
        t = substr(s, RSTART + 1, RLENGTH - 1)
        print cmd, where, t
        s = substr(s, RSTART + RLENGTH)
    }
}
/^\.SH / { sec = $2; cmd = ""; depth = 0; tp = 0; next }
sec == "SYNOPSIS" && /^\.B umpol [a-z]/ { cmd = $3; print cmd, "synopsis", "-"; next }
sec == "SYNOPSIS" && /^\.br/ { cmd = ""; next }
sec == "SYNOPSIS" && cmd != "" { emit("synopsis", $0); next }
sec == "COMMANDS" && /^\.RS/ { depth++; next }
sec == "COMMANDS" && /^\.RE/ { depth--; next }
sec == "COMMANDS" && /^\.TP/ { tp = 1; next }
sec == "COMMANDS" && tp {
    tp = 0
    if (depth == 0) { split(norm($0), w, " "); cmd = w[2]; print cmd, "entry", "-"; emit("entry", $0) }
    else if (cmd != "") emit("item", $0)
}
' "$man1" >"$tmp/man1"

"$UMPOL_BIN" help >"$tmp/help" || fail "umpol help: exit status"
sed -n 's/^  umpol \([a-z]*\).*/\1/p' "$tmp/help" | words >"$tmp/commands"
[ -s "$tmp/commands" ] || fail "umpol help lists no command"
awk '$2 == "synopsis" && $3 == "-" { print $1 }' "$tmp/man1" | words >"$tmp/man_synopses"
same "commands in 'umpol help' and in the SYNOPSIS of umpol(1)" "$tmp/commands" "$tmp/man_synopses"
awk '$2 == "entry" && $3 == "-" { print $1 }' "$tmp/man1" | words >"$tmp/man_entries"
same "commands in 'umpol help' and in COMMANDS of umpol(1)" "$tmp/commands" "$tmp/man_entries"

# README.md's command table: one row per command, its synopsis exactly.
sed -n 's/^| `\(umpol [a-z][^`]*\)` |.*/\1/p' "$readme" | sed 's/…/.../g' >"$tmp/readme_rows"
cut -d' ' -f2 "$tmp/readme_rows" | words >"$tmp/readme_commands"
same "commands in 'umpol help' and in README.md's table" "$tmp/commands" "$tmp/readme_commands"

for cmd in $(cat "$tmp/commands"); do
    "$UMPOL_BIN" "$cmd" --help >"$tmp/cmd_help" || fail "$cmd --help: exit status"
    usage=$(sed -n '1s/^usage: //p' "$tmp/cmd_help")
    grep -qxF "  $usage" "$tmp/help" || fail "$cmd: 'umpol help' shows another synopsis than '$usage'"
    grep -qxF "$usage" "$tmp/readme_rows" || fail "$cmd: README.md's table lacks \`$usage\`"
    # Every option --help lists (but -h, --help), in both its forms.
    sed -n '/^options:/,/^$/p' "$tmp/cmd_help" | sed -n 's/^  \(-[^ ,]*\)\(, \(--[^ ]*\)\)\{0,1\}.*/\1 \3/p' |
        words | grep -vx -e -h -e --help >"$tmp/help_opts"
    # The forms its synopsis shows: the short one when there is one.
    printf '%s\n' "$usage" | grep -o '\[--\{0,1\}[A-Za-z][A-Za-z0-9-]*' | tr -d '[' | words >"$tmp/help_synopsis"
    awk -v c="$cmd" '$1 == c && $2 == "synopsis" && $3 != "-" { print $3 }' "$tmp/man1" | words >"$tmp/man_synopsis"
    same "$cmd: options in its usage and in the SYNOPSIS of umpol(1)" "$tmp/help_synopsis" "$tmp/man_synopsis"
    awk -v c="$cmd" '$1 == c && $2 == "item" { print $3 }' "$tmp/man1" | words >"$tmp/man_items"
    same "$cmd: options in --help and described in COMMANDS of umpol(1)" "$tmp/help_opts" "$tmp/man_items"
    awk -v c="$cmd" '$1 == c && $3 != "-" { print $3 }' "$tmp/man1" | words |
        grep -vx -e -h -e --help >"$tmp/man_all"
    comm -13 "$tmp/help_opts" "$tmp/man_all" >"$tmp/unknown"
    if [ -s "$tmp/unknown" ]; then
        fail "$cmd: umpol(1) names options --help lacks: $(tr '\n' ' ' <"$tmp/unknown")"
    else
        pass
    fi
done

# The environment: every variable the runtime reads (an all-capitals string
# literal in src/runtime or src/util, each one read through runtime_env) is
# in ENVIRONMENT of umpol(7), and every UMPOL_ variable there is read.
cat "$top_srcdir"/src/runtime/*.[ch] "$top_srcdir"/src/util/*.[ch] |
    grep -o '"[A-Z][A-Z0-9_]*"' | tr -d '"' | words >"$tmp/env_read"
[ -s "$tmp/env_read" ] || fail "found no environment variable in the runtime's sources"
sed -n '/^\.SH ENVIRONMENT/,/^\.SH /p' "$man7" | sed 's/\\-/-/g' |
    grep -o '[A-Z][A-Z0-9_]*[A-Z0-9]' | words >"$tmp/env_words"
comm -23 "$tmp/env_read" "$tmp/env_words" >"$tmp/undocumented"
if [ -s "$tmp/undocumented" ]; then
    fail "read by the runtime, missing from ENVIRONMENT in umpol(7): $(tr '\n' ' ' <"$tmp/undocumented")"
else
    pass
fi
grep -x 'UMPOL_[A-Z0-9_]*' "$tmp/env_words" >"$tmp/env_documented"
comm -23 "$tmp/env_documented" "$tmp/env_read" >"$tmp/unread"
if [ -s "$tmp/unread" ]; then
    fail "in ENVIRONMENT of umpol(7) but never read by the runtime: $(tr '\n' ' ' <"$tmp/unread")"
else
    pass
fi
# The CLI's own variables are in umpol(1).
cat "$top_srcdir"/src/cli/*.c | grep -o 'getenv("[A-Z][A-Z0-9_]*")' | sed 's/.*("\(.*\)")/\1/' |
    words >"$tmp/cli_env"
for var in $(cat "$tmp/cli_env"); do
    if sed 's/\\-/-/g' "$man1" | grep -qw "$var"; then pass; else fail "umpol(1) does not mention $var"; fi
done
finish
