# fish completion for stagger(1), built at completion time from the option
# tables as the bash and zsh ones are (`stagger help --commands`, `stagger
# help --options CMD`): no option is listed here, so it cannot offer a flag
# the installed stagger lacks (tests/integration/test_completions.sh).
# Fields of a --options line: name, letter, arg, man page, default, values,
# help (its first line: the description fish shows beside the option).
# Installed by `cmake --install` as
# share/fish/vendor_completions.d/stagger.fish.

function __stagger_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l bin $tokens[1]
    if test (count $tokens) -eq 1
        $bin help --commands 2>/dev/null
        echo help
        return
    end
    set -l cmd $tokens[2]
    if test "$cmd" = help
        printf '%s\n' --exit-codes --commands --options ($bin help --commands 2>/dev/null)
        return
    end
    if test "$cmd" = batch; and test (count $tokens) -ge 3; and contains -- $tokens[3] report export
        set cmd "batch $tokens[3]"
    end
    set -l table ($bin help --options $cmd 2>/dev/null)
    or return
    # After an option that takes a value: its values when the table lists
    # them (--progress: auto bar lines none), files for a FILE or DIR, else
    # nothing.
    set -l prev $tokens[-1]
    for line in $table
        set -l f (string split \t -- $line)
        test "$f[3]" = -; and continue
        if test "$prev" = "--$f[1]"; or begin
                test "$f[2]" != -; and test "$prev" = "-$f[2]"
            end
            if test "$f[6]" != -
                string split ' ' -- $f[6]
            else if string match -q -r 'FILE|DIR' -- $f[3]
                __fish_complete_path $cur
            end
            return
        end
    end
    if string match -q -- '-*' $cur
        for line in $table
            set -l f (string split \t -- $line)
            set -l desc $f[7]
            test "$desc" = -; and set desc ''
            test "$f[5]" != -; and set desc "$desc (default $f[5])"
            test "$f[1]" != -; and printf '%s\t%s\n' "--$f[1]" "$desc"
            test "$f[2]" != -; and printf '%s\t%s\n' "-$f[2]" "$desc"
        end
        return
    end
    if test "$cmd" = batch; and test (count $tokens) -eq 2
        printf '%s\n' report export
    end
    __fish_complete_path $cur
end

complete -c stagger -f -a '(__stagger_complete)'
