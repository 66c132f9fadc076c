# GRUB's own test suite on nmbl's grub-emu (test/grub-suite/README.md).
# Included by the top Makefile after grub-emu-patches/grub.mk, which
# defines GRUB_SRC, GRUB_OBJ, GRUB_VERSION, GRUB_TARBALL and GRUB_SHA256 and
# builds $(BUILD)/grub-emu.
#
#   make grub-suite            build what the tests need, run them
#   make grub-suite-inputs     only build what they need (test/run runs them)
#   make grub-suite-reference  the unpatched GRUB tree the failures are run on
#                              again ('grub-suite' builds it only after a failure)

GRUB_SUITE = $(BUILD)/grub-suite
GRUB_SUITE_RUN = test/grub-suite/run
# The unpatched GRUB: the same tarball, configured as GRUB_OBJ is.
GRUB_REF = $(BUILD)/grub-ref
GRUB_REF_SRC = $(GRUB_REF)/grub-$(GRUB_VERSION)
GRUB_REF_OBJ = $(GRUB_REF)/obj
# grub_func_test draws text with unicode.pf2: made from fonts-unifont's
# .otf by grub-common's grub-mkfont.  GRUB's configure does not look where
# fonts-unifont puts it (it would find xfonts-unifont's unifont.pcf.gz and
# build a font into grub-emu), so installing it leaves grub-emu's build as
# it was.
GRUB_SUITE_FONT ?= /usr/share/fonts/opentype/unifont/unifont.otf

# What grub-shell and the tests in tests.list need in the build tree $(1) of
# the source $(2), beyond grub-emu: modinfo.sh, grub-shell, the test scripts,
# the host test programs (after the generated sources they include) and the
# font.
grub_suite_build = $(MAKE) -C $(1)/grub-core modinfo.sh && \
	printf 'grub-suite-sources: $$(BUILT_SOURCES)\n' | \
		$(MAKE) -C $(1) -f Makefile -f - grub-suite-sources && \
	$(MAKE) -C $(1) $$($(GRUB_SUITE_RUN) --targets $(2)) && \
	grub-mkfont -o $(1)/unicode.pf2 $(GRUB_SUITE_FONT)

# The tests' inputs in nmbl's own GRUB tree.
GRUB_SUITE_DEPS = test/grub-suite/tests.list $(GRUB_SUITE_RUN) test/grub-suite/grub-suite.mk \
	$(GRUB_SUITE_FONT)
$(GRUB_SUITE)/built: $(BUILD)/grub-emu $(GRUB_SUITE_DEPS)
	$(call grub_suite_build,$(GRUB_OBJ),$(GRUB_SRC))
	@mkdir -p $(@D)
	touch $@

# The result: written only when no test failed (GRUB's own failures aside).
# A failure builds the reference tree and runs the failed tests there too.
$(GRUB_SUITE)/result: $(GRUB_SUITE)/built
	rm -rf $(GRUB_SUITE)/logs
	$(GRUB_SUITE_RUN) --logs $(GRUB_SUITE)/logs --result $@ \
		--reference $(GRUB_REF_OBJ) \
		--build-reference '$(MAKE) -f $(firstword $(MAKEFILE_LIST)) grub-suite-reference' \
		$(GRUB_SRC) $(GRUB_OBJ)

# The reference is configured with GRUB_OBJ's own configure arguments (it
# need not follow GRUB_OBJ when only the patches change).  2.12's tarball
# lacks grub-core/extra_deps.lst; 2.14 makes it in the build tree, where a
# copy in the source tree would hide it.
$(GRUB_REF_OBJ)/config.status: $(GRUB_TARBALL) | $(GRUB_OBJ)/config.status
	echo "$(GRUB_SHA256)  $(GRUB_TARBALL)" | sha256sum -c --quiet
	rm -rf $(GRUB_REF)
	mkdir -p $(GRUB_REF_OBJ)
	tar -C $(GRUB_REF) -xJf $(GRUB_TARBALL)
	if grep -q 'top_srcdir)/grub-core/extra_deps.lst' $(GRUB_REF_SRC)/grub-core/Makefile.am; then \
		echo 'depends bli part_gpt' > $(GRUB_REF_SRC)/grub-core/extra_deps.lst; fi
	cd $(GRUB_REF_OBJ) && eval "$(abspath $(GRUB_REF_SRC))/configure -q \
		$$($(abspath $(GRUB_OBJ))/config.status --config)"

# grub-emu as grub-emu-patches/grub.mk builds it, without libnmbl; then the
# tests'.
$(GRUB_REF)/built: $(GRUB_REF_OBJ)/config.status $(GRUB_SUITE_DEPS)
	$(MAKE) -C $(GRUB_REF_OBJ)/grub-core/lib/gnulib
	printf 'ref-built-sources: $$(BUILT_SOURCES)\n' | \
		$(MAKE) -C $(GRUB_REF_OBJ)/grub-core -f Makefile -f - ref-built-sources
	$(MAKE) -C $(GRUB_REF_OBJ)/grub-core grub-emu
	$(call grub_suite_build,$(GRUB_REF_OBJ),$(GRUB_REF_SRC))
	touch $@

grub-suite: $(GRUB_SUITE)/result
grub-suite-inputs: $(GRUB_SUITE)/built
grub-suite-reference: $(GRUB_REF)/built
.PHONY: grub-suite grub-suite-inputs grub-suite-reference
