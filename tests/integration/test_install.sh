# The install, as a user of each package sees it: three packages (stagger,
# stagger-curl, stagger-redis; the last two when their libraries were
# built), each with its headers, a pkg-config file and a CMake component,
# shared libraries named by the ABI number that export only stg_ symbols;
# the examples built against the installed copy with pkg-config and with
# CMake (find_package(stagger COMPONENTS curl)) and run on the installed
# libraries (the curl one against `stagger serve` on 127.0.0.1); every
# installed header compiled as C++ with g++ -Wall -Wextra -Werror, the same
# layout seen from C and C++; and stagger embedded with add_subdirectory
# gets no -Werror and puts no flag on the embedder's own targets.
# The .pc files must be relocatable: the install goes to a temporary
# prefix, not the configured one.
. "$(dirname "$0")/lib.sh"
: "${STG_BUILD_DIR:?}" "${STG_SOURCE_DIR:?}"
T=$(mktemp -d /tmp/stg_install.XXXXXX)
SERVE_DIR=$T
. "$(dirname "$0")/serve_lib.sh"
# (in the script only: bash runs the trap in a child signalled before its exec)
trap 'if [ "$BASHPID" = "$$" ]; then
  for p in ${SRV_PIDS:-}; do serve_stop "$p" >/dev/null 2>&1 || true; done; rm -rf "$T"
fi' EXIT
HAVE_CURL=${STG_HAVE_CURL:-0}
HAVE_REDIS=${STG_HAVE_REDIS:-0}
ABI=$(sed -n 's/^#define STG_ABI_VERSION \([0-9]*\).*/\1/p' "$STG_SOURCE_DIR/include/stagger/version.h")
VERSION=$(sed -n 's/#define STG_VERSION_STRING "\(.*\)"/\1/p' "$STG_SOURCE_DIR/include/stagger/version.h")
san=""
[ "${STG_SANITIZE:-OFF}" = ON ] && san="-fsanitize=address,undefined"

cmake --install "$STG_BUILD_DIR" --prefix "$T/usr" >"$T/install.log"
INC=$T/usr/include
check "core headers installed" [ -f "$INC/stagger/stagger.h" -a -f "$INC/stagger/policy.h" ]

