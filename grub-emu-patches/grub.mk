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
	nmbl-loader/fetch-upstream $(CACHE) grub2 $(GRUB_VERSION) $(GRUB_SHA256)

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
# GRUB builds with -Werror unless told not to.  A packager's build
# (WERROR= , as nmbl.spec's) gives GRUB the distribution's CFLAGS, under
# which GCC warns of GRUB code it does not warn of under GRUB's own (2.14's
# tpm2key.c at -O2: maybe-uninitialized): it is built as distributions
# build GRUB, without -Werror.
GRUB_WERROR = $(if $(WERROR),,--disable-werror)

$(GRUB_OBJ)/config.status: $(GRUB_SRC)/.patched grub-emu-patches/grub.mk
	mkdir -p $(GRUB_OBJ)
	cd $(GRUB_OBJ) && $(abspath $(GRUB_SRC))/configure -q \
		--with-platform=emu --target=x86_64 --disable-nls \
		--disable-grub-emu-sdl --disable-grub-emu-pci \
		--disable-grub-mkfont --disable-grub-themes --enable-grub-emu-nmbl $(GRUB_WERROR) AWK=gawk \
		TARGET_CPPFLAGS="-I$(abspath nmbl-loader/libnmbl) $(GRUB_PREFIX_MAP)" \
		CPPFLAGS="-I$(abspath nmbl-loader/libnmbl) $(GRUB_PREFIX_MAP)"

# Only grub-emu is needed, not GRUB's utilities: build just its inputs.
# libnmbl, static, and what it links with go in LIBNMBL (patch 0001),
# which only grub-emu's final link uses; GRUB's makefiles do not track it,
# so grub-emu is linked again whenever libnmbl changes.  GRUB links with
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
	rm -f $(GRUB_OBJ)/grub-core/grub-emu
	$(MAKE) -C $(GRUB_OBJ)/grub-core grub-emu \
		LIBNMBL="$(abspath $(BUILD)/libnmbl.a) $(LIBS_NMBL)" LIBUTIL="-Wl,--build-id"
	cp $(GRUB_OBJ)/grub-core/grub-emu $@
