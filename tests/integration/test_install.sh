# The install: headers under include/stagger/, a pkg-config file and a CMake
# package, a shared library that exports only stg_ symbols, and a program
# built against the installed copy with `pkg-config --cflags --libs` and run
# on the installed shared library. The .pc file must be relocatable: the
# install goes to a temporary prefix, not the configured one.
. "$(dirname "$0")/lib.sh"
: "${STG_BUILD_DIR:?}" "${STG_SOURCE_DIR:?}"
T=$(mktemp -d /tmp/stg_install.XXXXXX)
trap 'rm -rf "$T"' EXIT

cmake --install "$STG_BUILD_DIR" --prefix "$T/usr" >"$T/install.log"
check "headers installed" [ -f "$T/usr/include/stagger/stagger.h" -a -f "$T/usr/include/stagger/policy.h" ]
check "only the core's headers" [ ! -e "$T/usr/include/stagger/curl.h" -a ! -e "$T/usr/include/stagger/redis.h" ]
pc=$(find "$T/usr" -name stagger.pc | head -n1)
cm=$(find "$T/usr" -name staggerConfig.cmake | head -n1)
so=$(find "$T/usr" -name 'libstagger.so' | head -n1)
check "pkg-config file installed" [ -n "$pc" ]
check "CMake package installed" [ -n "$cm" ]
check "shared library installed" [ -n "$so" ]
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
check "pkg-config knows it" pkg-config --exists stagger
check "pkg-config version is the header's" \
  [ "$(pkg-config --modversion stagger)" = "$(sed -n 's/#define STG_VERSION_STRING "\(.*\)"/\1/p' "$STG_SOURCE_DIR/include/stagger/version.h")" ]
others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^stg_' | grep -v '^_init$\|^_fini$' || true)
check "only stg_ symbols exported (others: $others)" [ -z "$others" ]
check "the API is exported" sh -c "nm -D --defined-only '$so' | grep -q ' stg_decide$'"

san=""
[ "${STG_SANITIZE:-OFF}" = ON ] && san="-fsanitize=address,undefined"
# shellcheck disable=SC2046
if "${STG_CC:-cc}" -std=c11 -D_POSIX_C_SOURCE=200809L $san "$STG_SOURCE_DIR/examples/retry_loop.c" \
    $(pkg-config --cflags stagger) -o "$T/example" $(pkg-config --libs --static stagger) \
    2>"$T/cc.err"; then
  ok
  out=$(LD_LIBRARY_PATH=$(dirname "$so") "$T/example")
  check "the example runs against the installed library" sh -c "echo '$out' | grep -q 'attempt 3: status 200 -> success'"
else
  fail "building the example against the install: $(cat "$T/cc.err")"
fi
finish
