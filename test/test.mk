# What the tests need (included by the top-level Makefile): the unit tests
# and fuzzers under ASan and UBSan, the images the VM tests boot, and the
# real-system test machine.

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
FUZZERS = pe authenticode sigdb fwcheck loadopt bls cmdline uevent tpm broker initramfs volumes
UNIT_TESTS += $(FUZZERS:%=$(BUILD)/unit/test-fuzz-%)
$(BUILD)/unit/obj/fuzz-%.o: test/fuzz/fuzz-%.c
	@mkdir -p $(@D)
	$(CC) -O1 -g $(NMBL_CFLAGS) $(SANITIZE) -MMD -MP -c -o $@ $<
# blscfg's parser is GRUB code (patch 0005), built on a shim of GRUB's
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

# Another kernel than nmbl's for the tests (Debian's cloud flavour, the same
# source built again): nmbl must kexec it, never switch root to it.
OTHER_TREE = $(BUILD)/kernel-other/tree
$(BUILD)/kernel-other/kver:
	@mkdir -p $(@D)
	test/fetch-kernel $(CACHE)/kernel $(OTHER_TREE) linux-image-cloud-amd64 > $@.tmp
	mv $@.tmp $@

# --- what the VM tests boot into -------------------------------------------

T = $(BUILD)/test
$(T)/target-init: test/target/init.c
	@mkdir -p $(@D)
	$(CC) -static -Os -Wall -Wextra $(WERROR) -o $@ $<

$(T)/target-root/sbin/init: $(T)/target-init test/target/mkroot $(BUILD)/nmbl
	rm -rf $(T)/target-root
	test/target/mkroot $(T)/target-root $< $(BUILD)/nmbl

# The target's initramfs: most tests boot the quick one (a C program
# loads a virtio disk's and ext4's modules, mounts root and starts the
# target's init; under a second where dracut's took ten under TCG); the
# tests of a real initramfs (nmbl's handover module, disk controllers
# other than virtio) and the benchmark boot one dracut makes.
$(T)/target-preinit: test/target/preinit.c
	@mkdir -p $(@D)
	$(CC) -static -Os -Wall -Wextra $(WERROR) -o $@ $<
$(T)/target-initrd.img: test/target/mkquickinitrd $(T)/target-preinit $(BUILD)/kernel/kver
	test/target/mkquickinitrd $(KERNEL_TREE) $(KVER_OF) $(T)/target-preinit $@
