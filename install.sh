#!/bin/sh
# install.sh — installs shiqi-connect (or shiqi-ca-agent) from a release archive, after checking
# the archive against SHA256SUMS. POSIX sh: runs on macOS and any Linux.
#
#   sh install.sh --from URL|DIR [--version V] [--prefix DIR] [shiqi-connect|shiqi-ca-agent]
#
#   --from     where the archives and SHA256SUMS are: a release's https:// download URL or a
#              folder (`dist/` after scripts/dist)
#   --version  which release, when SHA256SUMS lists more than one
#   --prefix   the binary goes to PREFIX/bin [default: /usr/local as root or when writable,
#              else ~/.local]
#
# It picks the archive for this machine (Linux x86_64/aarch64: static; macOS x86_64/arm64),
# refuses one whose SHA-256 is not the one SHA256SUMS lists, checks that the new binary runs
# here, and only then replaces the old one. SHA256SUMS catches a damaged or partial download; it
# proves where the archive came from only if you got SHA256SUMS itself from a source you trust.
set -eu

from='' prefix='' program=shiqi-connect version=
die() {
  printf 'install.sh: %s\n' "$1" >&2
  [ -n "${2:-}" ] && printf 'hint: %s\n' "$2" >&2
  exit 1
}
while [ $# -gt 0 ]; do
  case $1 in
    --from) [ $# -ge 2 ] || die "--from needs a URL or folder"; from=$2; shift ;;
    --prefix) [ $# -ge 2 ] || die "--prefix needs a folder"; prefix=$2; shift ;;
    --version) [ $# -ge 2 ] || die "--version needs a version (e.g. 0.1.0)"; version=$2; shift ;;
    shiqi-connect | shiqi-ca-agent) program=$1 ;;
    -h | --help) echo "sh install.sh --from URL|DIR [--version V] [--prefix DIR] [shiqi-connect|shiqi-ca-agent]"; exit 0 ;;
    *) die "unknown argument \`$1\`" "sh install.sh --from URL|DIR [--version V] [--prefix DIR] [shiqi-connect|shiqi-ca-agent]" ;;
  esac
  shift
done
[ -n "$from" ] || die "no --from given" "pass the release's download URL or the folder with the archives (dist/)"

case $(uname -s) in
  Linux) os=unknown-linux-musl ;;
  Darwin) os=apple-darwin ;;
  *) die "no release build for $(uname -s)" "build from source: cargo install --path client" ;;
esac
machine=$(uname -m)
# A shell under Rosetta says x86_64 on Apple silicon; the arm64 build is the one to run there.
if [ "$os" = apple-darwin ] && [ "$(sysctl -n hw.optional.arm64 2>/dev/null)" = 1 ]; then machine=arm64; fi
case $machine in
  x86_64 | amd64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch64 ;;
  *) die "no release build for $machine" "build from source: cargo install --path client" ;;
esac
target=$arch-$os
if [ "$program" = shiqi-ca-agent ] && [ "$os" != unknown-linux-musl ]; then
  die "shiqi-ca-agent runs on the Linux server, not on $(uname -s)" "run this on the server"
fi

if [ -z "$prefix" ]; then
  prefix=/usr/local
  if [ "$(id -u)" != 0 ] && ! { [ -d "$prefix/bin" ] && [ -w "$prefix/bin" ]; }; then prefix=$HOME/.local; fi
fi

# The tools, named before anything is fetched.
case $from in
  https://*) ;;
  http://* | HTTP://* | Http://*) die "refusing $from: a download over http can be changed on the way" "use the https:// URL" ;;
  *://*) die "cannot fetch from $from" "give an https:// URL or a folder" ;;
  *) [ -d "$from" ] || die "no folder $from" "run scripts/dist, or pass the folder that holds the archives" ;;
esac
case $from in
  https://*) command -v curl >/dev/null 2>&1 || command -v wget >/dev/null 2>&1 ||
    die "neither curl nor wget is installed" "install curl, or download the archive and SHA256SUMS into a folder and pass it" ;;
esac
if command -v sha256sum >/dev/null 2>&1; then
  sha256() { sha256sum "$1" | awk '{ print $1 }'; }
elif command -v shasum >/dev/null 2>&1; then
  sha256() { shasum -a 256 "$1" | awk '{ print $1 }'; }
elif command -v openssl >/dev/null 2>&1; then
  sha256() { openssl dgst -sha256 -r "$1" | awk '{ print $1 }'; }
else
  die "no sha256sum, shasum or openssl to check the archive with" "install one of them (coreutils, perl or openssl)"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fetch() { # fetch NAME: from the URL or folder into $work/NAME
  case $from in
    https://*)
      if command -v curl >/dev/null 2>&1; then
        curl -fsSL --proto '=https' --proto-redir '=https' -o "$work/$1" "${from%/}/$1" || die "cannot download ${from%/}/$1"
      else
        wget -q --https-only -O "$work/$1" "${from%/}/$1" || die "cannot download ${from%/}/$1"
      fi
      ;;
    *) cp -- "$from/$1" "$work/$1" 2>/dev/null || die "no $1 in $from" "run scripts/dist, or pass the folder that holds the archives" ;;
  esac
}

fetch SHA256SUMS
pick=$program-${version:-*}-$target.tar.gz
archives=$(awk -v p="$program-" -v v="$version" -v t="-$target.tar.gz" '
  { f = $2; sub(/^\*/, "", f) }
  index(f, p) == 1 && substr(f, length(f) - length(t) + 1) == t &&
    (v == "" || f == p v t) { print f }' "$work/SHA256SUMS")
count=$(printf '%s\n' "$archives" | grep -c . || true)
[ "$count" -ge 1 ] || die "SHA256SUMS lists no $pick"
[ "$count" -eq 1 ] || die "SHA256SUMS lists $count archives for $target: $(echo $archives)" "choose one with --version"
archive=$archives
case $archive in */* | .* | *[!A-Za-z0-9._-]*) die "SHA256SUMS names an unexpected file \`$archive\`" ;; esac
fetch "$archive"

want=$(awk -v f="$archive" '{ g = $2; sub(/^\*/, "", g) } g == f { print $1 }' "$work/SHA256SUMS")
got=$(sha256 "$work/$archive")
[ -n "$got" ] || die "could not compute the SHA-256 of $archive"
[ "$got" = "$want" ] || die "$archive has SHA-256 $got, but SHA256SUMS says $want: not installed" \
  "download it again; if it still differs, do not use it and tell the project"

tar -xzf "$work/$archive" -C "$work"
dir=$work/${archive%.tar.gz}
[ -f "$dir/$program" ] || die "$archive holds no $program"
chmod 0755 "$dir/$program"
# It must run here before it replaces anything (the right architecture, not refused by the OS).
built=$("$dir/$program" --version 2>/dev/null) || die "$archive's $program does not run on this machine: nothing replaced"
mkdir -p "$prefix/bin"
# Into place in one rename, through a fresh name (never one that could already be a link): a
# running copy keeps its file, the next start gets the new one.
new=$(mktemp "$prefix/bin/.$program.XXXXXX")
trap 'rm -rf "$work"; rm -f "$new"' EXIT
cp -- "$dir/$program" "$new"
chmod 0755 "$new"
mv -f -- "$new" "$prefix/bin/$program"
printf 'installed %s as %s\n' "$built" "$prefix/bin/$program"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) printf 'note: %s is not on PATH; add it (e.g. export PATH="%s:$PATH")\n' "$prefix/bin" "$prefix/bin" ;;
esac
