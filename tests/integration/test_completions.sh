# The bash, zsh and fish completions (completions/) against the option tables:
# for every command, completing "--" offers exactly the long options of
# `stagger help --options CMD` (and "-" adds the short ones); after an
# option whose value is a FILE, files are offered; the first word offers
# the commands. The files are installed by `cmake --install` where
# bash-completion, zsh and fish look. zsh and fish themselves are checked
# when installed.
. "$(dirname "$0")/lib.sh"
S=$STAGGER
T=$(mktemp -d /tmp/stg_compl.XXXXXX)
trap 'in_script && rm -rf "$T"' EXIT
BASH_COMPL=$STG_SOURCE_DIR/completions/stagger.bash
ZSH_COMPL=$STG_SOURCE_DIR/completions/_stagger
FISH_COMPL=$STG_SOURCE_DIR/completions/stagger.fish

# complete WORD...: what the bash completion offers for the last word.
complete_words() {
  bash -c '
    . "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    _stagger
    printf "%s\n" "${COMPREPLY[@]}"' _ "$BASH_COMPL" "$@" | sort -u
}

"$S" help --commands > "$T/cmds"
check "help --commands lists fetch" grep -qx fetch "$T/cmds"
complete_words "$S" "" > "$T/first"
check "the first word offers every command" sh -c "! sort '$T/cmds' | comm -23 - '$T/first' | grep -q ."

for cmd in $(cat "$T/cmds") "batch report" "batch export"; do
  "$S" help --options "$cmd" > "$T/table"
  awk -F '\t' '$1 != "-" { print "--" $1 }' "$T/table" | sort -u > "$T/want_long"
  # shellcheck disable=SC2086
  complete_words "$S" $cmd -- > "$T/got_long"
  if ! diff "$T/want_long" "$T/got_long" > "$T/diff"; then
    fail "$cmd: bash completion of -- (>) is not the table (<): $(cat "$T/diff")"
  else
    ok
  fi
  awk -F '\t' '$2 != "-" { print "-" $2 }' "$T/table" | sort -u > "$T/want_short"
  # shellcheck disable=SC2086
  complete_words "$S" $cmd - > "$T/got_all"
  check "$cmd: - offers the short options too" sh -c "! comm -23 '$T/want_short' '$T/got_all' | grep -q ."
done

# A FILE value completes to files.
mkdir "$T/w" && : > "$T/w/out-file.json"
(cd "$T/w" && complete_words "$S" fetch -o out-) > "$T/files"
check "fetch -o completes files" grep -qx out-file.json "$T/files"
(cd "$T/w" && complete_words "$S" fetch --retries "") > "$T/novalue"
check "fetch --retries N offers no file" sh -c "! grep -q out-file '$T/novalue'"

# Values (issue #37): an option whose values the table lists completes to
# them, whatever the shell.
vals() { complete_words "$S" "$@" "" | tr '\n' ' '; }
check "batch --progress offers its modes ($(vals batch --progress))" \
  test "$(vals batch --progress)" = "auto bar lines none "
check "batch export --format offers json, jsonl, csv ($(vals batch export --format))" \
  test "$(vals batch export --format)" = "csv json jsonl "
check "plan --preset offers the presets ($(vals plan --preset))" \
  sh -c 'case "$1" in *batch*decorrelated*default*) exit 0;; *) exit 1;; esac' _ "$(vals plan --preset)"
if "$S" help --commands | grep -qx serve; then
  check "serve --dialect offers the dialects" sh -c 'case "$1" in *anthropic*openai*) exit 0;; *) exit 1;; esac' _ "$(vals serve --dialect)"
fi
check "batch --on-breaker offers wait and defer ($(vals batch --on-breaker))" \
  test "$(vals batch --on-breaker)" = "defer wait "
# the presets the table lists are the ones plan knows
for p in $(vals plan --preset); do
  expect_exit "plan --preset $p is known" 0 "$S" plan --preset "$p"
done

# An option the table lacks is never offered (the completion reads the table).
complete_words "$S" fetch --frob > "$T/frob"
check "no invented option" sh -c "! grep -q . '$T/frob'"

if command -v zsh > /dev/null 2>&1; then
  check "zsh completion parses" zsh -n "$ZSH_COMPL"
  # A real interactive zsh (zpty) with compinit: "stagger fetch --retr<TAB>"
  # lists the four options of the table that start so. The read waits for
  # the listing itself; timeout is only a hang guard.
  mkdir -p "$T/zfp" "$T/zbin"
  cp "$ZSH_COMPL" "$T/zfp/"
  ln -s "$S" "$T/zbin/stagger"
  cat > "$T/z.zsh" <<'ZEOF'
