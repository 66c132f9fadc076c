# The patched grub-emu (included by the top-level Makefile): the release
# tarball fetched and checked, these patches applied, grub-emu built with
# libnmbl linked in.

GRUB_VERSION = 2.12
GRUB_SHA256 = f3c97391f7c4eaa677a78e090c7e97e6dc47b16f655f04683ebd37bef7fe0faa
# Point this at your own copy of the release tarball to skip the download.
GRUB_TARBALL ?= $(CACHE)/grub2_$(GRUB_VERSION).orig.tar.xz
GRUB_PATCHES = $(sort $(wildcard grub-emu-patches/*.patch))
GRUB_SRC = $(BUILD)/grub/grub-$(GRUB_VERSION)
GRUB_OBJ = $(BUILD)/grub/obj

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
