#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Start the GRUB menu on the consoles.  grub-emu reaches the disks through
# a device map, the way GRUB's EFI image reaches them through the firmware;
# every disk Linux sees becomes (hdN), in the kernel's order.
set -eu

run=/run/nmbl
mkdir -p "$run"

# Disks and file system drivers come from udev's coldplug.
udevadm settle --timeout=30 || :

# The menu needs the firmware's variables (grubenv is not enough for
# fwsetup and Secure Boot state) and the lockdown state.
if [ -d /sys/firmware/efi ] && ! [ -e /sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c ]; then
	nmbl modprobe efivarfs || :
	mount -t efivarfs -o nosuid,nodev,noexec efivarfs /sys/firmware/efi/efivars || :
fi
if ! [ -e /sys/kernel/security/lockdown ]; then
	mount -t securityfs -o nosuid,nodev,noexec securityfs /sys/kernel/security || :
fi
nmbl status | sed 's/^/nmbl: /'

: >"$run/device.map"
n=0
for dev in /sys/block/*; do
	name=${dev##*/}
	case $name in
	loop* | ram* | zram* | sr* | fd* | nbd* | dm-* | md*) continue ;;
	esac
	[ -b "/dev/$name" ] || continue
	echo "(hd$n) /dev/$name" >>"$run/device.map"
	n=$((n + 1))
done

# On the serial line and the screen at once, whichever the user looks at.
exec /usr/libexec/nmbl/nmbl-console /usr/libexec/nmbl/grub-emu --kexec \
	--device-map="$run/device.map" --root=host --directory=/usr/share/nmbl/grub
