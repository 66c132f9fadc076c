#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# dracut module nmbl-toolprobe, for the VM tests only: mdadm is the test's
# tool-probe (test/target/tool-probe.c), which tries from inside a disk
# tool's containment what a tool taken over by the disks' metadata would
# try, leaves a process behind, and then runs the real mdadm, installed
# beside it.  After module nmbl, which installs mdadm itself.
#
# Sourced by dracut: no set -eu here, dracut's own shell options rule.

check() {
    return 255
}

depends() {
    echo nmbl
}

install() {
    inst_binary "$(command -v mdadm)" /usr/sbin/mdadm.real
    # dracut installs no file over one it installed.
    # shellcheck disable=SC2154 # dracut sets initdir before calling us
    rm -f -- "${initdir:?}/usr/sbin/mdadm"
    inst_binary "$NMBL_TOOL_PROBE" /usr/sbin/mdadm
}
