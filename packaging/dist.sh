#!/usr/bin/env bash
# make dist: a release tarball and a Debian package of the built module and sweep tool.
#   packaging/dist.sh MODULE.so SWEEP OUT_DIR
# OUT_DIR gets:
#   redis-ratelimit-V-ARCH-linux-gnu.tar.gz  the module, ratelimit-sweep, lua/ (the twins:
#                                           the Functions library and lua/scripts/),
#                                           ratelimit.conf, LICENSE, README.md and their
#                                           SHA256SUMS, in redis-ratelimit-V/
#   redis-ratelimit_V_DEBARCH.deb            built by debhelper (packaging/debian) from
#                                           the same tree
#   SHA256SUMS                               of the tarball and the package
# The tarball is reproducible (sorted names, owner 0, the mtime of the last commit).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 MODULE.so SWEEP OUT_DIR" >&2; exit 2; }
module=$(realpath -m "$1") sweep=$(realpath -m "$2") out=$(realpath -m "$3")
cd "$(dirname "$0")/.."
for f in "$module" "$sweep"; do
  [ -f "$f" ] || { echo "dist: $f is missing: build first (make build)" >&2; exit 1; }
done

version=$(cargo pkgid -p redis-ratelimit | sed -e 's/.*[#@]//')
case "$version" in
  [0-9]*) ;;
  *) echo "dist: cannot read the version from cargo pkgid: $version" >&2; exit 1 ;;
esac
name=redis-ratelimit-$version
tarball=$name-$(uname -m)-linux-gnu.tar.gz
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

rm -rf "$out"
mkdir -p "$out/$name/lua/scripts"
tree=$out/$name
install -m 0755 "$module" "$tree/libredis_ratelimit.so"  # redis-server loads only executable modules
install -m 0755 "$sweep" "$tree/ratelimit-sweep"
# Without the debug information the release profile keeps (a tenth of the size).
strip --strip-debug "$tree/libredis_ratelimit.so" "$tree/ratelimit-sweep"
# The twins: the Functions library and the script of each function, not the published
# scripts kept as benchmark baselines nor the script that writes lua/scripts/.
install -m 0644 lua/ratelimit.lua "$tree/lua/"
install -m 0644 lua/scripts/*.lua "$tree/lua/scripts/"
install -m 0644 packaging/ratelimit.conf LICENSE README.md "$tree/"
(cd "$tree" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS)
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$out" -czf "$out/$tarball" "$name"

# The Debian package, from a copy of the same tree with packaging/debian in it.
build=$out/deb
mkdir -p "$build"
cp -a "$tree" "$build/$name"
cp -a packaging/debian "$build/$name/debian"
rm -f "$build/$name/SHA256SUMS"
{
  echo "redis-ratelimit ($version) unstable; urgency=medium"
  echo
  echo "  * Release $version, built by make dist."
  echo
  echo " -- redis-ratelimit packaging <packaging@redis-ratelimit.invalid>  $(date -R -u -d "@$epoch")"
} > "$build/$name/debian/changelog"
{
  echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: redis-ratelimit"
  echo
  echo "Files: *"
  echo "Copyright: the redis-ratelimit authors"
  echo "License: MIT"
  sed -e 's/^$/./' -e 's/^/ /' LICENSE
} > "$build/$name/debian/copyright"
(cd "$build/$name" && SOURCE_DATE_EPOCH=$epoch dpkg-buildpackage -b -us -uc >"$build/build.log" 2>&1) || {
  echo "dist: dpkg-buildpackage failed:" >&2
  cat "$build/build.log" >&2
  exit 1
}
mv "$build"/redis-ratelimit_"$version"_*.deb "$out/"
rm -rf "$build" "$tree"
(cd "$out" && sha256sum "$tarball" redis-ratelimit_"$version"_*.deb > SHA256SUMS)
echo "dist: $out/$tarball"
echo "      $(ls "$out"/redis-ratelimit_"$version"_*.deb)"
echo "      $out/SHA256SUMS"
