/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

#define LOADER "-" NMBL_LOADER_GUID

static struct nmbl_ctx *ctx;

static int read_var(const char *name, unsigned char *buf, size_t size)
{
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), NMBL_EFIVARS "%s" LOADER, name);
	f = fopen(fixture_path(path), "rb");
	if (!f)
		return -1;
	n = fread(buf, 1, size, f);
	fclose(f);
	return (int)n;
}

static void test_writes_info_and_entry_as_utf16(void)
{
	unsigned char buf[256];
	/* U+00E9 and U+1F600 (a surrogate pair) as UTF-16LE. */
	static const unsigned char entry[] = {
		'D', 0, 'e', 0, 'b', 0, '>', 0, 'x', 0, 0xe9, 0,
		0x3d, 0xd8, 0x00, 0xde, 0, 0,
	};

	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, "Deb>x\xc3\xa9\xf0\x9f\x98\x80"), 0);
	CHECK_STR(fake.calls, "efivar LoaderInfo" LOADER " 22;"
			      "efivar LoaderFeatures" LOADER " 12;"
			      "efivar LoaderEntrySelected" LOADER " 22;");
	CHECK_INT(read_var("LoaderFeatures", buf, sizeof(buf)), 12);
	/* Entry default and one-shot, and nothing else. */
	CHECK(memcmp(buf + 4, "\x0c\0\0\0\0\0\0\0", 8) == 0);
	CHECK_INT(read_var("LoaderEntrySelected", buf, sizeof(buf)), 22);
	/* Non-volatile, boot service and runtime access. */
	CHECK(memcmp(buf, "\x07\0\0\0", 4) == 0);
	CHECK(memcmp(buf + 4, entry, sizeof(entry)) == 0);
	CHECK_INT(read_var("LoaderInfo", buf, sizeof(buf)), 22);
	CHECK(memcmp(buf + 4, "n\0m\0b\0l\0 \0", 10) == 0);
}

static void test_unchanged_values_are_not_written(void)
{
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, "Deb>x\xc3\xa9\xf0\x9f\x98\x80"), 0);
	CHECK_STR(fake.calls, "");
	CHECK_INT(nmbl_set_loader_entry(ctx, "other"), 0);
	CHECK_STR(fake.calls, "efivar LoaderEntrySelected" LOADER " 16;");
	/* No entry: only what nmbl is. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, NULL), 0);
	CHECK_STR(fake.calls, "");
}

static void read_string(const char *name, char *out, size_t size)
{
	unsigned char buf[256];
	int n = read_var(name, buf, sizeof(buf));
	size_t o = 0;

	for (int i = 4; i + 1 < n && o + 1 < size && buf[i]; i += 2)
		out[o++] = (char)buf[i];
	out[o] = '\0';
}

static void test_times_are_written_every_boot(void)
{
	char value[64];

	/* 9.5 s after reset, of which the kernel ran 4 s: nmbl started at 5.5 s. */
	fake.clock_now_usec = 9500000;
	fake.clock_kernel_usec = 4000000;
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, "other"), 0);
	CHECK_STR(fake.calls, "efivar LoaderTimeInitUSec" LOADER " 20;"
			      "efivar LoaderTimeExecUSec" LOADER " 20;");
	read_string("LoaderTimeInitUSec", value, sizeof(value));
	CHECK_STR(value, "5500000");
	read_string("LoaderTimeExecUSec", value, sizeof(value));
	CHECK_STR(value, "9500000");
	/* A clock that makes no sense writes no times. */
	fake.clock_kernel_usec = 10000000;
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, "other"), 0);
	CHECK_STR(fake.calls, "");
	fake.clock_now_usec = fake.clock_kernel_usec = 0;
}

static void write_var(const char *name, const void *data, size_t len)
{
	char path[256];

	snprintf(path, sizeof(path), NMBL_EFIVARS "%s" LOADER, name);
	fixture_write(path, data, len);
}

static void test_requests_oneshot_is_taken(void)
{
	/* Each literal's own NUL completes the UTF-16 one. */
	static const unsigned char fedora[] = "\x07\0\0\0f\0c\0\x33\0\x39\0*\0\0";
	static const unsigned char deb[] = "\x07\0\0\0d\0e\0b\0\0";
	char *oneshot = (char *)1, *def = (char *)1;

	write_var("LoaderEntryOneShot", fedora, sizeof(fedora));
	write_var("LoaderEntryDefault", deb, sizeof(deb));
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_take_loader_entry_requests(ctx, &oneshot, &def), 0);
	CHECK_STR(oneshot, "fc39*");
	CHECK_STR(def, "deb");
	CHECK_STR(fake.calls, "efivar-delete LoaderEntryOneShot" LOADER ";");
	free(oneshot);
	free(def);
	/* The one-shot is gone; the default stays. */
	CHECK_INT(nmbl_take_loader_entry_requests(ctx, &oneshot, &def), 0);
	CHECK(oneshot == NULL);
	CHECK_STR(def, "deb");
	free(def);
}

