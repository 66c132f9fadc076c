#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
#
# dracut module "nmbl": the initramfs of the nmbl UKI.  Its process 1 is
# nmbl-init, not dracut's shell init: it loads the drivers, starts the GRUB
# menu (grub-emu patched to boot through libnmbl) on the consoles, reading
# the machine's own grub.cfg, and switches root for a direct boot.  dracut
# builds the image: the kernel modules with their dependencies and
# firmware, the programs with their libraries.  Built alone
# (--modules nmbl): dracut's base module would bring its own /init.
#
# Sourced by dracut: no set -eu here, dracut's own shell options rule.

# Only when asked for: this module turns an initramfs into a boot loader.
check() {
    return 255
}

depends() {
    return 0
}

# What the menu needs to see disks and read the ESP and /boot.  Whatever
# the firmware found the UKI on, Linux must find too: virtio (blk, scsi),
# AHCI, NVMe (and vmd, the Intel controller many laptops hide their NVMe
# behind), USB sticks (xHCI, the storage and UAS drivers), SD and eMMC
# (on PCI or ACPI), and the disks of Hyper-V and VMware virtual machines.
# The partition tables (GPT, MBR) are built into distribution kernels.
# And the keyboard: PS/2 is built into distribution kernels, USB keyboards
# need their host controller and HID drivers, Hyper-V's its own.  The
# screen is the firmware's framebuffer (efifb, built in): no GPU driver,
# which would take the screen over and bring megabytes of firmware.  And
# the watchdogs that reset a machine whose
# nmbl hangs before its menu: QEMU's i6300esb; Intel's TCO (iTCO_wdt, on
# the platform device that lpc_ich or, on newer chipsets, i2c_i801
# makes), AMD's (sp5100_tco), and the ACPI WDAT table's (wdat_wdt).  And
# the TPM nmbl measures into: CRB (firmware TPMs, QEMU's tpm-crb) and TIS
# (discrete chips on LPC or SPI); a TPM the firmware announces and Linux
# cannot reach refuses every boot.  And md RAID 1, for a /boot on a
# mirror (installers put /boot on no other level), and device-mapper in
# an image that activates LVM (NMBL_LVM=1, below).
installkernel() {
    hostonly='' instmods \
        virtio_pci virtio_blk virtio_scsi sd_mod ahci nvme vmd \
        xhci_pci usb_storage uas mmc_block sdhci_pci sdhci_acpi \
        hv_storvsc vmw_pvscsi \
        ext4 vfat nls_cp437 nls_ascii nls_utf8 btrfs xfs efivarfs \
        ehci_pci ohci_pci uhci_hcd usbhid hid_generic hyperv_keyboard \
        i6300esb iTCO_wdt lpc_ich i2c_i801 sp5100_tco wdat_wdt \
        tpm_crb tpm_tis tpm_tis_spi \
        md_mod raid1
    if [ "${NMBL_LVM:-}" = 1 ]; then
        hostonly='' instmods dm_mod
    fi
    # An image for network boots (NMBL_NET=1): the network cards that
    # firmware PXE- and HTTP-boots from, in machines and VMs (virtio,
    # Intel's, Realtek's, Broadcom's, Aquantia's, Hyper-V's, VMware's, USB
    # dongles), and VLAN tagging.  Mellanox's and Intel's 100G drivers are
    # left out: megabytes each, for machines that boot from disks.
    if [ "${NMBL_NET:-}" = 1 ]; then
        hostonly='' instmods \
            virtio_net e1000 e1000e igb igc ixgbe i40e r8169 tg3 bnxt_en atlantic \
            hv_netvsc vmxnet3 usbnet cdc_ether cdc_ncm r8152 ax88179_178a 8021q
    fi
}