# Every header of the source tree is installed unless it is named after a
# part that does not install (cmake/StaggerInstall.cmake: STG_PARTS).
for h in "$STG_SOURCE_DIR"/include/stagger/*.h; do
  n=$(basename "$h" .h)
  case "$n" in
  curl) want=$HAVE_CURL ;;
  redis) want=$HAVE_REDIS ;;
  batch | store | server | sim | proxy) want=0 ;;
  *) want=1 ;;
  esac
  if [ "$want" = 1 ]; then
    check "$n.h installed" [ -f "$INC/stagger/$n.h" ]
  else
    check "$n.h not installed" [ ! -e "$INC/stagger/$n.h" ]
  fi
done
# An installed header includes only installed headers.
for h in "$INC"/stagger/*.h; do
  for dep in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$h"); do
    check "$(basename "$h") includes $dep, which is installed" [ -f "$INC/stagger/$dep" ]
  done
done

pc=$(find "$T/usr" -name stagger.pc | head -n1)
cm=$(find "$T/usr" -name staggerConfig.cmake | head -n1)
check "pkg-config file installed" [ -n "$pc" ]
check "CMake package installed" [ -n "$cm" ]
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
LIBDIR=$(pkg-config --variable=libdir stagger)
export LD_LIBRARY_PATH=$LIBDIR

# check_lib PKG LIB: pkg-config knows PKG at the header's version, LIB's
# soname is LIB.so.ABI, and it exports stg_ names only (no stg__).
check_lib() {
  check "pkg-config knows $1" pkg-config --exists "$1"
  check "$1 version is the header's" [ "$(pkg-config --modversion "$1")" = "$VERSION" ]
  so=$LIBDIR/$2.so
  check "$2.so installed" [ -f "$so" ]
  [ -f "$so" ] || return 0
  soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  check "$2 soname is $2.so.$ABI (got $soname)" [ "$soname" = "$2.so.$ABI" ]
  others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^stg_[a-z0-9]' |
    grep -v '^_init$\|^_fini$' || true)
  check "$2 exports only stg_ symbols (others: $others)" [ -z "$others" ]
}
check_lib stagger libstagger
check "the core API is exported" sh -c "nm -D --defined-only '$LIBDIR/libstagger.so' | grep -q ' stg_decide$'"
[ "$HAVE_CURL" = 1 ] && check_lib stagger-curl libstagger-curl
[ "$HAVE_REDIS" = 1 ] && check_lib stagger-redis libstagger-redis
[ "$HAVE_CURL" = 1 ] || check "no curl package without the library" [ ! -e "$INC/stagger/curl.h" ]

# --- the core example, pkg-config ---------------------------------------------
# shellcheck disable=SC2046
if "${STG_CC:-cc}" -std=c11 -D_POSIX_C_SOURCE=200809L $san "$STG_SOURCE_DIR/examples/retry_loop.c" \
    $(pkg-config --cflags stagger) -o "$T/example" $(pkg-config --libs --static stagger) \
    2>"$T/cc.err"; then
  ok
  out=$("$T/example")
  check "the example runs against the installed library" sh -c "echo '$out' | grep -q 'attempt 3: status 200 -> success'"
else
  fail "building the example against the install: $(cat "$T/cc.err")"
fi

# --- the curl example, pkg-config and CMake, against stagger serve ---------------
# run_curl_example NAME BINARY: two URLs of a loopback server; both succeed.
run_curl_example() {
  out=$("$2" "$URL/a" "$URL/b" 2>"$T/$1.log") || fail "$1 exited $?: $(tail -n3 "$T/$1.log")"
  check "$1: the blocking call succeeded ($out)" sh -c "echo '$out' | grep -q '^blocking: HTTP 200'"
  check "$1: both engine requests succeeded" [ "$(echo "$out" | grep -c '^request [0-9]*: success')" = 2 ]
  check "$1: it linked the installed libstagger-curl" \
    sh -c "ldd '$2' | grep -q '$LIBDIR/libstagger-curl.so.$ABI'"
}
if [ "$HAVE_CURL" = 1 ]; then
  serve_start install
  # shellcheck disable=SC2046
  if "${STG_CC:-cc}" -std=c11 -D_POSIX_C_SOURCE=200809L $san "$STG_SOURCE_DIR/examples/curl_engine.c" \
      $(pkg-config --cflags stagger-curl) -o "$T/curl_pc" $(pkg-config --libs stagger-curl) \
      2>"$T/cc_curl.err"; then
    ok
    run_curl_example pkg-config "$T/curl_pc"
  else
    fail "building curl_engine.c with pkg-config: $(cat "$T/cc_curl.err")"
  fi

  mkdir -p "$T/cmk"
  cat >"$T/cmk/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(uses_stagger C)
find_package(stagger $VERSION REQUIRED COMPONENTS curl)
add_executable(curl_cmake "$STG_SOURCE_DIR/examples/curl_engine.c")
target_link_libraries(curl_cmake PRIVATE stagger::curl)
EOF
  if cmake -S "$T/cmk" -B "$T/cmk/b" -DCMAKE_PREFIX_PATH="$T/usr" -DCMAKE_C_FLAGS="$san" \
      -DCMAKE_EXE_LINKER_FLAGS="$san" >"$T/cmk.log" 2>&1 &&
      cmake --build "$T/cmk/b" >>"$T/cmk.log" 2>&1; then
    ok
    run_curl_example cmake "$T/cmk/b/curl_cmake"
  else
    fail "building curl_engine.c with find_package(stagger COMPONENTS curl): $(tail -n 20 "$T/cmk.log")"
  fi
  serve_stop "$SRV_PID" || fail "stagger serve did not stop cleanly"
  SRV_PIDS=""
fi
if [ "$HAVE_REDIS" = 1 ]; then
  mkdir -p "$T/cmr"
  cat >"$T/cmr/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(uses_stagger_redis C)
find_package(stagger REQUIRED COMPONENTS redis)
file(WRITE \${CMAKE_BINARY_DIR}/r.c "#include <stagger/redis.h>
int main(void) { stg_redis_url u; return stg_redis_url_parse(\\"redis://h:1/k\\", &u, 0) == STG_OK ? 0 : 1; }\n")
add_executable(r \${CMAKE_BINARY_DIR}/r.c)
target_link_libraries(r PRIVATE stagger::redis)
EOF
  if cmake -S "$T/cmr" -B "$T/cmr/b" -DCMAKE_PREFIX_PATH="$T/usr" -DCMAKE_C_FLAGS="$san" \
      -DCMAKE_EXE_LINKER_FLAGS="$san" >"$T/cmr.log" 2>&1 &&
      cmake --build "$T/cmr/b" >>"$T/cmr.log" 2>&1; then
    check "a program linked with stagger::redis runs" "$T/cmr/b/r"
  else
    fail "find_package(stagger COMPONENTS redis): $(tail -n 20 "$T/cmr.log")"
  fi
fi
# A component that is not there is reported as missing, not silently empty.
mkdir -p "$T/cmx"
cat >"$T/cmx/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(asks_for_nothing C)
find_package(stagger REQUIRED COMPONENTS nosuchpart)
EOF
check "find_package fails for an unknown component" \
  sh -c "! cmake -S '$T/cmx' -B '$T/cmx/b' -DCMAKE_PREFIX_PATH='$T/usr' >'$T/cmx.log' 2>&1"

# --- C++: every installed header alone, then all, with g++ -Werror -------------------
CXX=${STG_CXX:-g++}
CXXFLAGS="-std=c++11 -Wall -Wextra -Werror -pedantic"
defs=""
pkgs="stagger"
[ "$HAVE_CURL" = 1 ] && defs="$defs -DSTG_ABI_CURL=1" && pkgs="$pkgs stagger-curl"
[ "$HAVE_REDIS" = 1 ] && defs="$defs -DSTG_ABI_REDIS=1" && pkgs="$pkgs stagger-redis"
: >"$T/all_headers.hpp"
for h in "$INC"/stagger/*.h; do
  n=$(basename "$h")
  echo "#include <stagger/$n>" >>"$T/all_headers.hpp"
  # shellcheck disable=SC2086
  check "$n compiles alone as C++" \
    sh -c "echo '#include <stagger/$n>' | $CXX $CXXFLAGS -I'$INC' -x c++ -fsyntax-only - 2>'$T/cxx_$n.err' || { cat '$T/cxx_$n.err' >&2; exit 1; }"
  if grep -q 'STG_API' "$h"; then
    check "$n has extern \"C\" guards" sh -c "grep -q '^extern \"C\" {' '$h' && grep -q '^#ifdef __cplusplus' '$h'"
  fi
done
# shellcheck disable=SC2046,SC2086
if $CXX $CXXFLAGS $san $defs -I"$T" -I"$STG_SOURCE_DIR/tests/abi" $(pkg-config --cflags $pkgs) \
    "$STG_SOURCE_DIR/tests/abi/cxx_headers.cpp" -o "$T/cxx" $(pkg-config --libs $pkgs) 2>"$T/cxx.err"; then
  ok
  check "the C++ program runs on the installed libraries" "$T/cxx"
  "$T/cxx" --dump >"$T/layout.cxx"
  "$STG_BUILD_DIR/tests/test_abi" --dump >"$T/layout.c"
  check "C and C++ see the same layout: $(diff "$T/layout.c" "$T/layout.cxx" | head -n 4)" \
    cmp -s "$T/layout.c" "$T/layout.cxx"
else
  fail "building tests/abi/cxx_headers.cpp against the install: $(head -n 30 "$T/cxx.err")"
fi

# --- add_subdirectory: no -Werror, nothing on the embedder's targets ----------------
mkdir -p "$T/emb"
cat >"$T/emb/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(embedder C)
set(STG_BUILD_TESTS OFF CACHE BOOL "")
set(STG_BUILD_BENCH OFF CACHE BOOL "")
add_subdirectory("$STG_SOURCE_DIR" stagger)
add_executable(mine mine.c)
target_link_libraries(mine PRIVATE stagger::stagger)
EOF
echo 'int main(void) { return 0; }' >"$T/emb/mine.c"
if cmake -S "$T/emb" -B "$T/emb/b" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$T/emb.log" 2>&1; then
  cc_json=$T/emb/b/compile_commands.json
  check "embedded: stagger's own files keep their warnings" grep -q 'src/core/bucket.c' "$cc_json"
  check "embedded: stagger's files are warned about" \
    sh -c "grep 'src/core/bucket.c\"' -B3 '$cc_json' | grep -q -- '-Wall'"
  check "embedded: no -Werror anywhere by default" sh -c "! grep -q -- '-Werror' '$cc_json'"
  check "embedded: the embedder's target gets no stagger flags" \
    sh -c "grep 'mine.c\"' -B3 '$cc_json' | grep '\"command\"' | grep -vq -- '-W'"
else
  fail "configuring a project that embeds stagger: $(tail -n 20 "$T/emb.log")"
fi
finish
