#!/usr/bin/env bash
# Builds the workspace root filesystem from Debian bookworm packages.
#
#   build-rootfs.sh TARGET_DIR PACKAGES_FILE APT_CACHE_DIR
#
# TARGET_DIR must not exist yet; the caller (`cubicle image build`) renames it
# into the image cache only after this script exits 0. Lines starting with
# `@@step` are progress markers read by the caller.
set -euo pipefail

target=$1
packages_file=$2
apt_cache=$3
suite=bookworm
mirror=${CUBICLE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${CUBICLE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$packages_file" | grep -v '^$')
mkdir -p "$apt_cache"

# Runs a command inside the new root. bubblewrap gives it its own /proc, /dev
# and /tmp that vanish with it, so an interrupted build leaves no mounts behind.
in_root() {
    bwrap --bind "$target" / --dev /dev --proc /proc \
        --ro-bind /etc/resolv.conf /etc/resolv.conf \
        --bind "$apt_cache" /var/cache/apt/archives \
        --unshare-pid --unshare-ipc --unshare-uts --die-with-parent \
        --setenv DEBIAN_FRONTEND noninteractive --setenv LC_ALL C.UTF-8 \
        --setenv PATH /usr/sbin:/usr/bin:/sbin:/bin \
        -- "$@"
}

echo "@@step 1 debootstrap"
debootstrap --variant=minbase --cache-dir="$apt_cache" "$suite" "$target" "$mirror"

echo "@@step 2 configure"
cat > "$target/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
SOURCES
# No service may start while packages install.
printf '#!/bin/sh\nexit 101\n' > "$target/usr/sbin/policy-rc.d"
chmod 0755 "$target/usr/sbin/policy-rc.d"
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
    > "$target/etc/apt/apt.conf.d/90cubicle-no-recommends"
in_root apt-get update -q
in_root apt-get dist-upgrade -y -q

echo "@@step 3 packages"
in_root apt-get install -y -q "${packages[@]}"

echo "@@step 4 user"
in_root useradd --uid 1000 --user-group --create-home --shell /bin/bash user
# Mount points the jail binds over (the root is read-only at run time).
mkdir -p "$target/run/cubicle" "$target/usr/local/sbin"
: > "$target/usr/local/sbin/cubicle-guest"
chmod 0755 "$target/usr/local/sbin/cubicle-guest"
echo cubicle > "$target/etc/hostname"
# Each workspace is its own machine: cubicle-guest writes a fresh machine id
# at every start on the workspace's own /run; none is baked in to be shared.
rm -f "$target/etc/machine-id" "$target/var/lib/dbus/machine-id"
mkdir -p "$target/var/lib/dbus"
ln -s /run/machine-id "$target/etc/machine-id"
ln -s /etc/machine-id "$target/var/lib/dbus/machine-id"

echo "@@step 5 cleanup"
rm -f "$target/usr/sbin/policy-rc.d"
rm -f "$target"/var/cache/apt/*.bin
rm -rf "$target"/var/lib/apt/lists/* "$target"/usr/share/doc/* "$target"/usr/share/man/* \
    "$target"/usr/share/info/* "$target"/var/log/*.log "$target"/var/cache/debconf/*-old
echo "@@done"
