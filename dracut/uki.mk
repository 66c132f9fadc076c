# The nmbl UKI (included by the top-level Makefile): Debian's kernel, the
# initramfs dracut makes with nmbl's module, signed as one.

# nmbl boots from Debian's kernel, unpacked (not installed) into the build.
KERNEL_TREE = $(BUILD)/kernel/tree
$(BUILD)/kernel/kver:
	@mkdir -p $(@D)
	test/fetch-kernel $(CACHE)/kernel $(KERNEL_TREE) > $@.tmp
	mv $@.tmp $@
KVER_OF = $$(cat $(BUILD)/kernel/kver)

# The signing key.  By default the test-only key that Debian's OVMF enrolls
# (tests only: never sign anything else with it).
OVMF_KEY ?= /usr/share/ovmf/PkKek-1-snakeoil.key
OVMF_CERT ?= /usr/share/ovmf/PkKek-1-snakeoil.pem
SIGN_KEY ?= $(BUILD)/keys/test.key
SIGN_CERT ?= $(BUILD)/keys/test.crt
$(BUILD)/keys/test.key:
	@mkdir -p $(@D)
	openssl rsa -in $(OVMF_KEY) -passin pass:snakeoil -out $@ 2>/dev/null
$(BUILD)/keys/test.crt:
	@mkdir -p $(@D)
	cp $(OVMF_CERT) $@

# The UKI's own command line: the last console= is where the menu shows.
# panic=30: a new nmbl whose kernel or initramfs panics reboots, and the
# firmware falls back to the nmbl before (the A/B slots, nmbl-init(8)),
# 30 s on, time enough to read or photograph the panic's reason.
NMBL_CMDLINE ?= console=tty0 console=ttyS0,115200 quiet panic=30
# NMBL_SHELL=1 makes a debug build: a shell in the image, and nmbl.shell on
# its signed command line, so that a failed menu offers it.  Never for a
# machine with Secure Boot: the default build has no shell at all.
NMBL_SHELL ?=
NMBL_DEBUG_CMDLINE = $(if $(filter 1,$(NMBL_SHELL)), nmbl.shell)
# How nmbl boots an entry of its own kernel: "direct" switches root when the
# entry allows it (see nmbl(8)), "kexec" always starts the kernel again.
NMBL_BOOT ?= direct
# NMBL_LVM=1 puts LVM's tool in the image, for a machine whose /boot is in
# an LVM volume (3.6 MiB more, which every start pays for; md RAID needs none).
NMBL_LVM ?=
UKI_STUB ?= /usr/lib/systemd/boot/efi/linuxx64.efi.stub
NMBL_MODULE = dracut/modules.d/97nmbl
# zstd by measurement.  With the modules compressed each on its own (see
# run-dracut), the image holds mostly programs; the same image compressed
# three ways (2 boots each, alternating, 256 MiB VM, nmbl's kernel start
# to its init): lz4 1.7 s (UKI 17.9 MiB), zstd 1.8 s (16.2 MiB), xz with
# its x86 filter 3.0 s (15.8 MiB).  Before the modules were compressed,
# lz4 was 0.4 s sooner than zstd, for a UKI 2.9 MiB larger.
NMBL_COMPRESS ?= zstd

# dracut for nmbl's kernel with nmbl's module (and the module dirs given).
NMBL_DRACUT = NMBL_SHELL=$(NMBL_SHELL) NMBL_LVM=$(NMBL_LVM) NMBL_MDADM=required NMBL_GRUB_EMU=$(abspath $(BUILD)/grub-emu) NMBL_BIN=$(abspath $(BUILD)/nmbl) \
	NMBL_CONSOLE=$(abspath $(BUILD)/nmbl-console) NMBL_INIT=$(abspath $(BUILD)/nmbl-init) \
	dracut/run-dracut $(KERNEL_TREE) $(KVER_OF)
NMBL_DRACUT_DEPS = $(wildcard $(NMBL_MODULE)/*) dracut/run-dracut $(BUILD)/grub-emu \
	$(BUILD)/nmbl $(BUILD)/nmbl-init $(BUILD)/nmbl-console $(BUILD)/kernel/kver dracut/uki.mk
# $(call MKUKI,KERNEL,INITRD,CMDLINE): the signed UKI $@ around them.
MKUKI = dracut/mkuki $(UKI_STUB) $(1) $(2) "$(3)" dracut/os-release dracut/sbat.csv $@ \
	$(SIGN_KEY) $(SIGN_CERT)
MKUKI_DEPS = dracut/mkuki dracut/os-release dracut/sbat.csv $(SIGN_KEY) $(SIGN_CERT)
NMBL_KERNEL = $(KERNEL_TREE)/boot/vmlinuz-$(KVER_OF)
NMBL_MKUKI_DEPS = $(MKUKI_DEPS) dracut/uki.mk

$(BUILD)/nmbl-initrd.img: $(NMBL_DRACUT_DEPS)
	$(NMBL_DRACUT) $@ $(NMBL_MODULE) -- --modules "nmbl" --compress $(NMBL_COMPRESS)

$(BUILD)/nmbl.efi: $(BUILD)/nmbl-initrd.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT)$(NMBL_DEBUG_CMDLINE))

# The image the firmware boots from the network (PXE, HTTP Boot): nmbl's,
# with network cards' drivers, dhcpcd, nmbl-fetch and the CA certificates
# (the dracut module's NMBL_NET=1).  A separate image: what a network boot
# needs would make every disk boot's image larger.
$(BUILD)/nmbl-net-initrd.img: $(NMBL_DRACUT_DEPS) $(BUILD)/nmbl-fetch
	NMBL_NET=1 NMBL_FETCH=$(abspath $(BUILD)/nmbl-fetch) $(NMBL_DRACUT) $@ $(NMBL_MODULE) -- \
		--modules "nmbl" --compress $(NMBL_COMPRESS)

$(BUILD)/nmbl-net.efi: $(BUILD)/nmbl-net-initrd.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT)$(NMBL_DEBUG_CMDLINE))

uki: $(BUILD)/nmbl.efi
net-uki: $(BUILD)/nmbl-net.efi
