#!/usr/bin/env bash
# Builds Cubicle's microVM guest kernel (an ELF vmlinux with a PVH entry)
# from Debian's linux-source package and microvm.config, into a cache keyed
# by a hash of the config and the kernel source version. A cache hit returns
# at once; a build takes about 20 minutes on 2 cores, so nothing runs this
# by default: the microvm backend (or a person) asks for it.
#
#   desktop-image/kernel/build.sh               build if needed, print the vmlinux path
#   desktop-image/kernel/build.sh --print-path  print where the vmlinux goes, build nothing
#
# Needs (Debian): linux-source build-essential bc bison flex libelf-dev libssl-dev xz-utils
# Cache: $CUBICLE_KERNEL_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/cubicle/kernel
# Source: the newest $CUBICLE_KERNEL_SOURCE_DIR/linux-source-*.tar.xz (default /usr/src)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
config="$here/microvm.config"
cache_root=${CUBICLE_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cubicle/kernel}

die() { echo "kernel build: $*" >&2; exit 1; }

# Debian's linux-source puts its tarball here; tests point it elsewhere.
source_dir=${CUBICLE_KERNEL_SOURCE_DIR:-/usr/src}
tarball=$(ls "$source_dir"/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$tarball" ] || die "no $source_dir/linux-source-*.tar.xz: apt-get install linux-source"
version=$(basename "$tarball" .tar.xz)
key=$( { cat "$config"; echo "$version"; } | sha256sum | cut -c1-16)
out="$cache_root/$key"
vmlinux="$out/vmlinux"

if [ "${1:-}" = "--print-path" ]; then
    echo "$vmlinux"
    exit 0
fi
if [ -f "$vmlinux" ]; then
    echo "$vmlinux"
    exit 0
fi

for tool in make gcc bc bison flex xz; do
    command -v "$tool" >/dev/null || die "missing $tool: apt-get install build-essential bc bison flex xz-utils libelf-dev libssl-dev"
done
[ -f /usr/include/libelf.h ] || [ -f /usr/include/elfutils/libelf.h ] || die "missing libelf headers: apt-get install libelf-dev"

work="$out/build"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
echo "kernel build: unpacking $version into $work" >&2
tar -xf "$tarball" -C "$work" --strip-components=1

cd "$work"
make -s allnoconfig
scripts/kconfig/merge_config.sh -m .config "$config" >/dev/null
make -s olddefconfig

# Every option the fragment asks for must have survived dependency resolution.
missing=0
while IFS= read -r line; do
    case "$line" in CONFIG_*=*) ;; *) continue ;; esac
    opt=${line%%=*}
    want=${line#*=}
    if [ "$want" = "n" ]; then
        grep -q "^$opt=" .config && { echo "kernel build: $opt should be off" >&2; missing=1; }
    else
        grep -qx "$line" .config || { echo "kernel build: $opt=$want did not stick" >&2; missing=1; }
    fi
done < "$config"
[ "$missing" = 0 ] || die "microvm.config asks for options this kernel cannot give; fix the fragment"

echo "kernel build: compiling vmlinux with $(nproc) jobs (about 20 minutes on 2 cores)" >&2
make -s -j"$(nproc)" vmlinux
cp vmlinux "$vmlinux.tmp"
cp .config "$out/config"
mv "$vmlinux.tmp" "$vmlinux"
echo "$vmlinux"
