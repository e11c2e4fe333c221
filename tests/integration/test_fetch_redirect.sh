# `stagger fetch -L` against two stg_hostile servers on two loopback ports
# (tests/hostile/hostile.c logs every request head it reads): a redirect to
# the other port (another origin) carries no X-Api-Key, X-Auth-Token,
# Proxy-Authorization or --secret-header, a redirect to the same origin
# carries them; a redirect loop ends with a clear message; a retry over a
# connection the server closes after reading is the only resend.
# Only loopback traffic; every server is stopped on exit.
. "$(dirname "$0")/lib.sh"
: "${HOSTILE:?set HOSTILE to the stg_hostile binary}"
S=$STAGGER
if ! "$S" fetch --help >/dev/null 2>&1; then
  skip "stagger fetch not built (no libcurl): skipped"
fi
T=$(mktemp -d /tmp/stg_fetchL.XXXXXX)
cleanup() {
  in_script || return 0
  stop_jobs
  rm -rf "$T"
}
trap cleanup EXIT

count() { grep -ci "$1" "$2" || true; }

hostile b ok; PB=$HPORT
hostile a redirect --target "http://127.0.0.1:$PB/landed"; PA=$HPORT
hostile same redirect --target /landed; PS=$HPORT
hostile loop redirect-loop; PL=$HPORT

SECRETS="-H X-Api-Key:k-1 -H X-Auth-Token:t-2 -H Proxy-Authorization:p-3 -H X-Mine:m-4 --secret-header X-Mine -H X-Plain:v"
# shellcheck disable=SC2086
expect_exit "cross-origin -L succeeds" 0 "$S" fetch -s -L $SECRETS "http://127.0.0.1:$PA/start"
check "the body is the other origin's" grep -qx ok /tmp/stg_out.$$
check "the first origin got X-Api-Key" [ "$(count '^H x-api-key: *k-1' "$T/a.log")" = 1 ]
for h in x-api-key x-auth-token proxy-authorization x-mine; do
  check "no $h to the other origin" [ "$(count "^H $h:" "$T/b.log")" = 0 ]
done
check "plain header kept" [ "$(count '^H x-plain: *v' "$T/b.log")" = 1 ]

# shellcheck disable=SC2086
expect_exit "same-origin -L succeeds" 0 "$S" fetch -s -L $SECRETS "http://127.0.0.1:$PS/start"
check "same origin: X-Api-Key on both hops" [ "$(count '^H x-api-key: *k-1' "$T/same.log")" = 2 ]

set +e
"$S" fetch -L "http://127.0.0.1:$PL/loop/0" >/dev/null 2>"$T/loop.err"; rc=$?
set -e
check "a redirect loop fails" [ "$rc" != 0 ]
check "the loop is named" grep -q "too many redirects" "$T/loop.err"
check "21 requests for 20 redirects" [ "$(count '^REQ ' "$T/loop.log")" = 21 ]

# A GET retried over a connection the server reads and closes: libcurl's
# own resend would make more requests than the 3 attempts stagger decided.
hostile close close-reused --status 503; PC=$HPORT
set +e
"$S" fetch -s --retries 2 --base 10ms --cap 20ms "http://127.0.0.1:$PC/g" >/dev/null 2>&1
set -e
check "3 requests for 3 attempts" [ "$(count '^REQ ' "$T/close.log")" = 3 ]
finish