static void test_requests_broken_values_are_ignored(void)
{
	static const unsigned char odd[] = "\x07\0\0\0d\0e";
	static const unsigned char empty[] = "\x07\0\0\0\0\0";
	/* An unpaired surrogate is shown, not dropped. */
	static const unsigned char bad16[] = "\x07\0\0\0a\0\x00\xd8" "b\0\0\0";
	unsigned char big[4 + 2048];
	char *oneshot = (char *)1, *def = (char *)1;

	write_var("LoaderEntryOneShot", odd, sizeof(odd) - 1);
	write_var("LoaderEntryDefault", empty, sizeof(empty) - 1);
	CHECK_INT(nmbl_take_loader_entry_requests(ctx, &oneshot, &def), 0);
	CHECK(oneshot == NULL);
	CHECK(def == NULL);
	CHECK(access(fixture_path(NMBL_EFIVARS "LoaderEntryOneShot" LOADER), F_OK) < 0);

	memset(big, 'a', sizeof(big));
	write_var("LoaderEntryOneShot", big, sizeof(big));
	write_var("LoaderEntryDefault", bad16, sizeof(bad16) - 1);
	CHECK_INT(nmbl_take_loader_entry_requests(ctx, &oneshot, &def), 0);
	CHECK(oneshot == NULL);
	CHECK_STR(def, "a\xef\xbf\xbd" "b");
	free(def);
	CHECK(access(fixture_path(NMBL_EFIVARS "LoaderEntryOneShot" LOADER), F_OK) < 0);

	/* A one-shot that cannot be deleted is an error: it would stick. */
	write_var("LoaderEntryOneShot", odd, sizeof(odd) - 1);
	fake.efivar_errno = -EIO;
	CHECK_INT(nmbl_take_loader_entry_requests(ctx, &oneshot, &def), -EIO);
	fake.efivar_errno = 0;
	remove(fixture_path(NMBL_EFIVARS "LoaderEntryOneShot" LOADER));
	remove(fixture_path(NMBL_EFIVARS "LoaderEntryDefault" LOADER));
	CHECK_INT(nmbl_take_loader_entry_requests(ctx, &oneshot, &def), 0);
	CHECK(oneshot == NULL && def == NULL);
	CHECK_INT(nmbl_take_loader_entry_requests(NULL, &oneshot, &def), -EINVAL);
}

/* Where nmbl-init waits for the ESP: systemd-stub's capitals, lower case. */
static void test_loader_device_partuuid(void)
{
	static const char uuid[] = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F9";
	static const char odd[] = "0A1B2C3D-4E5F-6071-8293-A4B5C6D7E8F/";
	unsigned char buf[4 + 2 * sizeof(uuid)] = { 7 };
	char *v = (char *)1;

	CHECK_INT(nmbl_get_loader_device_partuuid(ctx, &v), -ENOENT);
	CHECK(v == (char *)1);
	for (size_t i = 0; i < sizeof(uuid); i++)
		buf[4 + 2 * i] = (unsigned char)uuid[i];
	write_var("LoaderDevicePartUUID", buf, sizeof(buf));
	CHECK_INT(nmbl_get_loader_device_partuuid(ctx, &v), 0);
	CHECK_STR(v, "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9");
	free(v);
	for (size_t i = 0; i < sizeof(odd); i++)
		buf[4 + 2 * i] = (unsigned char)odd[i];
	write_var("LoaderDevicePartUUID", buf, sizeof(buf));
	v = (char *)1;
	CHECK_INT(nmbl_get_loader_device_partuuid(ctx, &v), -EBADMSG);
	CHECK(v == (char *)1);
	remove(fixture_path(NMBL_EFIVARS "LoaderDevicePartUUID" LOADER));
	CHECK_INT(nmbl_get_loader_device_partuuid(NULL, &v), -EINVAL);
}

static void test_write_errors_are_returned(void)
{
	remove(fixture_path(NMBL_EFIVARS "LoaderInfo" LOADER));
	fake.efivar_errno = -EINVAL;
	CHECK_INT(nmbl_set_loader_entry(ctx, "x"), -EINVAL);
	fake.efivar_errno = 0;
	CHECK_INT(nmbl_set_loader_entry(NULL, "x"), -EINVAL);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_writes_info_and_entry_as_utf16,
		test_unchanged_values_are_not_written,
		test_times_are_written_every_boot,
		test_requests_oneshot_is_taken,
		test_requests_broken_values_are_ignored,
		test_loader_device_partuuid,
		test_write_errors_are_returned,
		NULL,
	};

	fixture_text(SB_VAR, "");
	return unit_main_ctx(tests, &ctx);
}
