# make install and dist (included by the top-level Makefile): what a
# package (specs/nmbl.spec) installs, and the source tarball it builds from.

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
# Debian's kernel packages run the hooks in $(KERNEL_HOOKDIR)/postinst.d
# and postrm.d, never kernel-install: nmbl's zz-nmbl there hands their
# kernels to the plugin.  Empty where kernel-install is what kernel
# packages run (Fedora: specs/nmbl.spec sets it so).
KERNEL_HOOKDIR = $(SYSCONFDIR)/kernel
INSTALL = install

# The kernel-install plugin, when the tree has it.
KERNEL_PLUGIN = $(wildcard specs/95-nmbl.install)
# What install puts in directories of its own, which uninstall removes.
NMBL_DIRS = $(LIBEXECDIR)/nmbl $(DATADIR)/nmbl $(DRACUTDIR)/modules.d/97nmbl \
	$(DRACUTDIR)/modules.d/96nmbl-handover $(SYSCONFDIR)/nmbl
INSTALLED = $(BINDIR)/nmbl $(BINDIR)/nmbl-key $(LIBDIR)/libnmbl.so.1 $(LIBDIR)/libnmbl.so \
	$(INCLUDEDIR)/libnmbl.h $(PKGCONFIGDIR)/libnmbl.pc \
	$(MANDIR)/man8/nmbl.8 $(MANDIR)/man8/nmbl-key.8 $(MANDIR)/man8/nmbl-init.8 \
	$(MANDIR)/man3/libnmbl.3 \
	$(addprefix $(LIBEXECDIR)/nmbl/,grub-emu nmbl-init nmbl-console nmbl-fetch mkuki run-dracut) \
	$(DATADIR)/nmbl/os-release $(DATADIR)/nmbl/sbat.csv \
	$(addprefix $(DRACUTDIR)/modules.d/97nmbl/,module-setup.sh grub.cfg mdadm.conf lvm.conf dhcpcd.conf) \
	$(addprefix $(DRACUTDIR)/modules.d/96nmbl-handover/,module-setup.sh nmbl-handover.sh) \
	$(KERNELINSTALLDIR)/95-nmbl.install \
	$(SYSTEMDUNITDIR)/nmbl-bless.service $(PRESETDIR)/90-nmbl.preset \
	$(if $(KERNEL_HOOKDIR),$(addprefix $(KERNEL_HOOKDIR)/,postinst.d/zz-nmbl postrm.d/zz-nmbl))

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
	-e 's|\$${NMBL_DRACUT_MODULE:-/usr/lib/dracut/modules.d/97nmbl}|$${NMBL_DRACUT_MODULE:-$(DRACUTDIR)/modules.d/97nmbl}|' \
	-e 's|\$${NMBL_UKIDIR:-/usr/lib/nmbl}|$${NMBL_UKIDIR:-$(UKIDIR)}|'
HOOK_SUBST = -e 's|\$${NMBL_KERNEL_PLUGIN:-/usr/lib/kernel/install.d/95-nmbl.install}|$${NMBL_KERNEL_PLUGIN:-$(KERNELINSTALLDIR)/95-nmbl.install}|'

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
	$(INSTALL) -m 0755 nmbl-loader/tools/nmbl-key $(DESTDIR)$(BINDIR)/nmbl-key
	$(INSTALL) -m 0755 $(BUILD)/libnmbl.so.1 $(DESTDIR)$(LIBDIR)/libnmbl.so.1
	ln -sfn libnmbl.so.1 $(DESTDIR)$(LIBDIR)/libnmbl.so
	$(INSTALL) -m 0644 nmbl-loader/libnmbl/libnmbl.h $(DESTDIR)$(INCLUDEDIR)/libnmbl.h
	$(INSTALL) -m 0644 $(INSTALL_SUBST)/libnmbl.pc $(DESTDIR)$(PKGCONFIGDIR)/libnmbl.pc
	$(INSTALL) -m 0644 nmbl-loader/tools/nmbl.8 nmbl-loader/tools/nmbl-key.8 \
		nmbl-loader/tools/nmbl-init.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 nmbl-loader/libnmbl/libnmbl.3 $(DESTDIR)$(MANDIR)/man3/
	$(INSTALL) -m 0755 $(BUILD)/grub-emu $(BUILD)/nmbl-init $(BUILD)/nmbl-console \
		$(BUILD)/nmbl-fetch dracut/mkuki dracut/run-dracut $(DESTDIR)$(LIBEXECDIR)/nmbl/
	$(INSTALL) -m 0644 dracut/os-release dracut/sbat.csv $(DESTDIR)$(DATADIR)/nmbl/
	$(INSTALL) -m 0755 $(INSTALL_SUBST)/module-setup.sh $(DESTDIR)$(DRACUTDIR)/modules.d/97nmbl/
	$(INSTALL) -m 0644 $(addprefix $(NMBL_MODULE)/,grub.cfg mdadm.conf lvm.conf dhcpcd.conf) \
		$(DESTDIR)$(DRACUTDIR)/modules.d/97nmbl/
	$(INSTALL) -m 0755 dracut/modules.d/96nmbl-handover/module-setup.sh \
		dracut/modules.d/96nmbl-handover/nmbl-handover.sh \
		$(DESTDIR)$(DRACUTDIR)/modules.d/96nmbl-handover/
	$(if $(KERNEL_PLUGIN),sed $(PLUGIN_SUBST) $(KERNEL_PLUGIN) >$(INSTALL_SUBST)/95-nmbl.install)
	$(if $(KERNEL_PLUGIN),$(INSTALL) -m 0755 $(INSTALL_SUBST)/95-nmbl.install $(DESTDIR)$(KERNELINSTALLDIR)/)
	$(if $(KERNEL_HOOKDIR),sed $(HOOK_SUBST) specs/zz-nmbl >$(INSTALL_SUBST)/zz-nmbl)
	$(if $(KERNEL_HOOKDIR),$(INSTALL) -d $(addprefix $(DESTDIR)$(KERNEL_HOOKDIR)/,postinst.d postrm.d))
	$(if $(KERNEL_HOOKDIR),$(INSTALL) -m 0755 $(INSTALL_SUBST)/zz-nmbl $(DESTDIR)$(KERNEL_HOOKDIR)/postinst.d/)
	$(if $(KERNEL_HOOKDIR),$(INSTALL) -m 0755 $(INSTALL_SUBST)/zz-nmbl $(DESTDIR)$(KERNEL_HOOKDIR)/postrm.d/)
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

# The signed UKI for network boots beside it: a file for a TFTP or HTTP
# server to serve (nmbl-init(8)).
install-net-uki: $(BUILD)/nmbl-net.efi
	$(INSTALL) -d $(DESTDIR)$(UKIDIR)/$(KVER_OF)
	$(INSTALL) -m 0644 $(BUILD)/nmbl-net.efi $(DESTDIR)$(UKIDIR)/$(KVER_OF)/nmbl-net.efi

uninstall-uki:
	@test -f $(BUILD)/kernel/kver || { echo "$(BUILD) has built no UKI" >&2; exit 1; }
	rm -f $(DESTDIR)$(UKIDIR)/$(KVER_OF)/nmbl.efi $(DESTDIR)$(UKIDIR)/$(KVER_OF)/nmbl-net.efi
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
