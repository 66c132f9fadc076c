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
 * instead, once a boot, when the hand-over is decided (nmbl_broker_keep()),
 * and only what differs from the value stored (efivar.c), so booting the
 * same entry again writes little flash.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nmbl-private.h"

#define NMBL_LOADER_INFO "nmbl " NMBL_VERSION

/* What nmbl honours of what systemd's tools may ask (LoaderFeatures). */
#define LOADER_FEATURE_ENTRY_DEFAULT (UINT64_C(1) << 2)
#define LOADER_FEATURE_ENTRY_ONESHOT (UINT64_C(1) << 3)

/* Enough for any entry id a menu shows, as UTF-16. */
#define NMBL_BLI_VALUE_MAX 1024

static int set_loader_var(struct nmbl_ctx *ctx, const char *name,
			  const void *value, size_t len)
{
	if (len > NMBL_BLI_VALUE_MAX)
		return -E2BIG;
	return nmbl_efivar_write(ctx, NMBL_LOADER_GUID, name, value, len);
}

static int set_loader_string(struct nmbl_ctx *ctx, const char *name, const char *value)
{
	_cleanup_free_ void *utf16 = NULL;
	size_t len;
	int r;

	r = nmbl_utf8_to_utf16(value, &utf16, &len);
	if (r < 0)
		return r;
	return set_loader_var(ctx, name, utf16, len);
}

static int set_loader_u64(struct nmbl_ctx *ctx, const char *name, uint64_t v)
{
	unsigned char le[8];

	nmbl_put_le64(le, v);
	return set_loader_var(ctx, name, le, sizeof(le));
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
	r = set_loader_string(ctx, "LoaderTimeInitUSec", value);
	if (r < 0)
		return r;
	snprintf(value, sizeof(value), "%" PRIu64, now);
	return set_loader_string(ctx, "LoaderTimeExecUSec", value);
}

NMBL_EXPORT int nmbl_set_loader_entry(struct nmbl_ctx *ctx, const char *entry)
{
	int r;

	if (!ctx)
		return -EINVAL;
	r = set_loader_string(ctx, "LoaderInfo", NMBL_LOADER_INFO);
	if (r == 0)
		r = set_loader_u64(ctx, "LoaderFeatures",
				   LOADER_FEATURE_ENTRY_DEFAULT | LOADER_FEATURE_ENTRY_ONESHOT);
	if (r == 0 && entry && *entry)
		r = set_loader_string(ctx, "LoaderEntrySelected", entry);
	if (r == 0)
		r = set_loader_times(ctx);
	return r;
}

/* NAME's string value, NULL when it is empty or no string; -ENOENT when
 * it is not set.  Quiet: what a NULL means is the caller's to say. */
static int read_loader_string(struct nmbl_ctx *ctx, const char *name, char **ret)
{
	_cleanup_free_ char *raw = NULL;
	char *value = NULL;
	size_t len;
	int r;

	r = nmbl_efivar_read(ctx, NMBL_LOADER_GUID, name, NMBL_BLI_VALUE_MAX, &raw, &len);
	if (r < 0 && r != -EFBIG && r != -EBADMSG)
		return r;
	if (r == 0 && len >= 2 && len % 2 == 0) {
		r = nmbl_utf16_to_utf8(raw, len, &value);
		if (r < 0)
			return r;
	}
	if (value && !*value) {
		free(value);
		value = NULL;
	}
	*ret = value;
	return 0;
}

/* An entry request: read_loader_string(), a value that is no string
 * ignored, and said to be. */
static int read_loader_request(struct nmbl_ctx *ctx, const char *name, char **ret)
{
	int r = read_loader_string(ctx, name, ret);

	if (r == 0 && !*ret)
		nmbl_notice(ctx, "%s is not a string; ignored", name);
	return r;
}

NMBL_EXPORT int nmbl_take_loader_entry_requests(struct nmbl_ctx *ctx,
						char **ret_oneshot,
						char **ret_default)
{
	_cleanup_free_ char *oneshot = NULL, *def = NULL;
	int r;

	if (!ctx || !ret_oneshot || !ret_default)
		return -EINVAL;
	r = read_loader_request(ctx, "LoaderEntryOneShot", &oneshot);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		/* Taken as it is read, whatever it holds, as systemd-boot
		 * does: a request that cannot be met must not stick. */
		r = nmbl_efivar_delete(ctx, NMBL_LOADER_GUID, "LoaderEntryOneShot");
		if (r < 0)
			return r;
	}
	r = read_loader_request(ctx, "LoaderEntryDefault", &def);
	if (r < 0 && r != -ENOENT)
		return r;
	*ret_oneshot = TAKE_PTR(oneshot);
	*ret_default = TAKE_PTR(def);
	return 0;
}

NMBL_EXPORT int nmbl_get_loader_device_partuuid(struct nmbl_ctx *ctx, char **ret_partuuid)
{
	_cleanup_free_ char *uuid = NULL;
	unsigned char guid[16];
	int r;

	if (!ctx || !ret_partuuid)
		return -EINVAL;
	r = read_loader_string(ctx, "LoaderDevicePartUUID", &uuid);
	if (r < 0)
		return r;
	if (!uuid || nmbl_parse_guid(uuid, guid) < 0)
		return -EBADMSG;
	/* The stub writes it in capitals, udev's links are in lower case. */
	nmbl_hex_lower(uuid);
	*ret_partuuid = TAKE_PTR(uuid);
	return 0;
}
