#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# dracut module "nmbl-handover": for the initramfs of a system that nmbl
# boots.  Booting it by kexec, nmbl appends its measurement logs to the
# initrds, below /.extra/nmbl/ (tpm2-measure.log, tpm2-event-log.bin,
# ima-binary-runtime-measurements); switching root would discard them.
# The hook copies them to /run/log/nmbl/, which the system keeps, and
# where a system nmbl booted directly finds its event log too.
#
# Sourced by dracut: no set -eu here, dracut's own shell options rule.

# In every image: nothing happens where nmbl handed nothing over.
check() {
    return 0
}

depends() {
    return 0
}

install() {
    # shellcheck disable=SC2154 # dracut sets moddir before calling us
    inst_hook pre-pivot 10 "$moddir/nmbl-handover.sh"
}
