#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# dracut module nmbl-target, for the VM tests' target initramfs only.
#
# The marker initrds (mkmarker-initrd) that the loader appends land in the
# initramfs as /nmbl-initrd-marker/NAME, which switch_root discards; a hook
# copies them to /run, which dracut moves into the new root, so the
# target's init can report every initrd that arrived.
#
# A test must end, never hang: a second hook makes a kernel panic reboot
# (QEMU -no-reboot then exits) unless the command line sets panic=.
#
# Sourced by dracut: no set -eu here, dracut's own shell options rule.

# Only when named with -m/--add: a test module has no place in a real image.
check() {
    return 255
}

depends() {
    echo base
}

install() {
    # shellcheck disable=SC2154 # dracut sets moddir before calling us
    inst_hook cmdline 00 "$moddir/reboot-on-panic.sh"
    inst_hook pre-pivot 50 "$moddir/copy-initrd-markers.sh"
}
