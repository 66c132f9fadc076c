#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
#
# cmdline hook, sourced by dracut's init: no set -eu, no exit.
# Without panic=, a panic (say, the init of the target dying) would wait
# forever; -1 reboots at once, which ends a QEMU started with -no-reboot.

case " $(cat /proc/cmdline) " in
*" panic="*) ;;
*) echo -1 >/proc/sys/kernel/panic 2>/dev/null || : ;;
esac
