#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# dracut module "nmbl": the initramfs of the nmbl UKI.  It starts the GRUB
# menu (grub-emu patched to boot through libnmbl) on the console, reading
# the machine's own grub.cfg, and kexecs the kernel chosen there.
#
# Sourced by dracut: no set -eu here, dracut's own shell options rule.

# Only when asked for: this module turns an initramfs into a boot loader.
check() {
    return 255
}

depends() {
    echo base
}

# What the menu needs to see disks and read the ESP and /boot.  Whatever
# the firmware found the UKI on, Linux must find too.  And the keyboard:
# PS/2 is built into distribution kernels, USB keyboards need their host
# controller and HID drivers.
installkernel() {
    hostonly='' instmods \
        virtio_pci virtio_blk virtio_scsi sd_mod ahci nvme \
        xhci_pci usb_storage uas mmc_block sdhci_pci \
        ext4 vfat nls_cp437 nls_ascii nls_utf8 btrfs xfs efivarfs \
        ehci_pci ohci_pci uhci_hcd usbhid hid_generic
}

install() {
    # The build names the binaries it made; an installed nmbl has them in
    # /usr/libexec/nmbl.
    local grub_emu=${NMBL_GRUB_EMU:-/usr/libexec/nmbl/grub-emu}
    local nmbl=${NMBL_BIN:-/usr/bin/nmbl}
    local console=${NMBL_CONSOLE:-/usr/libexec/nmbl/nmbl-console}

    inst_binary "$grub_emu" /usr/libexec/nmbl/grub-emu
    inst_binary "$nmbl" /usr/bin/nmbl
    inst_binary "$console" /usr/libexec/nmbl/nmbl-console
    # shellcheck disable=SC2154 # dracut sets moddir before calling us
    inst_script "$moddir/nmbl-menu.sh" /usr/libexec/nmbl/nmbl-menu
    inst_simple "$moddir/grub.cfg" /usr/share/nmbl/grub/grub.cfg
    inst_multiple udevadm
    inst_hook cmdline 90 "$moddir/nmbl-cmdline.sh"
    inst_hook pre-mount 50 "$moddir/nmbl-pre-mount.sh"
    drop_unused_rules
}

# dracut's udev-rules module, installed before this one (hence 97), brings
# rules for user seats and network links.  The menu has neither logged-in
# users nor a network.  71-seat.rules alone pulls in loginctl, and with it
# systemd's shared library and its crypto, PAM, seccomp, audit and iptables
# libraries: a quarter of the initramfs's libraries by size, for nothing.
# dracut resolves libraries once every module is installed, so what is
# removed here never brings them.
drop_unused_rules() {
    local rules=${udevrulesdir:-/usr/lib/udev/rules.d} rule
    for rule in 70-uaccess 71-seat 73-seat-late 75-net-description 80-net-setup-link; do
        rm -f -- "${initdir:?}$rules/$rule.rules"
    done
    rm -f -- "${initdir:?}/usr/bin/loginctl" "${initdir:?}/bin/loginctl"
}
