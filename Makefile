# nmbl - one entry point for building, testing and demonstrating.
#
#   make            libnmbl, the nmbl command and the patched grub-emu
#   make uki        the signed nmbl UKI (SIGN_KEY/SIGN_CERT, test key by default)
#   make check      every test (installs its dependencies first)
#   make install    libnmbl, nmbl, the dracut module, grub-emu, the units (DESTDIR,
#                   PREFIX, LIBDIR, ...; make uninstall undoes it)
#   make install-uki  the signed UKI under $(PREFIX)/lib/nmbl/<kernel version>/
#   make dist       the source tarball nmbl-$(VERSION).tar.gz
#   make demo       boot the real Debian test machine through nmbl on this terminal
#   make demo-plain the faster demo: a plain grub.cfg and a target that powers off
#
# Everything built lands in $(BUILD); downloads are kept in $(CACHE).

BUILD ?= build
CACHE ?= $(BUILD)/cache
CC ?= cc
CFLAGS ?= -O2 -g
# CI and 'make check' build with warnings as errors.
WERROR ?= -Werror
VERSION = 0.1
NMBL_CFLAGS = -DNMBL_VERSION='"$(VERSION)"' -std=gnu11 -Wall -Wextra $(WERROR) -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -fvisibility=hidden -D_GNU_SOURCE \
	-Inmbl-loader/libnmbl -Inmbl-loader/shared
OVMF_DIR ?= /usr/share/OVMF

