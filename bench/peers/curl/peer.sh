#!/bin/sh
# Peer client for `make bench`: the curl CLI with --retry 6.
#
# Usage: peer.sh BASE_URL KEYS_FILE [CONCURRENCY] [OUTDIR]
# Fetches BASE_URL + KEY for every key with CONCURRENCY (default 30) transfers
# at a time, each with X-Client-Id: KEY and written to its own file OUTDIR/KEY
# (a fresh temporary directory by default): curl 7.88 cannot truncate
# /dev/null when it retries and exits 23, losing the job (background §6).
# curl honours Retry-After (seconds or date) and otherwise waits 1 s, doubling.
#
# CURL_MODE=parallel (default): one `curl --parallel --parallel-max N` over a
#   config file with one url/output/header per key.
# CURL_MODE=xargs: `xargs -P N` runs one curl process per key. On a machine
#   where starting a process is slow this measures process start-up more than
#   retries, which is why it is not the default.
# Prints one line: ok=N failed=N.
set -eu
[ $# -ge 2 ] || { echo "usage: peer.sh BASE_URL KEYS_FILE [CONCURRENCY] [OUTDIR]" >&2; exit 2; }
base=$1 keys=$2 conc=${3:-30}
out=${4:-}
cleanup=""
if [ -z "$out" ]; then
    out=$(mktemp -d)
    cleanup=$out
fi
mkdir -p "$out"
codes=$(mktemp)
cfg=$(mktemp)
opts="-s --retry 6 --connect-timeout 5 --max-time 10"
if [ "${CURL_MODE:-parallel}" = xargs ]; then
    # The key is passed as $1 of a tiny sh -c, so it is never re-parsed.
    xargs -P "$conc" -I{} sh -c 'curl '"$opts"' -H "X-Client-Id: $1" -o "$2/$1" \
        -w "%{http_code}\n" "$3$1" || echo "curl_exit_$?"' sh {} "$out" "$base" \
        < "$keys" > "$codes" || true
else
    # One operation per key, separated by `next`: without it curl applies
    # every `header` line of the file to every transfer. Per-operation
    # options (retry, timeouts, write-out) are repeated in each block.
    # Keys are plain tokens (letters, digits, '-', '_', '.'); anything else is
    # skipped rather than quoted into the config file.
    grep -E '^[A-Za-z0-9._-]+$' "$keys" | while read -r k; do
        printf 'next\nurl = "%s%s"\noutput = "%s/%s"\nheader = "X-Client-Id: %s"\n' \
            "$base" "$k" "$out" "$k" "$k"
        printf 'retry = 6\nconnect-timeout = 5\nmax-time = 10\nsilent\nwrite-out = "%%{http_code}\\n"\n'
    done | sed '1d' > "$cfg"
    curl -s --parallel --parallel-max "$conc" -K "$cfg" > "$codes" || echo "curl_exit_$?" >> "$codes"
fi
ok=$(grep -c '^200$' "$codes" || true)
all=$(grep -c . "$keys" || true)
echo "ok=$ok failed=$((all - ok))"
grep '^curl_exit_' "$codes" | sort | uniq -c | sed 's/^/curl exits: /' >&2 || true
rm -f "$codes" "$cfg"
[ -z "$cleanup" ] || rm -rf "$cleanup"
