# bash completion for stagger(1). Nothing here lists an option: the
# commands come from `stagger help --commands` and each command's options
# from `stagger help --options CMD`, generated from the same table as the
# parser, --help and the man page check, so a completion cannot offer a
# flag the installed stagger lacks (tests/integration/test_completions.sh);
# the values an option takes come from the same table (its VALUES field).
# Installed by `cmake --install` as share/bash-completion/completions/stagger.

_stagger() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local bin=${COMP_WORDS[0]} cmd table name letter arg ref def values help
    COMPREPLY=()
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$("$bin" help --commands 2>/dev/null) help --help --version" -- "$cur"))
        return 0
    fi
    cmd=${COMP_WORDS[1]}
    if [ "$cmd" = help ]; then
        COMPREPLY=($(compgen -W "--exit-codes --commands --options $("$bin" help --commands 2>/dev/null)" -- "$cur"))
        return 0
    fi
    if [ "$cmd" = batch ] && [ "$COMP_CWORD" -ge 3 ]; then
        case ${COMP_WORDS[2]} in report | export) cmd="batch ${COMP_WORDS[2]}" ;; esac
    fi
    table=$("$bin" help --options "$cmd" 2>/dev/null) || return 0
    # After an option that takes a value: its values when the table lists
    # them (--progress: auto bar lines none), files for a FILE or DIR, else
    # nothing.
    while IFS=$'\t' read -r name letter arg ref def values help; do
        [ "$arg" = - ] && continue
        if [ "$prev" = "--$name" ] || { [ "$letter" != - ] && [ "$prev" = "-$letter" ]; }; then
            if [ -n "$values" ] && [ "$values" != - ]; then
                COMPREPLY=($(compgen -W "$values" -- "$cur"))
            else
                case $arg in
                *FILE* | *DIR*) COMPREPLY=($(compgen -f -- "$cur")) ;;
                esac
            fi
            return 0
        fi
    done <<<"$table"
    case $cur in
    -*)
        COMPREPLY=($(compgen -W "$(printf '%s\n' "$table" |
            awk -F '\t' '$1 != "-" { print "--" $1 } $2 != "-" { print "-" $2 }')" -- "$cur"))
        ;;
    *)
        if [ "$cmd" = batch ] && [ "$COMP_CWORD" -eq 2 ]; then
            COMPREPLY=($(compgen -W "report export" -- "$cur"))
        fi
        COMPREPLY+=($(compgen -f -- "$cur"))
        ;;
    esac
    return 0
}
complete -F _stagger stagger
