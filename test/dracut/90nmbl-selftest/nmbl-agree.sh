#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# For each kernel image in the second partition of the first disk (the
# tests' /boot), one line:
#   NMBL-AGREE <file> nmbl=<accepted|refused> kexec=<accepted|refused>
# then NMBL-AGREE-DONE.  Nothing is left loaded.
set -eu

dir=/run/nmbl-agree
mkdir -p "$dir"
nmbl modprobe ext4
mount -t ext4 -o ro,norecovery /dev/vda2 "$dir"
for f in "$dir"/vmlinuz-* "$dir"/*.txt; do
	[ -f "$f" ] || continue
	if nmbl load "$f" --cmdline nmbl.agree >/dev/null 2>&1; then
		n=accepted
	else
		n=refused
	fi
	nmbl unload >/dev/null 2>&1 || :
	if kexec -s -l "$f" --command-line=nmbl.agree >/dev/null 2>&1; then
		k=accepted
	else
		k=refused
	fi
	kexec -s -u >/dev/null 2>&1 || :
	echo "NMBL-AGREE ${f##*/} nmbl=$n kexec=$k" >/dev/console
done
umount "$dir"
echo "NMBL-AGREE-DONE" >/dev/console
