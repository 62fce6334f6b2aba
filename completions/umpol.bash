# bash completion for umpol(1): commands, options and policy files.
# The commands and options come from umpol's own help, so they never drift.
_umpol()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local umpol=${COMP_WORDS[0]} cmd="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} != -* ]]; then
            cmd=${COMP_WORDS[i]}
            break
        fi
    done
    COMPREPLY=()
    if [[ -z $cmd ]]; then
        local commands
        commands=$("$umpol" help 2>/dev/null | sed -n 's/^  umpol \([a-z]*\).*/\1/p')
        COMPREPLY=($(compgen -W "$commands --help --version -h -V" -- "$cur"))
        return
    fi
    # After run's (or suggest's) "--", complete the job's command line.
    if [[ $cmd == run || $cmd == suggest ]]; then
        for ((i = i + 1; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then
                if declare -F _command_offset >/dev/null; then
                    _command_offset $((i + 1))
                else
                    COMPREPLY=($(compgen -c -- "$cur"))
                fi
                return
            fi
        done
    fi
    case $prev in
    -p | --policy)
        COMPREPLY=($(compgen -f -X '!*.umpol' -- "$cur") $(compgen -d -S / -- "$cur"))
        compopt -o nospace 2>/dev/null
        return
        ;;
    -r | --report | --trace | -o | --output)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    -g | --goal)
        COMPREPLY=($(compgen -W "speed memory" -- "$cur"))
        return
        ;;
    esac
    if [[ $cur == -* ]]; then
        local options
        options=$("$umpol" "$cmd" --help 2>/dev/null |
            sed -n '/^options:/,/^$/{s/^  \(-[^ ,]*\)\(, \(--[^ ]*\)\)\{0,1\}.*/\1 \3/p}')
        COMPREPLY=($(compgen -W "$options" -- "$cur"))
        return
    fi
    case $cmd in
    check | explain)
        COMPREPLY=($(compgen -f -X '!*.umpol' -- "$cur") $(compgen -d -S / -- "$cur"))
        compopt -o nospace 2>/dev/null
        ;;
    report | suggest)
        COMPREPLY=($(compgen -f -X '!*.json' -- "$cur") $(compgen -d -S / -- "$cur"))
        compopt -o nospace 2>/dev/null
        ;;
    help)
        COMPREPLY=($(compgen -W "$("$umpol" help 2>/dev/null | sed -n 's/^  umpol \([a-z]*\).*/\1/p')" -- "$cur"))
        ;;
    esac
}
complete -F _umpol umpol
