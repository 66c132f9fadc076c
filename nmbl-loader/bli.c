/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The Boot Loader Interface: EFI variables in systemd's loader vendor space
 * that tell the booted system (bootctl status, systemd-analyze) which boot
 * loader and which entry booted it.
 *
 * systemd-stub, which starts nmbl's own kernel, sets the variables about
 * the image and the firmware (LoaderDevicePartUUID, LoaderImageIdentifier,
 * LoaderFirmwareInfo, LoaderFirmwareType, StubInfo) while boot services
 * still run; they are volatile and outlive the kexec.  Those a boot loader
 * sets as it chooses (LoaderInfo, LoaderEntrySelected) come after
 * ExitBootServices here, when UEFI no longer lets anyone create a volatile
 * variable: nmbl writes them non-volatile instead, and only when the value
 * differs from the one stored, so booting the same entry writes no flash.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

#define LOADER_GUID "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
#define EFI_VARIABLE_NON_VOLATILE 0x1
#define EFI_VARIABLE_BOOTSERVICE_ACCESS 0x2
#define EFI_VARIABLE_RUNTIME_ACCESS 0x4
#define NMBL_LOADER_INFO "nmbl " NMBL_VERSION

/* Enough for any entry id a menu shows. */
#define NMBL_BLI_VALUE_MAX 512

/* UTF-8 (ASCII in practice: ids, titles, versions) to NUL-terminated
 * UTF-16LE, as the interface wants; other bytes become '?'. */
static size_t to_utf16(const char *s, unsigned char *out, size_t size)
{
	size_t n = 0;

	for (; *s && n + 4 <= size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c >= 0x80) {
			/* Skip continuation bytes: one '?' per character. */
			if ((c & 0xc0) == 0x80)
				continue;
			c = '?';
		}
		out[n++] = c;
		out[n++] = 0;
	}
	out[n++] = 0;
	out[n++] = 0;
	return n;
}

static int set_loader_string(struct nmbl_ctx *ctx, const char *name,
			     const char *value)
{
	unsigned char data[4 + NMBL_BLI_VALUE_MAX], old[4 + NMBL_BLI_VALUE_MAX + 1];
	_cleanup_free_ char *path = NULL;
	uint32_t attrs = EFI_VARIABLE_NON_VOLATILE | EFI_VARIABLE_BOOTSERVICE_ACCESS |
			 EFI_VARIABLE_RUNTIME_ACCESS;
	size_t len;
	ssize_t n = -1;
	int fd;

	if (asprintf(&path, "%s/sys/firmware/efi/efivars/%s-" LOADER_GUID,
		     ctx->root, name) < 0)
		return -ENOMEM;
	memcpy(data, &attrs, 4);
	len = 4 + to_utf16(value, data + 4, sizeof(data) - 4);

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = nmbl_read_full(fd, old, sizeof(old));
		close(fd);
	}
	if (n == (ssize_t)len && memcmp(old + 4, data + 4, len - 4) == 0)
		return 0;
	return nmbl_sys_efivar_write(path, data, len);
}

NMBL_EXPORT int nmbl_set_loader_entry(struct nmbl_ctx *ctx, const char *entry)
{
	int r;

	if (!ctx)
		return -EINVAL;
	r = set_loader_string(ctx, "LoaderInfo", NMBL_LOADER_INFO);
	if (r == 0 && entry && *entry)
		r = set_loader_string(ctx, "LoaderEntrySelected", entry);
	return r;
}
