# nmbl - one entry point for building, testing and demonstrating.
#
#   make            libnmbl, the programs (nmbl, nmbl-init, nmbl-console, nmbl-fetch)
#                   and the patched grub-emu
#   make uki        the signed nmbl UKI (SIGN_KEY/SIGN_CERT, test key by default)
#   make check      every test (installs its dependencies first)
#   make install    libnmbl, nmbl, the dracut module, grub-emu, the units (DESTDIR,
#                   PREFIX, LIBDIR, ...; make uninstall undoes it)
#   make install-uki  the signed UKI under $(PREFIX)/lib/nmbl/<kernel version>/
#   make dist       the source tarball nmbl-$(VERSION).tar.gz
#   make demo       boot the real Debian test machine through nmbl on this terminal
#   make demo-plain the faster demo: a plain grub.cfg and a target that powers off
#
# Everything built lands in $(BUILD); downloads are kept in $(CACHE).  The
# rules are in one file per job, beside what it builds (the includes below).

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

# Packages (Debian 12 names) that building and testing need.
DEPS = build-essential gawk bison flex gettext autoconf autoconf-archive automake autopoint \
	pkg-config python3 patch xz-utils libssl-dev libcurl4-openssl-dev dhcpcd-base ca-certificates libkmod-dev libblkid-dev zlib1g-dev liblzma-dev libzstd-dev liblz4-dev libbz2-dev liblzo2-dev zstd lz4 cpio kmod binutils openssl \
	dracut-core systemd-boot-efi sbsigntool ovmf qemu-system-x86 mtools \
	dosfstools e2fsprogs btrfs-progs fdisk kexec-tools efitools shellcheck grub-common \
	grub-efi-amd64-bin rpm osslsigncode mmdebstrap qemu-utils \
	virtinst libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients \
	parted lzop mdadm lvm2 fonts-unifont swtpm swtpm-tools tpm2-tools \
	cryptsetup-bin libtss2-esys-3.0.2-0 libtss2-rc0 libtss2-mu0 libtss2-tcti-device0 \
	tesseract-ocr python3-pyte

all: $(BUILD)/libnmbl.a $(BUILD)/libnmbl.so.1 $(BUILD)/nmbl $(BUILD)/nmbl-init $(BUILD)/nmbl-console \
	$(BUILD)/nmbl-fetch $(BUILD)/grub-emu

.PHONY: all deps check check-inputs bench demo demo-plain uki net-uki fuzz clean distclean
# Objects made on the way are kept: a second make must have nothing to do.
.SECONDARY:

# One file per job, each beside what it builds.  Order matters where a
# file's rules name another's variables: the GRUB tree before the fuzzers
# that read it, the UKI's signing before the test images, the test
# images' folder before the benchmark's.
include nmbl-loader/nmbl.mk
include nmbl-loader/curl.mk
include grub-emu-patches/grub.mk
include dracut/uki.mk
include test/test.mk
include test/grub-suite/grub-suite.mk
include test/bench/bench.mk
include specs/install.mk

# --- the two commands -------------------------------------------------------

# What the tests need is built with a job per CPU unless the command line
# says otherwise (GRUB alone is minutes of compiling); the tests then run
# (test/run): the modules that boot VMs one per CPU at once, the others
# beside them; at the end they say where the time went: the build's, each
# module's, the slowest boots and each phase of a boot.
CHECK_JOBS ?= $(shell nproc)
# What a whole run leaves under $(BUILD): about 15 GiB (disk images, saved
# machines, the base systems).
CHECK_DISK_MIB ?= 16384
# The tests' interpreter: Debian's, which has the python3-* packages DEPS
# installs (one found earlier in PATH, a virtual environment's, may not).
TEST_PYTHON ?= /usr/bin/python3
check: deps
	@mkdir -p $(BUILD)
	test/check-disk $(BUILD) $(CHECK_DISK_MIB)
	start=$$(date +%s); $(MAKE) -j$(CHECK_JOBS) check-inputs || exit; \
		echo $$(($$(date +%s) - start)) > $(BUILD)/check-build-seconds
	$(TEST_PYTHON) test/run --build $(BUILD) --build-time $(BUILD)/check-build-seconds --slowest 10

# The RAID machine takes longest to make (its base system, then a
# provisioning boot of some minutes): its base is made while GRUB
# compiles, and the machines come before the smaller inputs, which fill
# the other CPU beside them.
check-inputs: all $(SYSTEM_BASE)raid-lvm $(SYSTEM_FIXTURES) $(UNIT_TESTS) $(TEST_FIXTURES) grub-suite-inputs

# Boot times in VMs, medians of BENCH_RUNS runs per variant (see test/bench);
# with 5, one slow spell of the machine moved a median by a tenth.
BENCH_RUNS ?= 7
bench: deps
	$(MAKE) all $(TEST_FIXTURES) $(SYSTEM_FIXTURES)
	test/bench/bench.py --build $(BUILD) --runs $(BENCH_RUNS)

# The demo boots the first machine only.
demo: deps
	$(MAKE) all $(SYSTEM)/machine.json
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
