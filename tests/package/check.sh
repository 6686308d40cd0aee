#!/usr/bin/env bash
# What `dpkg -i` would install from the .deb, read as a user's desktop would: the package's
# name, version (Cargo's) and dependencies, the program and the `tandem` program beside it (the
# app runs it to serve the local stand-in cloud), its desktop entry and the icon the entry names. The window test then starts the unpacked program (scripts/test.sh).
#
#   bash tests/package/check.sh PACKAGE.deb UNPACKED_ROOT
set -uo pipefail
deb="$1"
root="$2"
passes=0
failures=0
check() {
  if [ "$1" = 0 ]; then
    echo "ok   $2"
    passes=$((passes + 1))
  else
    echo "FAIL $2"
    failures=$((failures + 1))
  fi
}
field() { dpkg-deb -f "$deb" "$1"; }
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$(dirname "$0")/../../Cargo.toml")"

[ "$(field Package)" = tandem ]
check $? "the package is called tandem ($(field Package))"
[ "$(field Version)" = "$version" ]
check $? "its version is Cargo's ($(field Version), Cargo $version)"
field Depends | grep -q 'libwebkit2gtk-4.1-0' && field Depends | grep -q 'libgtk-3-0'
check $? "it depends on WebKitGTK 4.1 and GTK 3 ($(field Depends))"
[ -x "$root/usr/bin/tandem-app" ]
check $? "it installs /usr/bin/tandem-app"
[ -x "$root/usr/bin/tandem" ] && "$root/usr/bin/tandem" serve --help | grep -q 'OpenAI'
check $? "it installs /usr/bin/tandem beside it, which serves the local stand-in cloud"
entry="$root/usr/share/applications/Tandem.desktop"
grep -qx 'Exec=tandem-app' "$entry" && grep -qx 'Name=Tandem' "$entry" && grep -qx 'Type=Application' "$entry"
check $? "its desktop entry starts tandem-app as 'Tandem'"
icon="$(sed -n 's/^Icon=//p' "$entry")"
found="$(find "$root/usr/share/icons/hicolor" -name "$icon.png" | wc -l)"
[ "$found" -ge 3 ]
check $? "the icon the entry names ($icon) comes in $found sizes"
! find "$root" -name '*.gguf' | grep -q .
check $? "no model is bundled (the first start offers the download)"

echo "suite-result: $passes passed, $failures failed, 0 skipped (the .deb package)"
[ "$failures" = 0 ]
