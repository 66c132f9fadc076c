#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# pre-mount hook, sourced by dracut's init once the devices have settled.
# A boot that worked never comes back here.  The menu ends normally when
# the user asked for it (GRUB's reboot, halt or exit): do that, as GRUB on
# the firmware would.  Anything else is a failure of nmbl itself: say so and
# leave it to dracut's emergency handling (a shell, or what rd.emergency=
# asks for), rather than a silent reboot loop.
if /usr/libexec/nmbl/nmbl-menu; then
    warn "nmbl: the boot menu ended; rebooting"
    echo b >/proc/sysrq-trigger
fi
emergency_shell "nmbl: the boot menu failed"