TARGET_DRACUT_DEPS = test/target/mkinitrd $(wildcard test/target/dracut/*/*) \
	$(wildcard dracut/modules.d/96nmbl-handover/*) $(BUILD)/kernel/kver
$(T)/target-initrd-dracut.img: $(TARGET_DRACUT_DEPS)
	@mkdir -p $(@D)
	test/target/mkinitrd $(KERNEL_TREE) $(KVER_OF) $@
# ... with the drivers of test_machines' disk controllers and consoles.
$(T)/target-initrd-machines.img: $(TARGET_DRACUT_DEPS)
	@mkdir -p $(@D)
	test/target/mkinitrd --machines $(KERNEL_TREE) $(KVER_OF) $@

# The target kernel signed by the test key (trusted through db), and
# Debian's own signed kernel, which the test firmware does not trust.
$(T)/vmlinuz-test: $(BUILD)/kernel/kver test/target/resign-kernel $(SIGN_KEY) $(SIGN_CERT)
	@mkdir -p $(@D)
	test/target/resign-kernel $(KERNEL_TREE)/boot/vmlinuz-$(KVER_OF) $(SIGN_KEY) $(SIGN_CERT) $@

$(T)/vmlinuz-other: $(BUILD)/kernel-other/kver test/target/resign-kernel $(SIGN_KEY) $(SIGN_CERT)
	@mkdir -p $(@D)
	test/target/resign-kernel $(OTHER_TREE)/boot/vmlinuz-$$(cat $<) $(SIGN_KEY) $(SIGN_CERT) $@
$(T)/other-initrd.img: test/target/mkquickinitrd $(T)/target-preinit $(BUILD)/kernel-other/kver
	test/target/mkquickinitrd $(OTHER_TREE) $$(cat $(BUILD)/kernel-other/kver) $(T)/target-preinit $@

# nmbl's own UKIs for the tests: their command lines are written here, so
# this file is among what they are made from, as dracut/uki.mk is for nmbl's.
TEST_MKUKI_DEPS = $(NMBL_MKUKI_DEPS) test/test.mk

# nmbl told to kexec always, on its own command line.
$(T)/nmbl-kexec.efi: $(BUILD)/nmbl-initrd.img $(TEST_MKUKI_DEPS)
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
$(T)/target-uki.efi: $(T)/vmlinuz-test $(T)/target-initrd.img $(MKUKI_DEPS) test/test.mk
	$(call MKUKI,$(T)/vmlinuz-test,$(T)/target-initrd.img,$(TARGET_UKI_CMDLINE))

# A UKI signed for the firmware around a kernel that is not: kexec checks
# the kernel, so under lockdown nmbl must refuse it.
$(T)/target-uki-unsigned.efi: $(T)/vmlinuz-unsigned $(T)/marker.img $(MKUKI_DEPS) test/test.mk
	$(call MKUKI,$(T)/vmlinuz-unsigned,$(T)/marker.img,$(TARGET_UKI_CMDLINE))

# Two versions of the target as kernel-install's layout=uki leaves them in
# /EFI/Linux, for GRUB's uki command (test/boot/test_uki_entries.py): the
# same signed kernel and initrd, each with its own .osrel and .cmdline.
$(T)/uki-entry-%.osrel:
	@mkdir -p $(@D)
	printf 'NAME="nmbl test target"\nID=nmbl-target\nVERSION_ID=%s\nPRETTY_NAME="nmbl test target %s"\n' \
		$* $* > $@
$(T)/uki-entry-%.efi: $(T)/uki-entry-%.osrel $(T)/vmlinuz-test $(T)/target-initrd.img $(MKUKI_DEPS)
	dracut/mkuki $(UKI_STUB) $(T)/vmlinuz-test $(T)/target-initrd.img \
		"root=UUID=$(TEST_ROOT_UUID) ro console=ttyS0,115200 nmbl.entry=uki-$*" \
		$< dracut/sbat.csv $@ $(SIGN_KEY) $(SIGN_CERT)

# An EFI program for chainloader to start, signed for the test firmware.
EFITOOLS_DIR ?= /usr/lib/efitools/x86_64-linux-gnu
$(T)/HelloWorld.efi: $(SIGN_KEY) $(SIGN_CERT)
	@mkdir -p $(@D)
	sbsign --key $(SIGN_KEY) --cert $(SIGN_CERT) --output $@ $(EFITOOLS_DIR)/HelloWorld.efi

# nmbl with the VM tests' self-check: libnmbl and kexec-tools asked the same.
SELFTEST_MODULE = test/dracut/90nmbl-selftest
$(T)/nmbl-selftest-initrd.img: $(NMBL_DRACUT_DEPS) $(wildcard $(SELFTEST_MODULE)/*) test/test.mk
	@mkdir -p $(@D)
	$(NMBL_DRACUT) $@ $(NMBL_MODULE) $(SELFTEST_MODULE) -- \
		--modules "nmbl nmbl-selftest" --compress $(NMBL_COMPRESS)
$(T)/nmbl-selftest.efi: $(T)/nmbl-selftest-initrd.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE))

TEST_FIXTURES = $(BUILD)/nmbl.efi $(BUILD)/nmbl-net.efi $(T)/nmbl-selftest.efi $(T)/target-root/sbin/init $(T)/target-initrd.img \
	$(T)/target-initrd-dracut.img $(T)/target-initrd-machines.img \
	$(T)/vmlinuz-test $(T)/marker.img $(T)/marker3.img $(T)/vmlinuz-unsigned \
	$(T)/vmlinuz-truncated $(T)/target-uki.efi $(T)/target-uki-unsigned.efi $(T)/HelloWorld.efi \
	$(T)/vmlinuz-other $(T)/other-initrd.img $(T)/nmbl-kexec.efi $(T)/nmbl-unsigned.efi \
	$(T)/floor.efi $(T)/kexec-floor.efi $(T)/grubx64.efi $(T)/grub-debian-prefix.efi $(T)/uki-entry-2.9.efi \
	$(T)/uki-entry-2.10.efi

# The watchdog's tests (test/boot/test_watchdog.py): nmbl whose watchdog
# fires sooner than its menu's countdown ends, healthy; the self-test image
# stalling before its menu for longer than its watchdog allows, as a hang
# would; and nmbl's kernel with an initramfs that has no init, which
# panics: the panic= of NMBL_CMDLINE must reboot it.
$(T)/nmbl-watchdog.efi: $(BUILD)/nmbl-initrd.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT) nmbl.watchdog=20)
$(T)/nmbl-stall.efi: $(T)/nmbl-selftest-initrd.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.watchdog=10 nmbl.selftest.stall=30)
$(T)/nmbl-noinit.efi: $(T)/marker.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE))

# The contained menu's test (test/boot/test_contained.py): nmbl itself,
# its signed command line giving grub-emu the self-test command that tries
# what the seccomp filter denies (the kernel hands NAME=VALUE on to init's
# environment).
$(T)/nmbl-contained.efi: $(BUILD)/nmbl-initrd.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT) NMBL_SELFTEST_CONTAINMENT=1)
TEST_FIXTURES += $(T)/nmbl-watchdog.efi $(T)/nmbl-stall.efi $(T)/nmbl-noinit.efi $(T)/nmbl-contained.efi

# The network image of the network boot's tests (test/boot/test_netboot.py)
# that waits 5 s for a DHCP answer, whose menu has the containment
# self-test, and which trusts a certificate authority of the tests' beside
# the distribution's: the one that signed the tests' HTTPS server's
# certificate (for 10.0.2.100, the address the VM reaches it at).
$(T)/https-ca.pem:
	@mkdir -p $(@D)
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=nmbl tests' CA" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
		-keyout $(T)/https-ca.key -out $@ 2>/dev/null
$(T)/https-server.pem: $(T)/https-ca.pem
	openssl req -newkey rsa:2048 -nodes -subj /CN=10.0.2.100 -keyout $@.key -out $@.csr 2>/dev/null
	printf 'subjectAltName=IP:10.0.2.100\nextendedKeyUsage=serverAuth\n' >$@.ext
	openssl x509 -req -in $@.csr -CA $< -CAkey $(T)/https-ca.key -CAcreateserial -days 3650 \
		-extfile $@.ext -out $@.crt 2>/dev/null
	cat $@.key $@.crt >$@
	rm -f $@.key $@.csr $@.ext $@.crt
$(T)/ca-bundle.crt: $(T)/https-ca.pem
	cat /etc/ssl/certs/ca-certificates.crt $< >$@
$(T)/nmbl-net-test-initrd.img: $(NMBL_DRACUT_DEPS) $(BUILD)/nmbl-fetch $(T)/ca-bundle.crt
	NMBL_NET=1 NMBL_FETCH=$(abspath $(BUILD)/nmbl-fetch) NMBL_CA_FILE=$(abspath $(T)/ca-bundle.crt) \
		$(NMBL_DRACUT) $@ $(NMBL_MODULE) -- --modules "nmbl" --compress $(NMBL_COMPRESS)
$(T)/nmbl-net-test.efi: $(T)/nmbl-net-test-initrd.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT) nmbl.dhcp-timeout=5 NMBL_SELFTEST_CONTAINMENT=1)
TEST_FIXTURES += $(T)/nmbl-net-test.efi $(T)/https-server.pem

# The real-system test machine (test/system): Debian 12 from Debian's
# archive with nmbl installed as its package installs it, GRUB installed and
# grub.cfg written inside it.  The base system is built once per cache.
SYSTEM = $(BUILD)/system
SYSTEM_DEPS = $(BUILD)/nmbl $(BUILD)/libnmbl.so.1 $(BUILD)/grub-emu $(BUILD)/nmbl-init \
	$(BUILD)/nmbl-console $(BUILD)/nmbl.efi $(BUILD)/kernel-other/kver $(T)/vmlinuz-test \
	$(SIGN_KEY) $(SIGN_CERT) test/vm/mkdisk.py test/vm/vm.py nmbl-loader/tools/systemd/nmbl-bless.service \
	$(filter-out %.py %.md,$(wildcard test/system/*))
# mkimage into the target's folder with options $(1), nmbl installed there
# as its package installs it (with the UKI $(2) instead of the package's,
# when given).
define MKIMAGE
	rm -rf $(@D)/nmbl-tree
	$(MAKE) install install-uki DESTDIR=$(abspath $(@D)/nmbl-tree)
	$(if $(2),cp $(2) $(@D)/nmbl-tree$(UKIDIR)/$(KVER_OF)/nmbl.efi)
	test/system/mkimage $(1) --build $(BUILD) --nmbl-tree $(@D)/nmbl-tree --out $(@D)
	rm -rf $(@D)/nmbl-tree
endef
# Each layout's base system (mmdebstrap): a target of its own, which needs
# the kernel's package only, so that it can be made while nmbl compiles.
SYSTEM_BASE = $(BUILD)/cache/system/made-
$(SYSTEM_BASE)%: test/system/mkimage $(BUILD)/kernel/kver
	test/system/mkimage --base-only --layout $* --build $(BUILD)
	touch $@
$(SYSTEM)/machine.json: $(SYSTEM_DEPS) $(T)/shim-signed/shimx64.efi $(SYSTEM_BASE)plain
	$(call MKIMAGE)
# The same system as Debian's installer lays it out for "Guided - use
# entire disk and set up encrypted LVM": /boot, and root and swap on LVM
# in LUKS.  Its own base system, built once per cache too.
STACKED = $(BUILD)/stacked
$(STACKED)/machine.json: $(SYSTEM_DEPS) $(SYSTEM_BASE)encrypted-lvm
	$(call MKIMAGE,--layout encrypted-lvm)
# A server as RHEL's installer lays one out on two disks: XFS /boot on an
# md RAID 1, and root and swap on LVM on another, started by a dracut
# initrd; and a copy of /boot in LVM.  Its nmbl image is the one such a
# machine builds for itself: with LVM's tool (NMBL_LVM=1).
RAID = $(BUILD)/raid
$(T)/nmbl-initrd-lvm.img: NMBL_LVM = 1
$(T)/nmbl-initrd-lvm.img: $(NMBL_DRACUT_DEPS)
	$(NMBL_DRACUT) $@ $(NMBL_MODULE) -- --modules "nmbl" --compress $(NMBL_COMPRESS)
$(T)/nmbl-lvm.efi: $(T)/nmbl-initrd-lvm.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT))
TEST_FIXTURES += $(T)/nmbl-lvm.efi
# The same image with a disk tool taken over (test_volumes): the test's
# tool-probe in front of mdadm.
TOOLPROBE_MODULE = test/dracut/98nmbl-toolprobe
$(T)/tool-probe: test/target/tool-probe.c
	@mkdir -p $(@D)
	$(CC) -Os -Wall -Wextra $(WERROR) -o $@ $<
$(T)/nmbl-initrd-toolprobe.img: NMBL_LVM = 1
$(T)/nmbl-initrd-toolprobe.img: $(NMBL_DRACUT_DEPS) $(T)/tool-probe $(wildcard $(TOOLPROBE_MODULE)/*)
	NMBL_TOOL_PROBE=$(abspath $(T)/tool-probe) $(NMBL_DRACUT) $@ $(NMBL_MODULE) \
		$(TOOLPROBE_MODULE) -- --modules "nmbl nmbl-toolprobe" --compress $(NMBL_COMPRESS)
$(T)/nmbl-toolprobe.efi: $(T)/nmbl-initrd-toolprobe.img $(TEST_MKUKI_DEPS)
	$(call MKUKI,$(NMBL_KERNEL),$<,$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT))
TEST_FIXTURES += $(T)/nmbl-toolprobe.efi
$(RAID)/machine.json: $(SYSTEM_DEPS) $(T)/nmbl-lvm.efi $(SYSTEM_BASE)raid-lvm
	$(call MKIMAGE,--layout raid-lvm,$(T)/nmbl-lvm.efi)
# The machine that takes longest to make first: with a job per CPU, the
# other two are made beside it.
SYSTEM_FIXTURES = $(RAID)/machine.json $(STACKED)/machine.json $(SYSTEM)/machine.json

# shim as a PC's firmware starts it: Debian's shim-unsigned, signed with the
# test key (standing in for Microsoft's CA), its latest SBAT level revoking
# nmbl's generation 1 (test/target/mkshim); and nmbl's UKI of generation 2,
# which that level lets through.
SHIM_TREE = $(BUILD)/shim/tree
$(BUILD)/shim/stamp: test/fetch-deb
	test/fetch-deb $(CACHE)/shim $(SHIM_TREE) shim-unsigned
	touch $@
$(T)/shim-signed/shimx64.efi: $(BUILD)/shim/stamp test/target/mkshim $(SIGN_KEY) $(SIGN_CERT)
	test/target/mkshim $(SHIM_TREE) $(SIGN_KEY) $(SIGN_CERT) $(@D)
$(T)/sbat-nmbl-2.csv: dracut/sbat.csv
	@mkdir -p $(@D)
	sed 's/^nmbl,1,/nmbl,2,/' $< >$@
	grep -q '^nmbl,2,' $@
$(T)/nmbl-sbat2.efi: $(BUILD)/nmbl-initrd.img $(T)/sbat-nmbl-2.csv $(TEST_MKUKI_DEPS)
	dracut/mkuki $(UKI_STUB) $(NMBL_KERNEL) $< "$(NMBL_CMDLINE) nmbl.boot=$(NMBL_BOOT)" \
		dracut/os-release $(T)/sbat-nmbl-2.csv $@ $(SIGN_KEY) $(SIGN_CERT)
TEST_FIXTURES += $(T)/shim-signed/shimx64.efi $(T)/nmbl-sbat2.efi
