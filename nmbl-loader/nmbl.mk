# libnmbl and the programs (included by the top-level Makefile).
#
#   $(BUILD)/libnmbl.a, $(BUILD)/libnmbl.so.1  the library, from libnmbl/
#   $(BUILD)/nmbl, nmbl-init, nmbl-console     the programs, from tools/

LIB_SRCS = authenticode.c bli.c broker.c bootnext.c cmdline.c contain.c ctx.c decompress.c direct.c efivar.c fetch.c firmware.c handover.c identity.c image.c initramfs.c kexec.c loadopt.c lockdown.c modules.c mount.c netboot.c pe.c sign.c slots.c spawn.c strerror.c switch-root.c sys.c tpm.c uevent.c unpack.c utf16.c volumes.c watchdog.c
LIBS_NMBL = -lcrypto -lkmod -lblkid -lz -llzma -lzstd -llz4 -lbz2 -llzo2
LIB_OBJS = $(LIB_SRCS:%.c=$(BUILD)/nmbl-loader/libnmbl/%.o)

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

# Process 1 of nmbl's initramfs, one file a step of a boot.
INIT_SRCS = $(wildcard nmbl-loader/tools/nmbl-init/*.c)
$(BUILD)/nmbl-loader/tools/nmbl-init/%.o: NMBL_CFLAGS += -Inmbl-loader/tools/nmbl-init
$(BUILD)/nmbl-init: $(INIT_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libnmbl.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LIBS_NMBL)

# It contains the menu with libnmbl's nmbl_contain_menu(), which needs
# nothing else of the library.
$(BUILD)/nmbl-console: $(BUILD)/nmbl-loader/tools/nmbl-console.o $(BUILD)/libnmbl.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^

-include $(wildcard $(BUILD)/nmbl-loader/*/*.d $(BUILD)/nmbl-loader/tools/*/*.d)
