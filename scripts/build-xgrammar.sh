#!/usr/bin/env bash
# Builds XGrammar's C++ core (structured output: JSON schemas, regexes and grammars
# to token masks) from its PyPI source distribution into third_party/xgrammar
# (ignored by git): the sdist is checked by sha256, built as a static library with
# the Python bindings off, and installed with its headers and DLPack's. Runs once:
# an existing install of the same version is kept. scripts/setup.sh calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.2.8
BUILD=$VERSION+corvid.1  # the sdist and corvid's patches (scripts/xgrammar-*.patch)
SHA256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
URL=https://files.pythonhosted.org/packages/03/0f/29f521535729be740779c2c98b630ef6607cf28be9b669895dd2b821ff63/xgrammar-$VERSION.tar.gz
PREFIX=third_party/xgrammar

if [ -f "$PREFIX/VERSION" ] && [ "$(cat "$PREFIX/VERSION")" = "$BUILD" ] && [ -f "$PREFIX/lib/libxgrammar.a" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "build-xgrammar: downloading xgrammar $VERSION (PyPI sdist)"
# The file from PyPI's file host (pip download would first build the sdist's metadata
# with its build backend, which nothing here needs).
curl -fsSL --retry 3 -o "$tmp/xgrammar-$VERSION.tar.gz" "$URL"
echo "$SHA256  $tmp/xgrammar-$VERSION.tar.gz" | sha256sum -c --status || {
  echo "build-xgrammar: sha256 mismatch for xgrammar-$VERSION.tar.gz" >&2
  exit 1
}
tar -xzf "$tmp/xgrammar-$VERSION.tar.gz" -C "$tmp"
# 0.2.8 lets a string with minLength/maxLength hold raw control characters (tab, NUL...),
# which no JSON parser accepts; the patch excludes them as its unbounded strings do.
patch -s -d "$tmp/xgrammar-$VERSION" -p1 < scripts/xgrammar-bounded-strings.patch
# Its own cmake/config.cmake turns the Python bindings on; a config.cmake in the build
# folder takes its place. Release, no LTO (its objects go into corvid's non-LTO builds).
mkdir -p "$tmp/build"
cat > "$tmp/build/config.cmake" <<'CONFIG'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
CONFIG
cmake -S "$tmp/xgrammar-$VERSION" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DXGRAMMAR_BUILD_PYTHON_BINDINGS=OFF -DXGRAMMAR_BUILD_CXX_TESTS=OFF -DCMAKE_CXX_FLAGS="-fno-lto" \
  -DCMAKE_INSTALL_PREFIX="$PWD/$PREFIX" >/dev/null
cmake --build "$tmp/build" -j "${JOBS:-$(nproc)}"
rm -rf "$PREFIX"
cmake --install "$tmp/build" >/dev/null
cp "$tmp/xgrammar-$VERSION/LICENSE" "$PREFIX/LICENSE"
echo "$BUILD" > "$PREFIX/VERSION"
echo "build-xgrammar: $PREFIX ready"
