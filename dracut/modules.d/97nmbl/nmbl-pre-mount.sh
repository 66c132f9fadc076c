#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# pre-mount hook, sourced by dracut's init once the devices have settled.
# A kexec never comes back here.  A direct boot does: the menu exits with
# status 100 once libnmbl has mounted the entry's root on $NEWROOT, and
# dracut's init goes on to switch root to it, as for any root it mounted.
# The menu ends with 0 when the user asked for it (GRUB's reboot, halt or
# exit): do that, as GRUB on the firmware would.  Anything else is a
# failure of nmbl itself: say so and leave it to dracut's emergency
# handling (a shell, or what rd.emergency= asks for), rather than a silent
# reboot loop.
nmbl_status=0
/usr/libexec/nmbl/nmbl-menu || nmbl_status=$?
case $nmbl_status in
100)
    # Nothing of nmbl goes along into the target's /run.
    rm -rf --one-file-system /run/nmbl
    ;;
0)
    warn "nmbl: the boot menu ended; rebooting"
    echo b >/proc/sysrq-trigger
    emergency_shell "nmbl: the boot menu failed"
    ;;
*)
    emergency_shell "nmbl: the boot menu failed"
    ;;
esac
unset nmbl_status
