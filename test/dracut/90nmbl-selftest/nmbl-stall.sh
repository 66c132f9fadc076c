#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# For the VM tests only: with nmbl.selftest.stall=SECONDS on nmbl's own
# command line, hold up the boot before the menu for that long, as a
# driver or a grub.cfg on a failing disk could, saying so on the console:
#   NMBL-STALL begin SECONDS
#   NMBL-STALL end SECONDS        (not reset meanwhile: the menu comes next)
# Without it, nothing.
set -eu

read -r cmdline </proc/cmdline
seconds=
for word in $cmdline; do
	case $word in
	nmbl.selftest.stall=*) seconds=${word#*=} ;;
	esac
done
[ -n "$seconds" ] || exit 0
echo "NMBL-STALL begin $seconds" >/dev/console
sleep "$seconds"
echo "NMBL-STALL end $seconds" >/dev/console
