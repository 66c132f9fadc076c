/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The Boot Loader Interface: EFI variables in systemd's loader vendor space
 * that tell the booted system (bootctl status, systemd-analyze) which boot
 * loader and which entry booted it, and let it ask for an entry.
 *
 * systemd-stub, which starts nmbl's own kernel, sets the variables about
 * the image and the firmware (LoaderDevicePartUUID, LoaderImageIdentifier,
 * LoaderFirmwareInfo, LoaderFirmwareType, StubInfo) while boot services
 * still run; they are volatile and outlive the kexec.  Those a boot loader
 * sets as it chooses (LoaderInfo, LoaderFeatures, LoaderEntrySelected, the
 * LoaderTime* pair) come after ExitBootServices here, when UEFI no longer
 * lets anyone create a volatile variable: nmbl writes them non-volatile
 * instead, and all but the times only when the value differs from the one
 * stored, so booting the same entry again writes little flash.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

#define EFI_VARIABLE_NON_VOLATILE 0x1
#define EFI_VARIABLE_BOOTSERVICE_ACCESS 0x2
#define EFI_VARIABLE_RUNTIME_ACCESS 0x4
#define NMBL_LOADER_INFO "nmbl " NMBL_VERSION

/* What nmbl honours of what systemd's tools may ask (LoaderFeatures). */
#define LOADER_FEATURE_ENTRY_DEFAULT (UINT64_C(1) << 2)
#define LOADER_FEATURE_ENTRY_ONESHOT (UINT64_C(1) << 3)

/* Enough for any entry id a menu shows, as UTF-16. */
#define NMBL_BLI_VALUE_MAX 1024

static char *loader_var_path(const struct nmbl_ctx *ctx, const char *name)
{
	char *path;

	if (asprintf(&path, "%s" NMBL_EFIVARS "%s-" NMBL_LOADER_GUID, ctx->root,
		     name) < 0)
		return NULL;
	return path;
}

/* Write NAME = VALUE (LEN bytes), unless it already holds exactly that. */
static int set_loader_var(struct nmbl_ctx *ctx, const char *name,
			  const void *value, size_t len, bool always)
{
	unsigned char data[4 + NMBL_BLI_VALUE_MAX], old[sizeof(data) + 1];
	_cleanup_free_ char *path = loader_var_path(ctx, name);
	uint32_t attrs = EFI_VARIABLE_NON_VOLATILE | EFI_VARIABLE_BOOTSERVICE_ACCESS |
			 EFI_VARIABLE_RUNTIME_ACCESS;
	ssize_t n = -1;
	int fd;

	if (!path)
		return -ENOMEM;
	if (len > NMBL_BLI_VALUE_MAX)
		return -E2BIG;
	memcpy(data, &attrs, 4);
	memcpy(data + 4, value, len);
	len += 4;

	if (!always) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			n = nmbl_read_full(fd, old, sizeof(old));
			close(fd);
		}
		if (n == (ssize_t)len && memcmp(old + 4, data + 4, len - 4) == 0)
			return 0;
	}
	return nmbl_sys_efivar_write(path, data, len);
}

static int set_loader_string(struct nmbl_ctx *ctx, const char *name,
			     const char *value, bool always)
{
	_cleanup_free_ void *utf16 = NULL;
	size_t len;
	int r;

	r = nmbl_utf8_to_utf16(value, &utf16, &len);
	if (r < 0)
		return r;
	return set_loader_var(ctx, name, utf16, len, always);
}

static int set_loader_u64(struct nmbl_ctx *ctx, const char *name, uint64_t v)
{
	unsigned char le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(v >> (8 * i));
	return set_loader_var(ctx, name, le, sizeof(le), false);
}

/*
 * systemd-analyze's "firmware" and "loader" times: when the boot loader
 * started and when it handed over, in microseconds since reset.  nmbl is
 * the loader from its kernel's start (the stub's few milliseconds count as
 * firmware) to the kexec.
 */
static int set_loader_times(struct nmbl_ctx *ctx)
{
	uint64_t now, since_kernel;
	char value[32];
	int r;

	r = nmbl_sys_boot_clock(&now, &since_kernel);
	if (r < 0 || since_kernel > now) {
		nmbl_dbg(ctx, "no boot clock to time the boot with");
		return 0;
	}
	snprintf(value, sizeof(value), "%" PRIu64, now - since_kernel);
	r = set_loader_string(ctx, "LoaderTimeInitUSec", value, true);
	if (r < 0)
		return r;
	snprintf(value, sizeof(value), "%" PRIu64, now);
	return set_loader_string(ctx, "LoaderTimeExecUSec", value, true);
}

NMBL_EXPORT int nmbl_set_loader_entry(struct nmbl_ctx *ctx, const char *entry)
{
	int r;

	if (!ctx)
		return -EINVAL;
	r = set_loader_string(ctx, "LoaderInfo", NMBL_LOADER_INFO, false);
	if (r == 0)
		r = set_loader_u64(ctx, "LoaderFeatures",
				   LOADER_FEATURE_ENTRY_DEFAULT | LOADER_FEATURE_ENTRY_ONESHOT);
	if (r == 0 && entry && *entry)
		r = set_loader_string(ctx, "LoaderEntrySelected", entry, false);
	if (r == 0)
		r = set_loader_times(ctx);
	return r;
}

/* NAME's string value, or NULL when it is not set, empty or no string. */
static int read_loader_string(struct nmbl_ctx *ctx, const char *name, char **ret)
{
	_cleanup_free_ char *path = NULL, *raw = NULL;
	char *value = NULL;
	size_t len;
	int r;

	if (asprintf(&path, NMBL_EFIVARS "%s-" NMBL_LOADER_GUID, name) < 0)
		return -ENOMEM;
	r = nmbl_read_file(ctx, path, 4 + NMBL_BLI_VALUE_MAX, &raw, &len);
	if (r == -ENOENT) {
		*ret = NULL;
		return 0;
	}
	if (r < 0)
		return r;
	if (len >= 6 && len % 2 == 0) {
		r = nmbl_utf16_to_utf8(raw + 4, len - 4, &value);
		if (r < 0)
			return r;
	}
	if (value && !*value) {
		free(value);
		value = NULL;
	}
	if (!value)
		nmbl_notice(ctx, "%s is not a string; ignored", name);
	*ret = value;
	return 0;
}

NMBL_EXPORT int nmbl_take_loader_entry_requests(struct nmbl_ctx *ctx,
						char **ret_oneshot,
						char **ret_default)
{
	_cleanup_free_ char *oneshot = NULL, *def = NULL, *path = NULL;
	int r;

	if (!ctx || !ret_oneshot || !ret_default)
		return -EINVAL;
	path = loader_var_path(ctx, "LoaderEntryOneShot");
	if (!path)
		return -ENOMEM;
	if (access(path, F_OK) == 0) {
		r = read_loader_string(ctx, "LoaderEntryOneShot", &oneshot);
		if (r < 0 && r != -EFBIG)
			return r;
		/* Taken as it is read, whatever it holds, as systemd-boot
		 * does: a request that cannot be met must not stick. */
		r = nmbl_sys_efivar_delete(path);
		if (r < 0)
			return r;
	}
	r = read_loader_string(ctx, "LoaderEntryDefault", &def);
	if (r < 0 && r != -EFBIG)
		return r;
	*ret_oneshot = TAKE_PTR(oneshot);
	*ret_default = TAKE_PTR(def);
	return 0;
}
