# The patched grub-emu (included by the top-level Makefile): the release
# tarball fetched and checked, these patches applied, grub-emu built with
# libnmbl linked in.

GRUB_VERSION = 2.14
GRUB_SHA256 = bc8d3c73535b8838d8c8e2654d73edc4e6ae8c8acdb45d5df5dc9a1547446d43
# Point this at your own copy of the release tarball to skip the download.
GRUB_TARBALL ?= $(CACHE)/grub2_$(GRUB_VERSION).orig.tar.xz
GRUB_PATCHES = $(sort $(wildcard grub-emu-patches/*.patch))
GRUB_SRC = $(BUILD)/grub/grub-$(GRUB_VERSION)
GRUB_OBJ = $(BUILD)/grub/obj

$(GRUB_TARBALL):
	grub-emu-patches/fetch-grub $(CACHE) $(GRUB_VERSION) $(GRUB_SHA256)

$(GRUB_SRC)/.patched: $(GRUB_TARBALL) $(GRUB_PATCHES)
	echo "$(GRUB_SHA256)  $(GRUB_TARBALL)" | sha256sum -c --quiet
	rm -rf $(BUILD)/grub
	mkdir -p $(BUILD)/grub
	tar -C $(BUILD)/grub -xJf $(GRUB_TARBALL)
	set -e; for p in $(abspath $(GRUB_PATCHES)); do \
		patch -d $(GRUB_SRC) -p1 --quiet --no-backup-if-mismatch < $$p; \
	done
	# The patches add modules: regenerate GRUB's makefiles from its lists.
	cd $(GRUB_SRC) && PYTHON=python3 ./autogen.sh >/dev/null
	touch $@

# GRUB 2.14 names the source file of an error with __FILE__: the build
# tree's path stays out of grub-emu.
GRUB_PREFIX_MAP = -fmacro-prefix-map=$(abspath $(GRUB_SRC))/=

$(GRUB_OBJ)/config.status: $(GRUB_SRC)/.patched grub-emu-patches/grub.mk
	mkdir -p $(GRUB_OBJ)
	cd $(GRUB_OBJ) && $(abspath $(GRUB_SRC))/configure -q \
		--with-platform=emu --target=x86_64 --disable-nls \
		--disable-grub-emu-sdl --disable-grub-emu-pci \
		--disable-grub-mkfont --disable-grub-themes AWK=gawk \
		TARGET_CPPFLAGS="-I$(abspath nmbl-loader/libnmbl) $(GRUB_PREFIX_MAP)" \
		CPPFLAGS="$(GRUB_PREFIX_MAP)"

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
	# With a unifont on the build machine, configure has GRUB's font module
	# embed an ASCII font made from it: make that first.
	if grep -q '^#define HAVE_FONT_SOURCE 1' $(GRUB_OBJ)/config.h; then \
		$(MAKE) -C $(GRUB_OBJ) ascii.h widthspec.h; fi
	# Generated headers first: only GRUB's "all" would make them in order.
	printf 'nmbl-built-sources: $$(BUILT_SOURCES)\n' | \
		$(MAKE) -C $(GRUB_OBJ)/grub-core -f Makefile -f - nmbl-built-sources
	rm -f $(GRUB_OBJ)/grub-core/grub-emu $(GRUB_OBJ)/grub-core/linux.module
	$(MAKE) -C $(GRUB_OBJ)/grub-core grub-emu \
		LIBS="$(abspath $(BUILD)/libnmbl.a)" LIBUTIL="$(LIBS_NMBL) -Wl,--build-id"
	cp $(GRUB_OBJ)/grub-core/grub-emu $@
