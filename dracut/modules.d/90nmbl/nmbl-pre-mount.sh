#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# pre-mount hook, sourced by dracut's init once the devices have settled.
# The menu only returns when the user left it or it could not start; a
# boot that worked never comes back here.
/usr/libexec/nmbl/nmbl-menu
warn "nmbl: the boot menu ended; rebooting"
echo b >/proc/sysrq-trigger
