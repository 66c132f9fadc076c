# The benchmark's baselines (included by the top-level Makefile after
# test/test.mk, whose $(T) and target images they are built from).

# What the benchmark compares nmbl with, on the entry it boots (see
# test/bench): the target's own UKI, started by the firmware with no menu,
# and GRUB's EFI image as a distribution builds it, from Debian's
# grub-efi-amd64-bin with Debian's module list, reading the same grub.cfg.
BENCH_CMDLINE = root=UUID=$(TEST_ROOT_UUID) ro console=tty0 console=ttyS0,115200 quiet
# What holds that line: this file, and test/test.mk for the root's UUID.
BENCH_CMDLINE_DEPS = test/bench/bench.mk test/test.mk
$(T)/floor.efi: $(T)/vmlinuz-test $(T)/target-initrd-dracut.img $(MKUKI_DEPS) $(BENCH_CMDLINE_DEPS)
	$(call MKUKI,$(T)/vmlinuz-test,$(T)/target-initrd-dracut.img,$(BENCH_CMDLINE))
# The kexec floor: the target's kernel again, whose initramfs is one program
# that kexecs the entry (kernel, initrd, command line inside it) at once.
$(T)/kexec-floor-init: test/bench/kexec-floor.c
	@mkdir -p $(@D)
	$(CC) -static -Os -Wall -Wextra $(WERROR) -o $@ $<
$(T)/kexec-floor.img: $(T)/kexec-floor-init $(T)/vmlinuz-test $(T)/target-initrd-dracut.img \
		$(BENCH_CMDLINE_DEPS)
	rm -rf $@.d && mkdir -p $@.d/entry
	cp $(T)/kexec-floor-init $@.d/init
	cp $(T)/vmlinuz-test $@.d/entry/vmlinuz
	cp $(T)/target-initrd-dracut.img $@.d/entry/initrd.img
	printf '%s\n' "$(BENCH_CMDLINE)" >$@.d/entry/cmdline
	cd $@.d && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet >$(abspath $@)
	rm -rf $@.d
$(T)/kexec-floor.efi: $(T)/vmlinuz-test $(T)/kexec-floor.img $(NMBL_MKUKI_DEPS)
	$(call MKUKI,$(T)/vmlinuz-test,$(T)/kexec-floor.img,$(NMBL_CMDLINE))
GRUB_EFI_DIR ?= /usr/lib/grub/x86_64-efi
# GRUB as a distribution installs it on EFI, for the measured-boot tests:
# its modules built in, no configuration of its own, started from the ESP
# with its prefix the distribution's directory there, whose stub it reads
# first (and measures, with the tpm module).
$(T)/grub-debian-prefix.efi: test/bench/grub-modules
	@mkdir -p $(@D)
	grub-mkimage -O x86_64-efi -d $(GRUB_EFI_DIR) -p /EFI/debian -o $@ \
		$$(cat test/bench/grub-modules)
$(T)/grubx64.efi: test/bench/grub-modules test/bench/grub-bootstrap.cfg
	@mkdir -p $(@D)
	grub-mkstandalone -O x86_64-efi -d $(GRUB_EFI_DIR) \
		--modules="$$(cat test/bench/grub-modules)" \
		--install-modules="$$(cat test/bench/grub-modules)" \
		--locales= --fonts= --themes= -o $@ \
		"boot/grub/grub.cfg=test/bench/grub-bootstrap.cfg"
