/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

#define VARS "/sys/firmware/efi/efivars/"
#define LOADER "-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

static struct nmbl_ctx *ctx;

static int read_var(const char *name, unsigned char *buf, size_t size)
{
	char path[256];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), VARS "%s" LOADER, name);
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
	static const unsigned char entry[] = {
		'D', 0, 'e', 0, 'b', 0, '>', 0, 'x', 0, '?', 0, 0, 0,
	};

	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, "Deb>x\xc3\xa9"), 0);
	CHECK_STR(fake.calls, "efivar LoaderInfo" LOADER " 22;"
			      "efivar LoaderEntrySelected" LOADER " 18;");
	CHECK_INT(read_var("LoaderEntrySelected", buf, sizeof(buf)), 18);
	/* Non-volatile, boot service and runtime access. */
	CHECK(memcmp(buf, "\x07\0\0\0", 4) == 0);
	CHECK(memcmp(buf + 4, entry, sizeof(entry)) == 0);
	CHECK_INT(read_var("LoaderInfo", buf, sizeof(buf)), 22);
	CHECK(memcmp(buf + 4, "n\0m\0b\0l\0 \0", 10) == 0);
}

static void test_unchanged_values_are_not_written(void)
{
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, "Deb>x\xc3\xa9"), 0);
	CHECK_STR(fake.calls, "");
	CHECK_INT(nmbl_set_loader_entry(ctx, "other"), 0);
	CHECK_STR(fake.calls, "efivar LoaderEntrySelected" LOADER " 16;");
	/* No entry: only what nmbl is. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, NULL), 0);
	CHECK_STR(fake.calls, "");
}

static void test_write_errors_are_returned(void)
{
	remove(fixture_path(VARS "LoaderInfo" LOADER));
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
		test_write_errors_are_returned,
		NULL,
	};
	int r;

	fake.root = fixture_root();
	fixture_text(VARS "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", "");
	if (nmbl_new(fixture_root(), &ctx) < 0)
		return 2;
	r = unit_main(tests);
	nmbl_unref(ctx);
	return r;
}
