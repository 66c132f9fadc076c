#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# dracut module nmbl-selftest, for the VM tests only: before the menu,
# ask both libnmbl (nmbl load) and kexec-tools (kexec -s -l) to load each
# kernel in the boot partition, and print what each said, so a test can
# check that nmbl accepts and refuses exactly what kexec_file_load through
# kexec-tools does; and listen on the second serial port for faults to
# inject into the menu (nmbl-fault.sh); and, when its command line asks,
# stall before the menu as a hang would (nmbl-stall.sh), for the watchdog;
# and seal a LUKS volume to the TPM while nmbl runs (nmbl-seal.sh).
# This image has a shell but not nmbl.shell: a failed menu must still
# bring the menu back, not the shell.
#
# Sourced by dracut: no set -eu here, dracut's own shell options rule.

check() {
    return 255
}

depends() {
    echo nmbl
}

install() {
    inst_multiple kexec sh mkdir mount umount sleep rm cryptsetup systemd-cryptenroll
    # What libcryptsetup and systemd open at run time for a TPM2 token.
    # (dracut does not follow what these link: libtss2-sys is esys's.)
    inst_libdir_file cryptsetup/libcryptsetup-token-systemd-tpm2.so libtss2-esys.so.0 \
        libtss2-sys.so.1 libtss2-rc.so.0 libtss2-mu.so.0 libtss2-tcti-device.so.0
    # shellcheck disable=SC2154 # dracut sets moddir before calling us
    inst_script "$moddir/nmbl-stall.sh" /usr/lib/nmbl/pre-menu.d/10-nmbl-stall
    inst_script "$moddir/nmbl-agree.sh" /usr/lib/nmbl/pre-menu.d/40-nmbl-agree
    inst_script "$moddir/nmbl-seal.sh" /usr/lib/nmbl/pre-menu.d/45-nmbl-seal
    inst_script "$moddir/nmbl-fault.sh" /usr/lib/nmbl/pre-menu.d/50-nmbl-fault
}