install() {
    # The build names the binaries it made; an installed nmbl has them
    # where make install put them (it rewrites these two lines).
    local libexecdir=/usr/libexec/nmbl
    local bindir=/usr/bin
    local grub_emu=${NMBL_GRUB_EMU:-$libexecdir/grub-emu}
    local nmbl=${NMBL_BIN:-$bindir/nmbl}
    local console=${NMBL_CONSOLE:-$libexecdir/nmbl-console}
    local init=${NMBL_INIT:-$libexecdir/nmbl-init}

    inst_binary "$init" /init
    inst_binary "$grub_emu" /usr/libexec/nmbl/grub-emu
    inst_binary "$nmbl" /usr/bin/nmbl
    inst_binary "$console" /usr/libexec/nmbl/nmbl-console
    inst_simple "$moddir/grub.cfg" /usr/share/nmbl/grub/grub.cfg
    inst_dir /usr/lib/nmbl/pre-menu.d
    # The distribution's own tools assemble md arrays (and, in an image
    # built with NMBL_LVM=1, activate LVM volumes) for the menu, with
    # nmbl's configuration: read-only, no udev.  LVM's tool is left out
    # unless asked for: with the libraries it needs it would make every
    # nmbl image 3.6 MiB larger, which every start pays for.
    # mdadm is in every image nmbl's build makes (NMBL_MDADM=required);
    # an image a machine builds for itself goes without when the machine
    # has none, and so no md array to read /boot from.
    local mdadm
    mdadm=$(command -v mdadm || :)
    if [ -n "$mdadm" ]; then
        inst_binary "$mdadm" /usr/sbin/mdadm
        inst_simple "$moddir/mdadm.conf" /etc/mdadm/mdadm.conf
    elif [ "${NMBL_MDADM:-}" = required ]; then
        derror "nmbl: mdadm not found"
        return 1
    fi
    if [ "${NMBL_LVM:-}" = 1 ]; then
        inst_binary "$(command -v lvm)" /usr/sbin/lvm
        inst_simple "$moddir/lvm.conf" /etc/lvm/lvm.conf
    fi
    # A network boot's tools: the DHCP client (dhcpcd, which nmbl-init
    # runs as a user of its own with the network's capabilities only; no
    # dhcpcd user in the image, so that dhcpcd does not start its own
    # privilege separation), nmbl-fetch (libcurl: TFTP, HTTP, HTTPS) and
    # the certificates HTTPS servers are checked against, signed with the
    # rest of the image.
    if [ "${NMBL_NET:-}" = 1 ]; then
        local fetch=${NMBL_FETCH:-$libexecdir/nmbl-fetch}
        inst_binary "$fetch" /usr/libexec/nmbl/nmbl-fetch
        inst_binary "$(command -v dhcpcd)" /usr/sbin/dhcpcd
        inst_simple "$moddir/dhcpcd.conf" /etc/nmbl/dhcpcd.conf
        local ca=${NMBL_CA_FILE:-} bundle
        # The distribution's bundle: Debian's, Fedora's and RHEL's, SUSE's.
        for bundle in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt \
            /etc/ssl/ca-bundle.pem; do
            [ -n "$ca" ] || [ ! -f "$bundle" ] || ca=$bundle
        done
        if [ -z "$ca" ]; then
            derror "nmbl: no certificate authorities for HTTPS (NMBL_CA_FILE names them)"
            return 1
        fi
        inst_simple "$ca" /usr/share/nmbl/ca-certificates.crt
        inst_dir /var/lib/dhcpcd
        inst_dir /usr/lib/dhcpcd
    fi
    # A shell only in a debug build (NMBL_SHELL=1, which also puts
    # nmbl.shell on the UKI's signed command line): under Secure Boot a
    # root shell here is more than GRUB ever gives a console user.
    if [ "${NMBL_SHELL:-}" = 1 ]; then
        inst_multiple -o sh ls cat mount umount dmesg
    fi
    # The mount points of the moved file systems and the entry's root.
    inst_dir /sysroot
}