GRUB_VERSION = 2.12
GRUB_SHA256 = f3c97391f7c4eaa677a78e090c7e97e6dc47b16f655f04683ebd37bef7fe0faa
# Point this at your own copy of the release tarball to skip the download.
GRUB_TARBALL ?= $(CACHE)/grub2_$(GRUB_VERSION).orig.tar.xz
GRUB_PATCHES = $(sort $(wildcard grub-emu-patches/*.patch))
GRUB_SRC = $(BUILD)/grub/grub-$(GRUB_VERSION)
GRUB_OBJ = $(BUILD)/grub/obj

# Packages (Debian 12 names) that building and testing need.
DEPS = build-essential gawk bison flex gettext autoconf automake autopoint \
	pkg-config python3 patch xz-utils libssl-dev libkmod-dev libblkid-dev zstd lz4 cpio kmod binutils openssl \
	dracut-core systemd-boot-efi sbsigntool ovmf qemu-system-x86 mtools \
	dosfstools e2fsprogs btrfs-progs fdisk kexec-tools efitools shellcheck grub-common \
	grub-efi-amd64-bin rpm osslsigncode mmdebstrap qemu-utils \
	virtinst libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients

LIB_SRCS = authenticode.c bli.c bootnext.c cmdline.c ctx.c direct.c efivar.c firmware.c identity.c image.c kexec.c loadopt.c lockdown.c modules.c mount.c pe.c sign.c slots.c strerror.c switch-root.c sys.c uevent.c utf16.c watchdog.c
LIBS_NMBL = -lcrypto -lkmod -lblkid
LIB_OBJS = $(LIB_SRCS:%.c=$(BUILD)/nmbl-loader/libnmbl/%.o)

all: $(BUILD)/libnmbl.a $(BUILD)/libnmbl.so.1 $(BUILD)/nmbl $(BUILD)/nmbl-init $(BUILD)/nmbl-console \
	$(BUILD)/grub-emu

.PHONY: all deps check bench demo demo-plain uki fuzz clean distclean
# Objects made on the way are kept: a second make must have nothing to do.
.SECONDARY:

# --- libnmbl and the nmbl command -----------------------------------------

$(BUILD)/nmbl-loader/%.o: nmbl-loader/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(NMBL_CFLAGS) -fPIC -MMD -MP -c -o $@ $<

$(BUILD)/libnmbl.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/libnmbl.so.1: $(LIB_OBJS) nmbl-loader/libnmbl/libnmbl.sym
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libnmbl.so.1 \
		-Wl,--version-script=nmbl-loader/libnmbl/libnmbl.sym -o $@ $(LIB_OBJS) $(LIBS_NMBL)

# Linked statically so the initramfs needs no extra library.
$(BUILD)/nmbl: $(BUILD)/nmbl-loader/tools/nmbl.o $(BUILD)/libnmbl.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_NMBL)

# Process 1 of nmbl's initramfs.
$(BUILD)/nmbl-init: $(BUILD)/nmbl-loader/tools/nmbl-init.o $(BUILD)/libnmbl.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_NMBL)

$(BUILD)/nmbl-console: $(BUILD)/nmbl-loader/tools/nmbl-console.o
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^

-include $(wildcard $(BUILD)/nmbl-loader/*/*.d)

# --- unit tests: libnmbl with the seam faked, under ASan and UBSan -----------

SANITIZE ?= -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
UNIT_TESTS = $(patsubst test/unit/test-%.c,$(BUILD)/unit/test-%,$(wildcard test/unit/test-*.c))
UNIT_OBJS = $(patsubst %.c,$(BUILD)/unit/obj/%.o,$(filter-out sys.c,$(LIB_SRCS))) \
	$(BUILD)/unit/obj/fake-sys.o $(BUILD)/unit/obj/fixture.o

$(BUILD)/unit/obj/%.o: nmbl-loader/libnmbl/%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g $(NMBL_CFLAGS) $(SANITIZE) -MMD -MP -c -o $@ $<
$(BUILD)/unit/obj/%.o: test/unit/%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g $(NMBL_CFLAGS) $(SANITIZE) -Itest/unit \
		-DCORPUS='"$(abspath test/fuzz/corpus/pe)"' \
		-DKERNEL_MODULES="\"$(abspath $(KERNEL_TREE))/lib/modules/$(KVER_OF)/kernel\"" \
		-MMD -MP -c -o $@ $<
# The module tests copy modules of the kernel the build unpacked; the
# firmware check reads its vmlinuz, which Debian signed.
$(BUILD)/unit/obj/test-modules.o $(BUILD)/unit/obj/test-authenticode.o: $(BUILD)/kernel/kver
# It reads shim and GRUB as Microsoft and Debian signed them too, unpacked,
# not installed (shim-signed's maintainer script runs grub-install).
SIGNED_TREE = $(BUILD)/signed/tree
$(BUILD)/signed/stamp: test/fetch-deb
	test/fetch-deb $(CACHE)/signed $(SIGNED_TREE) shim-signed grub-efi-amd64-signed
	touch $@
$(BUILD)/unit/obj/test-authenticode.o: $(BUILD)/signed/stamp
$(BUILD)/unit/obj/test-authenticode.o: NMBL_CFLAGS += -DSIGNED_TREE='"$(abspath $(SIGNED_TREE))"'
$(BUILD)/unit/test-%: $(BUILD)/unit/obj/test-%.o $(UNIT_OBJS)
	$(CC) $(SANITIZE) -o $@ $^ $(LIBS_NMBL)

-include $(wildcard $(BUILD)/unit/obj/*.d)

# Each fuzzer's corpus is replayed by "make check", under the same sanitizers.
FUZZERS = pe authenticode sigdb fwcheck loadopt bls cmdline uevent
UNIT_TESTS += $(FUZZERS:%=$(BUILD)/unit/test-fuzz-%)
$(BUILD)/unit/obj/fuzz-%.o: test/fuzz/fuzz-%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g $(NMBL_CFLAGS) $(SANITIZE) -MMD -MP -c -o $@ $<
# blscfg's parser is GRUB code (patch 0006), built on a shim of GRUB's
# interfaces from the patched tree.
BLS_FUZZ_FLAGS = -Itest/fuzz/grub-shim -DBLSCFG_C='"$(abspath $(GRUB_SRC))/grub-core/commands/blscfg.c"'
$(BUILD)/unit/obj/fuzz-bls.o: test/fuzz/fuzz-bls.c $(GRUB_SRC)/.patched $(wildcard test/fuzz/grub-shim/*.h)
	@mkdir -p $(@D)
	$(CC) -O1 -g $(NMBL_CFLAGS) $(SANITIZE) $(BLS_FUZZ_FLAGS) -MMD -MP -c -o $@ $<
$(BUILD)/unit/obj/replay-%.o: test/fuzz/replay.c
	@mkdir -p $(@D)
	$(CC) -O1 -g $(NMBL_CFLAGS) $(SANITIZE) -DCORPUS='"$(abspath test/fuzz/corpus/$*)"' -c -o $@ $<
$(BUILD)/unit/test-fuzz-%: $(BUILD)/unit/obj/fuzz-%.o $(BUILD)/unit/obj/replay-%.o $(UNIT_OBJS)
	$(CC) $(SANITIZE) -o $@ $^ $(LIBS_NMBL)

# libFuzzer proper, for a bounded time per fuzzer (FUZZ_SECONDS), with clang.
FUZZ_SECONDS ?= 60
fuzz: $(GRUB_SRC)/.patched
	command -v clang >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang
	@mkdir -p $(BUILD)/fuzz
	set -e; for f in $(FUZZERS); do \
		clang -O1 -g $(NMBL_CFLAGS) -fsanitize=fuzzer,address,undefined \
			-o $(BUILD)/fuzz/fuzz-$$f test/fuzz/fuzz-$$f.c \
			$(patsubst %,nmbl-loader/libnmbl/%,$(filter-out sys.c,$(LIB_SRCS))) \
			test/unit/fake-sys.c test/unit/fixture.c -Itest/unit $(BLS_FUZZ_FLAGS) \
			$(LIBS_NMBL); \
		mkdir -p $(BUILD)/fuzz/corpus-$$f; \
		$(BUILD)/fuzz/fuzz-$$f -max_total_time=$(FUZZ_SECONDS) \
			-artifact_prefix=$(BUILD)/fuzz/$$f- \
			$(BUILD)/fuzz/corpus-$$f test/fuzz/corpus/$$f; \
	done

# --- patched grub-emu --------------------------------------------------------

$(GRUB_TARBALL):
	grub-emu-patches/fetch-grub $(CACHE) $(GRUB_VERSION) $(GRUB_SHA256)

# The release tarball lacks grub-core/extra_deps.lst (a 2.12 defect).
$(GRUB_SRC)/.patched: $(GRUB_TARBALL) $(GRUB_PATCHES)
	echo "$(GRUB_SHA256)  $(GRUB_TARBALL)" | sha256sum -c --quiet
	rm -rf $(BUILD)/grub
	mkdir -p $(BUILD)/grub
	tar -C $(BUILD)/grub -xJf $(GRUB_TARBALL)
	echo 'depends bli part_gpt' > $(GRUB_SRC)/grub-core/extra_deps.lst
	set -e; for p in $(abspath $(GRUB_PATCHES)); do \
		patch -d $(GRUB_SRC) -p1 --quiet --no-backup-if-mismatch < $$p; \
	done
	# The patches add modules: regenerate GRUB's makefiles from its lists.
	cd $(GRUB_SRC) && PYTHON=python3 ./autogen.sh >/dev/null
	touch $@

$(GRUB_OBJ)/config.status: $(GRUB_SRC)/.patched
	mkdir -p $(GRUB_OBJ)
	cd $(GRUB_OBJ) && $(abspath $(GRUB_SRC))/configure -q \
		--with-platform=emu --target=x86_64 --disable-nls \
		--disable-grub-emu-sdl --disable-grub-emu-pci \
		--disable-grub-mkfont --disable-grub-themes AWK=gawk \
		TARGET_CPPFLAGS="-I$(abspath nmbl-loader/libnmbl)"

# Only grub-emu is needed, not GRUB's utilities: build just its inputs.
# libnmbl is linked in through LIBS, which GRUB's makefiles do not track;
# the emu linux module is a partial link that takes libnmbl in too, so both
# are removed whenever libnmbl changes.  libnmbl's own libraries go in
# LIBUTIL, which only the final link uses: a partial link would copy them
# in statically, next to GRUB's own crypto.  GRUB links with
# --build-id=none, right for firmware images; grub-emu is a Linux program
# whose debug information packages find by its build id (the last
# --build-id given wins).
$(BUILD)/grub-emu: $(GRUB_OBJ)/config.status $(BUILD)/libnmbl.a
	$(MAKE) -C $(GRUB_OBJ)/grub-core/lib/gnulib
	# Generated headers first: only GRUB's "all" would make them in order.
	printf 'nmbl-built-sources: $$(BUILT_SOURCES)\n' | \
		$(MAKE) -C $(GRUB_OBJ)/grub-core -f Makefile -f - nmbl-built-sources
	rm -f $(GRUB_OBJ)/grub-core/grub-emu $(GRUB_OBJ)/grub-core/linux.module
	$(MAKE) -C $(GRUB_OBJ)/grub-core grub-emu \
		LIBS="$(abspath $(BUILD)/libnmbl.a)" LIBUTIL="$(LIBS_NMBL) -Wl,--build-id"
	cp $(GRUB_OBJ)/grub-core/grub-emu $@

# --- the nmbl UKI ---------------------------------------------------------------

# nmbl boots from Debian's kernel, unpacked (not installed) into the build.
KERNEL_TREE = $(BUILD)/kernel/tree
$(BUILD)/kernel/kver:
	@mkdir -p $(@D)
	test/fetch-kernel $(CACHE)/kernel $(KERNEL_TREE) > $@.tmp
	mv $@.tmp $@
KVER_OF = $$(cat $(BUILD)/kernel/kver)

# Another kernel than nmbl's for the tests (Debian's cloud flavour, the same
# source built again): nmbl must kexec it, never switch root to it.
OTHER_TREE = $(BUILD)/kernel-other/tree
$(BUILD)/kernel-other/kver:
	@mkdir -p $(@D)
	test/fetch-kernel $(CACHE)/kernel $(OTHER_TREE) linux-image-cloud-amd64 > $@.tmp
	mv $@.tmp $@

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
UKI_STUB ?= /usr/lib/systemd/boot/efi/linuxx64.efi.stub
NMBL_MODULE = dracut/modules.d/97nmbl
# lz4 by measurement.  With dracut's init (5 boots each, alternating, as make
# bench does) nmbl's menu came 3.4 s sooner than with zstd (median 11.8 s
# against 15.1 s); with nmbl-init's smaller image (3 boots each, alternating)
# 0.4 s sooner (3.3 s against 3.7 s, sooner in each pair), for a UKI 2.9 MiB
# larger (19.2 against 16.3 MiB).  NMBL_COMPRESS=zstd for a small ESP.
NMBL_COMPRESS ?= lz4

# dracut for nmbl's kernel with nmbl's module (and the module dirs given).
NMBL_DRACUT = NMBL_SHELL=$(NMBL_SHELL) NMBL_GRUB_EMU=$(abspath $(BUILD)/grub-emu) NMBL_BIN=$(abspath $(BUILD)/nmbl) \
	NMBL_CONSOLE=$(abspath $(BUILD)/nmbl-console) NMBL_INIT=$(abspath $(BUILD)/nmbl-init) \
	dracut/run-dracut $(KERNEL_TREE) $(KVER_OF)
NMBL_DRACUT_DEPS = $(wildcard $(NMBL_MODULE)/*) dracut/run-dracut $(BUILD)/grub-emu \
	$(BUILD)/nmbl $(BUILD)/nmbl-init $(BUILD)/nmbl-console $(BUILD)/kernel/kver Makefile
# $(call MKUKI,KERNEL,INITRD,CMDLINE): the signed UKI $@ around them.
MKUKI = dracut/mkuki $(UKI_STUB) $(1) $(2) "$(3)" dracut/os-release dracut/sbat.csv $@ \
	$(SIGN_KEY) $(SIGN_CERT)
MKUKI_DEPS = dracut/mkuki dracut/os-release dracut/sbat.csv $(SIGN_KEY) $(SIGN_CERT)
NMBL_KERNEL = $(KERNEL_TREE)/boot/vmlinuz-$(KVER_OF)
NMBL_MKUKI_DEPS = $(MKUKI_DEPS) Makefile

$(BUILD)/nmbl-initrd.img: $(NMBL_DRACUT_DEPS)
	$(NMBL_DRACUT) $@ $(NMBL_MODULE) -- --modules "nmbl" --compress $(NMBL_COMPRESS)

$(BUILD)/nmbl.efi: $(BUILD)/nmbl-initrd.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT)$(NMBL_DEBUG_CMDLINE))

uki: $(BUILD)/nmbl.efi

# --- what the VM tests boot into -------------------------------------------

T = $(BUILD)/test
$(T)/target-init: test/target/init.c
	@mkdir -p $(@D)
	$(CC) -static -Os -Wall -Wextra $(WERROR) -o $@ $<

$(T)/target-root/sbin/init: $(T)/target-init test/target/mkroot $(BUILD)/nmbl
	rm -rf $(T)/target-root
	test/target/mkroot $(T)/target-root $< $(BUILD)/nmbl

$(T)/target-initrd.img: test/target/mkinitrd $(wildcard test/target/dracut/*/*) $(BUILD)/kernel/kver
	@mkdir -p $(@D)
	test/target/mkinitrd $(KERNEL_TREE) $(KVER_OF) $@

# The target kernel signed by the test key (trusted through db), and
# Debian's own signed kernel, which the test firmware does not trust.
$(T)/vmlinuz-test: $(BUILD)/kernel/kver test/target/resign-kernel $(SIGN_KEY) $(SIGN_CERT)
	@mkdir -p $(@D)
	test/target/resign-kernel $(KERNEL_TREE)/boot/vmlinuz-$(KVER_OF) $(SIGN_KEY) $(SIGN_CERT) $@

$(T)/vmlinuz-other: $(BUILD)/kernel-other/kver test/target/resign-kernel $(SIGN_KEY) $(SIGN_CERT)
	@mkdir -p $(@D)
	test/target/resign-kernel $(OTHER_TREE)/boot/vmlinuz-$$(cat $<) $(SIGN_KEY) $(SIGN_CERT) $@
$(T)/other-initrd.img: test/target/mkinitrd $(wildcard test/target/dracut/*/*) $(BUILD)/kernel-other/kver
	@mkdir -p $(@D)
	test/target/mkinitrd $(OTHER_TREE) $$(cat $(BUILD)/kernel-other/kver) $@

# nmbl told to kexec always, on its own command line.
$(T)/nmbl-kexec.efi: $(BUILD)/nmbl-initrd.img $(NMBL_MKUKI_DEPS)
	@mkdir -p $(@D)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=kexec)

# A new nmbl UKI the firmware must refuse, for the A/B slots' tests: its
# signature removed.
$(T)/nmbl-unsigned.efi: $(T)/nmbl-kexec.efi
	cp $< $@.tmp
	sbattach --remove $@.tmp
	mv $@.tmp $@

# Kernels that must be refused, each for its own reason.
$(T)/vmlinuz-unsigned: $(BUILD)/kernel/kver test/target/unsign-kernel
	@mkdir -p $(@D)
	test/target/unsign-kernel $(KERNEL_TREE)/boot/vmlinuz-$(KVER_OF) $@
$(T)/vmlinuz-truncated: $(T)/vmlinuz-test
	head -c $$(( $$(stat -c %s $<) / 2 )) $< > $@

# More initrds for an entry to list after the target's own.
$(T)/marker.img: test/target/mkmarker-initrd
	@mkdir -p $(@D)
	test/target/mkmarker-initrd second-initrd $@
$(T)/marker3.img: test/target/mkmarker-initrd
	@mkdir -p $(@D)
	test/target/mkmarker-initrd third-initrd $@

# The target as a UKI, its own kernel signed inside: what a BLS type 2 entry
# or a linux line naming a .efi boots.
TARGET_UKI_CMDLINE = root=UUID=$(TEST_ROOT_UUID) ro console=ttyS0,115200 nmbl.entry=uki
TEST_ROOT_UUID = 7a46e7a1-0d5c-4a8b-8d1e-2007f5007f50
$(T)/target-uki.efi: $(T)/vmlinuz-test $(T)/target-initrd.img $(MKUKI_DEPS)
	$(call MKUKI,$(T)/vmlinuz-test,$(T)/target-initrd.img,$(TARGET_UKI_CMDLINE))

# A UKI signed for the firmware around a kernel that is not: kexec checks
# the kernel, so under lockdown nmbl must refuse it.
$(T)/target-uki-unsigned.efi: $(T)/vmlinuz-unsigned $(T)/marker.img $(MKUKI_DEPS)
	$(call MKUKI,$(T)/vmlinuz-unsigned,$(T)/marker.img,$(TARGET_UKI_CMDLINE))

# An EFI program for chainloader to start, signed for the test firmware.
EFITOOLS_DIR ?= /usr/lib/efitools/x86_64-linux-gnu
$(T)/HelloWorld.efi: $(SIGN_KEY) $(SIGN_CERT)
	@mkdir -p $(@D)
	sbsign --key $(SIGN_KEY) --cert $(SIGN_CERT) --output $@ $(EFITOOLS_DIR)/HelloWorld.efi

# What the benchmark compares nmbl with, on the entry it boots (see
# test/bench): the target's own UKI, started by the firmware with no menu,
# and GRUB's EFI image as a distribution builds it, from Debian's
# grub-efi-amd64-bin with Debian's module list, reading the same grub.cfg.
BENCH_CMDLINE = root=UUID=$(TEST_ROOT_UUID) ro console=tty0 console=ttyS0,115200 quiet
$(T)/floor.efi: $(T)/vmlinuz-test $(T)/target-initrd.img $(MKUKI_DEPS)
	$(call MKUKI,$(T)/vmlinuz-test,$(T)/target-initrd.img,$(BENCH_CMDLINE))
# The kexec floor: the target's kernel again, whose initramfs is one program
# that kexecs the entry (kernel, initrd, command line inside it) at once.
$(T)/kexec-floor-init: test/bench/kexec-floor.c
	@mkdir -p $(@D)
	$(CC) -static -Os -Wall -Wextra $(WERROR) -o $@ $<
$(T)/kexec-floor.img: $(T)/kexec-floor-init $(T)/vmlinuz-test $(T)/target-initrd.img
	rm -rf $@.d && mkdir -p $@.d/entry
	cp $(T)/kexec-floor-init $@.d/init
	cp $(T)/vmlinuz-test $@.d/entry/vmlinuz
	cp $(T)/target-initrd.img $@.d/entry/initrd.img
	printf '%s\n' "$(BENCH_CMDLINE)" >$@.d/entry/cmdline
	cd $@.d && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet >$(abspath $@)
	rm -rf $@.d
$(T)/kexec-floor.efi: $(T)/vmlinuz-test $(T)/kexec-floor.img $(MKUKI_DEPS)
	$(call MKUKI,$(T)/vmlinuz-test,$(T)/kexec-floor.img,$(NMBL_CMDLINE))
GRUB_EFI_DIR ?= /usr/lib/grub/x86_64-efi
$(T)/grubx64.efi: test/bench/grub-modules test/bench/grub-bootstrap.cfg
	@mkdir -p $(@D)
	grub-mkstandalone -O x86_64-efi -d $(GRUB_EFI_DIR) \
		--modules="$$(cat test/bench/grub-modules)" \
		--install-modules="$$(cat test/bench/grub-modules)" \
		--locales= --fonts= --themes= -o $@ \
		"boot/grub/grub.cfg=test/bench/grub-bootstrap.cfg"

# nmbl with the VM tests' self-check: libnmbl and kexec-tools asked the same.
SELFTEST_MODULE = test/dracut/90nmbl-selftest
$(T)/nmbl-selftest-initrd.img: $(NMBL_DRACUT_DEPS) $(wildcard $(SELFTEST_MODULE)/*)
	@mkdir -p $(@D)
	$(NMBL_DRACUT) $@ $(NMBL_MODULE) $(SELFTEST_MODULE) -- \
		--modules "nmbl nmbl-selftest" --compress $(NMBL_COMPRESS)
$(T)/nmbl-selftest.efi: $(T)/nmbl-selftest-initrd.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE))

TEST_FIXTURES = $(BUILD)/nmbl.efi $(T)/nmbl-selftest.efi $(T)/target-root/sbin/init $(T)/target-initrd.img \
	$(T)/vmlinuz-test $(T)/marker.img $(T)/marker3.img $(T)/vmlinuz-unsigned \
	$(T)/vmlinuz-truncated $(T)/target-uki.efi $(T)/target-uki-unsigned.efi $(T)/HelloWorld.efi \
	$(T)/vmlinuz-other $(T)/other-initrd.img $(T)/nmbl-kexec.efi $(T)/nmbl-unsigned.efi \
	$(T)/floor.efi $(T)/kexec-floor.efi $(T)/grubx64.efi

# The watchdog's tests (test/boot/test_watchdog.py): nmbl whose watchdog
# fires sooner than its menu's countdown ends, healthy; the self-test image
# stalling before its menu for longer than its watchdog allows, as a hang
# would; and nmbl's kernel with an initramfs that has no init, which
# panics: the panic= of NMBL_CMDLINE must reboot it.
$(T)/nmbl-watchdog.efi: $(BUILD)/nmbl-initrd.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT) nmbl.watchdog=20)
$(T)/nmbl-stall.efi: $(T)/nmbl-selftest-initrd.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.watchdog=10 nmbl.selftest.stall=30)
$(T)/nmbl-noinit.efi: $(T)/marker.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE))
TEST_FIXTURES += $(T)/nmbl-watchdog.efi $(T)/nmbl-stall.efi $(T)/nmbl-noinit.efi

# The real-system test machine (test/system): Debian 12 from Debian's
# archive with nmbl installed as its package installs it, GRUB installed and
# grub.cfg written inside it.  The base system is built once per cache.
SYSTEM = $(BUILD)/system
SYSTEM_DEPS = $(BUILD)/nmbl $(BUILD)/libnmbl.so.1 $(BUILD)/grub-emu $(BUILD)/nmbl-init \
	$(BUILD)/nmbl-console $(BUILD)/nmbl.efi $(BUILD)/kernel-other/kver $(T)/vmlinuz-test \
	$(SIGN_KEY) $(SIGN_CERT) test/vm/mkdisk.py test/vm/vm.py nmbl-loader/tools/systemd/nmbl-bless.service \
	$(filter-out %.py %.md,$(wildcard test/system/*))
$(SYSTEM)/machine.json: $(SYSTEM_DEPS)
	rm -rf $(SYSTEM)/nmbl-tree
	$(MAKE) install install-uki DESTDIR=$(abspath $(SYSTEM)/nmbl-tree)
	test/system/mkimage --build $(BUILD) --nmbl-tree $(SYSTEM)/nmbl-tree --out $(SYSTEM)
	rm -rf $(SYSTEM)/nmbl-tree
SYSTEM_FIXTURES = $(SYSTEM)/machine.json

# --- install ------------------------------------------------------------------

# GNU directories, each below DESTDIR when it is set.  Fedora's LIBDIR is
# $(PREFIX)/lib64.  Installing copies files and nothing else: the firmware
# and the ESP are the business of "nmbl bootcfg" (see nmbl(8)).
PREFIX = /usr
BINDIR = $(PREFIX)/bin
LIBDIR = $(PREFIX)/lib
INCLUDEDIR = $(PREFIX)/include
LIBEXECDIR = $(PREFIX)/libexec
DATADIR = $(PREFIX)/share
SYSCONFDIR = /etc
MANDIR = $(DATADIR)/man
PKGCONFIGDIR = $(LIBDIR)/pkgconfig
DRACUTDIR = $(PREFIX)/lib/dracut
KERNELINSTALLDIR = $(PREFIX)/lib/kernel/install.d
SYSTEMDUNITDIR = $(PREFIX)/lib/systemd/system
PRESETDIR = $(PREFIX)/lib/systemd/system-preset
UKIDIR = $(PREFIX)/lib/nmbl
INSTALL = install

# The kernel-install plugin, when the tree has it.
KERNEL_PLUGIN = $(wildcard specs/95-nmbl.install)
# What install puts in directories of its own, which uninstall removes.
NMBL_DIRS = $(LIBEXECDIR)/nmbl $(DATADIR)/nmbl $(DRACUTDIR)/modules.d/97nmbl $(SYSCONFDIR)/nmbl
INSTALLED = $(BINDIR)/nmbl $(LIBDIR)/libnmbl.so.1 $(LIBDIR)/libnmbl.so \
	$(INCLUDEDIR)/libnmbl.h $(PKGCONFIGDIR)/libnmbl.pc \
	$(MANDIR)/man8/nmbl.8 $(MANDIR)/man8/nmbl-init.8 $(MANDIR)/man3/libnmbl.3 \
	$(addprefix $(LIBEXECDIR)/nmbl/,grub-emu nmbl-init nmbl-console mkuki run-dracut) \
	$(DATADIR)/nmbl/os-release $(DATADIR)/nmbl/sbat.csv \
	$(DRACUTDIR)/modules.d/97nmbl/module-setup.sh $(DRACUTDIR)/modules.d/97nmbl/grub.cfg \
	$(KERNELINSTALLDIR)/95-nmbl.install \
	$(SYSTEMDUNITDIR)/nmbl-bless.service $(PRESETDIR)/90-nmbl.preset

# The .pc names its directories below ${prefix} where it can, so that
# "pkg-config --define-prefix" finds a tree that was moved.
PC_DIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# The dracut module, the unit and the plugin name the programs where they
# are installed (the module keeps the image's own paths).
INSTALL_SUBST = $(BUILD)/install
PLUGIN_SUBST = -e 's|\$${NMBL:-/usr/bin/nmbl}|$${NMBL:-$(BINDIR)/nmbl}|' \
	-e 's|\$${NMBL_CONF_DIR:-/etc/nmbl}|$${NMBL_CONF_DIR:-$(SYSCONFDIR)/nmbl}|' \
	-e 's|\$${NMBL_LIBEXECDIR:-/usr/libexec/nmbl}|$${NMBL_LIBEXECDIR:-$(LIBEXECDIR)/nmbl}|' \
	-e 's|\$${NMBL_DATADIR:-/usr/share/nmbl}|$${NMBL_DATADIR:-$(DATADIR)/nmbl}|' \
	-e 's|\$${NMBL_DRACUT_MODULE:-/usr/lib/dracut/modules.d/97nmbl}|$${NMBL_DRACUT_MODULE:-$(DRACUTDIR)/modules.d/97nmbl}|'

install: all
	@mkdir -p $(INSTALL_SUBST)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(call PC_DIR,$(LIBDIR))|' \
		-e 's|@INCLUDEDIR@|$(call PC_DIR,$(INCLUDEDIR))|' -e 's|@VERSION@|$(VERSION)|' \
		nmbl-loader/libnmbl/libnmbl.pc.in >$(INSTALL_SUBST)/libnmbl.pc
	sed -e 's|^\([[:space:]]*local libexecdir=\).*|\1$(LIBEXECDIR)/nmbl|' \
		-e 's|^\([[:space:]]*local bindir=\).*|\1$(BINDIR)|' \
		$(NMBL_MODULE)/module-setup.sh >$(INSTALL_SUBST)/module-setup.sh
	sed -e 's|/usr/bin/nmbl |$(BINDIR)/nmbl |' \
		nmbl-loader/tools/systemd/nmbl-bless.service >$(INSTALL_SUBST)/nmbl-bless.service
	$(INSTALL) -d $(addprefix $(DESTDIR),$(BINDIR) $(LIBDIR) $(INCLUDEDIR) $(PKGCONFIGDIR) \
		$(MANDIR)/man8 $(MANDIR)/man3 $(NMBL_DIRS) $(KERNELINSTALLDIR) $(SYSTEMDUNITDIR) \
		$(PRESETDIR))
	$(INSTALL) -m 0755 $(BUILD)/nmbl $(DESTDIR)$(BINDIR)/nmbl
	$(INSTALL) -m 0755 $(BUILD)/libnmbl.so.1 $(DESTDIR)$(LIBDIR)/libnmbl.so.1
	ln -sfn libnmbl.so.1 $(DESTDIR)$(LIBDIR)/libnmbl.so
	$(INSTALL) -m 0644 nmbl-loader/libnmbl/libnmbl.h $(DESTDIR)$(INCLUDEDIR)/libnmbl.h
	$(INSTALL) -m 0644 $(INSTALL_SUBST)/libnmbl.pc $(DESTDIR)$(PKGCONFIGDIR)/libnmbl.pc
	$(INSTALL) -m 0644 nmbl-loader/tools/nmbl.8 nmbl-loader/tools/nmbl-init.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 nmbl-loader/libnmbl/libnmbl.3 $(DESTDIR)$(MANDIR)/man3/
	$(INSTALL) -m 0755 $(BUILD)/grub-emu $(BUILD)/nmbl-init $(BUILD)/nmbl-console \
		dracut/mkuki dracut/run-dracut $(DESTDIR)$(LIBEXECDIR)/nmbl/
	$(INSTALL) -m 0644 dracut/os-release dracut/sbat.csv $(DESTDIR)$(DATADIR)/nmbl/
	$(INSTALL) -m 0755 $(INSTALL_SUBST)/module-setup.sh $(DESTDIR)$(DRACUTDIR)/modules.d/97nmbl/
	$(INSTALL) -m 0644 $(NMBL_MODULE)/grub.cfg $(DESTDIR)$(DRACUTDIR)/modules.d/97nmbl/
	$(if $(KERNEL_PLUGIN),sed $(PLUGIN_SUBST) $(KERNEL_PLUGIN) >$(INSTALL_SUBST)/95-nmbl.install)
	$(if $(KERNEL_PLUGIN),$(INSTALL) -m 0755 $(INSTALL_SUBST)/95-nmbl.install $(DESTDIR)$(KERNELINSTALLDIR)/)
	$(INSTALL) -m 0644 $(INSTALL_SUBST)/nmbl-bless.service $(DESTDIR)$(SYSTEMDUNITDIR)/
	$(INSTALL) -m 0644 nmbl-loader/tools/systemd/90-nmbl.preset $(DESTDIR)$(PRESETDIR)/

# Removes what install put there; the directories it shares with others
# stay, and so does local configuration in $(SYSCONFDIR)/nmbl.
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	for d in $(addprefix $(DESTDIR),$(NMBL_DIRS)); do \
		[ ! -d "$$d" ] || rmdir --ignore-fail-on-non-empty "$$d"; \
	done

# The signed UKI, under the version of the kernel inside it.
install-uki: $(BUILD)/nmbl.efi
	$(INSTALL) -d $(DESTDIR)$(UKIDIR)/$(KVER_OF)
	$(INSTALL) -m 0644 $(BUILD)/nmbl.efi $(DESTDIR)$(UKIDIR)/$(KVER_OF)/nmbl.efi

uninstall-uki:
	@test -f $(BUILD)/kernel/kver || { echo "$(BUILD) has built no UKI" >&2; exit 1; }
	rm -f $(DESTDIR)$(UKIDIR)/$(KVER_OF)/nmbl.efi
	for d in $(DESTDIR)$(UKIDIR)/$(KVER_OF) $(DESTDIR)$(UKIDIR); do \
		[ ! -d "$$d" ] || rmdir --ignore-fail-on-non-empty "$$d"; \
	done

# The source tarball $(BUILD)/nmbl-$(VERSION).tar.gz: in a git tree the
# files git tracks or would (not those it ignores), as they are now, with
# symbolic links kept.
DIST = nmbl-$(VERSION)
dist:
	@mkdir -p $(BUILD)
	{ if [ -e .git ]; then git ls-files --cached --others --exclude-standard; \
	else find . \( -name .git -o -name build -o -name __pycache__ \) -prune -o \( -type f -o -type l \) -print; \
	fi; } | sed 's|^\./||' | while read -r f; do \
		if [ -e "$$f" ] || [ -L "$$f" ]; then printf '%s\n' "$$f"; fi; \
	done | LC_ALL=C sort -u >$(BUILD)/$(DIST).files
	tar --create --files-from=$(BUILD)/$(DIST).files --transform='s|^|$(DIST)/|S' \
		--sort=name --owner=0 --group=0 --numeric-owner | gzip -n >$(BUILD)/$(DIST).tar.gz.tmp
	mv $(BUILD)/$(DIST).tar.gz.tmp $(BUILD)/$(DIST).tar.gz

.PHONY: install uninstall install-uki uninstall-uki dist

# --- the two commands -------------------------------------------------------

check: deps
	$(MAKE) all $(UNIT_TESTS) $(TEST_FIXTURES) $(SYSTEM_FIXTURES)
	test/run --build $(BUILD)

# Boot times in VMs, medians of BENCH_RUNS runs per variant (see test/bench);
# with 5, one slow spell of the machine moved a median by a tenth.
BENCH_RUNS ?= 7
bench: deps
	$(MAKE) all $(TEST_FIXTURES)
	test/bench/bench.py --build $(BUILD) --runs $(BENCH_RUNS)

demo: deps
	$(MAKE) all $(SYSTEM_FIXTURES)
	NMBL_BUILD=$(BUILD) test/boot/demo.py

# The first slice's demo: a plain grub.cfg, a target that powers off.
demo-plain: deps
	$(MAKE) all $(TEST_FIXTURES)
	NMBL_BUILD=$(BUILD) test/boot/demo.py --plain

clean:
	find $(BUILD) -mindepth 1 -maxdepth 1 ! -name cache -exec rm -rf {} +

distclean:
	rm -rf $(BUILD)

deps:
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(DEPS)