zmodload zsh/zpty
zpty z "PATH=$1:\$PATH TERM=dumb zsh -f -i"
zpty -w z "fpath=($2 \$fpath); autoload -U compinit; compinit -u -D; echo READY"
zpty -r z line '*READY*'
zpty -n -w z $'stagger fetch --retr\t\t'
zpty -r z out '*--retry-on*'
print -r -- "$out"
zpty -d z
ZEOF
  timeout 60 zsh -f "$T/z.zsh" "$T/zbin" "$T/zfp" > "$T/zout" 2>&1 || true
  tr -d '\r' < "$T/zout" | grep -o -- '--retr[a-z-]*' | sort -u > "$T/zgot"
  "$S" help --options fetch | awk -F '\t' '$1 ~ /^retr/ { print "--" $1 }' | sort -u > "$T/zwant"
  check "zsh offers the table's --retr* options ($(tr '\n' ' ' < "$T/zgot"))" \
    sh -c "comm -23 '$T/zwant' '$T/zgot' | grep -q . && exit 1 || exit 0"
  check "zsh describes them (the table's help: 'retries after the first attempt')" \
    grep -q "retries after the first attempt" "$T/zout"
  # values: "stagger batch --progress <TAB>" lists the modes
  sed -e 's/stagger fetch --retr/stagger batch --progress /' -e 's/[*]--retry-on[*]/*lines*/' \
    "$T/z.zsh" > "$T/zv.zsh"
  timeout 60 zsh -f "$T/zv.zsh" "$T/zbin" "$T/zfp" > "$T/zvout" 2>&1 || true
  check "zsh offers batch --progress's values" sh -c "grep -q 'auto  *bar  *lines' '$T/zvout'"
else
  echo "zsh not installed: its completion's syntax not checked"
fi

if command -v fish > /dev/null 2>&1; then
  check "fish completion parses" fish -n "$FISH_COMPL"
  mkdir -p "$T/fbin"
  ln -sf "$S" "$T/fbin/stagger"
  # fcomplete LINE: what fish offers for LINE, the words only (fish's own
  # completer, `complete -C`, with the file sourced and stagger on PATH).
  fcomplete() {
    PATH="$T/fbin:$PATH" fish --no-config -c 'source $argv[1]; complete -C $argv[2]' \
      "$FISH_COMPL" "$1" | cut -f1 | sort -u
  }
  fcomplete "stagger " > "$T/ffirst"
  check "fish: the first word offers every command" sh -c "! sort '$T/cmds' | comm -23 - '$T/ffirst' | grep -q ."
  for cmd in $(cat "$T/cmds") "batch report" "batch export"; do
    "$S" help --options "$cmd" | awk -F '\t' '$1 != "-" { print "--" $1 }' | sort -u > "$T/want_long"
    fcomplete "stagger $cmd --" > "$T/fgot"
    if ! diff "$T/want_long" "$T/fgot" > "$T/diff"; then
      fail "$cmd: fish completion of -- (>) is not the table (<): $(cat "$T/diff")"
    else
      ok
    fi
  done
  check "fish: batch --progress offers its modes ($(fcomplete "stagger batch --progress " | tr '\n' ' '))" \
    test "$(fcomplete "stagger batch --progress " | tr '\n' ' ')" = "auto bar lines none "
  check "fish: batch export --format offers json, jsonl, csv" \
    test "$(fcomplete "stagger batch export --format " | tr '\n' ' ')" = "csv json jsonl "
  check "fish: fetch -o completes files" sh -c "cd '$T/w' && PATH='$T/fbin:$PATH' fish --no-config -c 'source \$argv[1]; complete -C \"stagger fetch -o out-\"' '$FISH_COMPL' | grep -q '^out-file.json'"
  # (fish itself offers near names for an unknown one: none may be --frob)
  check "fish: no invented option" sh -c "! PATH='$T/fbin:$PATH' fish --no-config -c 'source \$argv[1]; complete -C \"stagger fetch --frob\"' '$FISH_COMPL' | grep -q '^--frob'"
  # descriptions: the table's help, and the default it holds
  PATH="$T/fbin:$PATH" fish --no-config -c 'source $argv[1]; complete -C "stagger fetch --retries"' \
    "$FISH_COMPL" > "$T/fdesc"
  check "fish describes --retries (the table's help and default: $(cat "$T/fdesc"))" \
    grep -q "retries after the first attempt (default 5)" "$T/fdesc"
else
  echo "fish not installed: its completion not checked"
fi

# cmake --install puts them where the shells look (the completions' own
# install script: what `cmake --install` runs for that directory).
if [ -n "${STG_BUILD_DIR:-}" ] && [ -f "$STG_BUILD_DIR/completions/cmake_install.cmake" ]; then
  cmake -DCMAKE_INSTALL_PREFIX="$T/prefix" -P "$STG_BUILD_DIR/completions/cmake_install.cmake" \
    > "$T/install.log" 2>&1 || fail "cmake --install: $(tail -5 "$T/install.log")"
  check "bash completion installed" cmp -s "$BASH_COMPL" "$T/prefix/share/bash-completion/completions/stagger"
  check "zsh completion installed" cmp -s "$ZSH_COMPL" "$T/prefix/share/zsh/site-functions/_stagger"
  check "fish completion installed" cmp -s "$FISH_COMPL" "$T/prefix/share/fish/vendor_completions.d/stagger.fish"
fi

finish
