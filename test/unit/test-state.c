/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"


static struct nmbl_ctx *ctx;

static int lockdown(const char *text, enum nmbl_lockdown *ret)
{
	fixture_text("/sys/kernel/security/lockdown", text);
	return nmbl_get_lockdown(ctx, ret);
}

static void test_lockdown(void)
{
	enum nmbl_lockdown l = NMBL_LOCKDOWN_NONE;
	char big[NMBL_SMALL_FILE_MAX + 10];

	CHECK_INT(lockdown("none [integrity] confidentiality\n", &l), 0);
	CHECK_INT(l, NMBL_LOCKDOWN_INTEGRITY);
	CHECK_INT(lockdown("[none] integrity confidentiality\n", &l), 0);
	CHECK_INT(l, NMBL_LOCKDOWN_NONE);
	CHECK_INT(lockdown("none integrity [confidentiality]\n", &l), 0);
	CHECK_INT(l, NMBL_LOCKDOWN_CONFIDENTIALITY);
	CHECK_STR(nmbl_lockdown_to_string(l), "confidentiality");
	/* Broken files never change the answer. */
	CHECK_INT(lockdown("none integrity\n", &l), -EBADMSG);
	CHECK_INT(lockdown("[integrity\n", &l), -EBADMSG);
	CHECK_INT(lockdown("[bogus] none\n", &l), -EBADMSG);
	CHECK_INT(lockdown("", &l), -EBADMSG);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(lockdown(big, &l), -EFBIG);
	CHECK_INT(l, NMBL_LOCKDOWN_CONFIDENTIALITY);
	remove(fixture_path("/sys/kernel/security/lockdown"));
	CHECK_INT(nmbl_get_lockdown(ctx, &l), -ENOENT);
}

static void test_secure_boot(void)
{
	CHECK_INT(nmbl_get_secure_boot(ctx), -ENOENT);
	fixture_write(SB_VAR, "\x06\0\0\0\x01", 5);
	CHECK_INT(nmbl_get_secure_boot(ctx), 1);
	fixture_write(SB_VAR, "\x06\0\0\0\x00", 5);
	CHECK_INT(nmbl_get_secure_boot(ctx), 0);
	fixture_write(SB_VAR, "\x06\0\0\0", 4);
	CHECK_INT(nmbl_get_secure_boot(ctx), -EBADMSG);
	fixture_write(SB_VAR, "\x06\0\0\0\x01\x01", 6);
	CHECK_INT(nmbl_get_secure_boot(ctx), -EBADMSG);
	fixture_write(SB_VAR, "\x06\0\0\0\x02", 5);
	CHECK_INT(nmbl_get_secure_boot(ctx), -EBADMSG);
	CHECK_INT(nmbl_get_setup_mode(ctx), -ENOENT);
	fixture_write(NMBL_EFIVARS "SetupMode" GLOBAL,
		      "\x06\0\0\0\x01", 5);
	CHECK_INT(nmbl_get_setup_mode(ctx), 1);
}

static void test_kexec_loaded(void)
{
	fixture_text("/sys/kernel/kexec_loaded", "1\n");
	CHECK_INT(nmbl_get_kexec_loaded(ctx), 1);
	fixture_text("/sys/kernel/kexec_loaded", "0\n");
	CHECK_INT(nmbl_get_kexec_loaded(ctx), 0);
	fixture_text("/sys/kernel/kexec_loaded", "2\n");
	CHECK_INT(nmbl_get_kexec_loaded(ctx), -EBADMSG);
}

static void test_strerror_names_the_fault(void)
{
	CHECK(strstr(nmbl_strerror(-ENOKEY), "not trust"));
	CHECK(strstr(nmbl_strerror(-ENODATA), "not signed"));
	CHECK(strstr(nmbl_strerror(-ENOEXEC), "not a Linux kernel"));
	CHECK(strstr(nmbl_strerror(-ENOENT), "does not exist"));
	CHECK(strstr(nmbl_strerror(-EKEYREJECTED), "does not match"));
	CHECK(strstr(nmbl_strerror(-ELIBBAD), "truncated"));
	CHECK_STR(nmbl_strerror(-EACCES), strerror(EACCES));
}

#define OSI_SUPPORTED NMBL_EFIVARS "OsIndicationsSupported" GLOBAL
#define OSI NMBL_EFIVARS "OsIndications" GLOBAL

static void test_firmware_setup(void)
{
	FILE *f;
	unsigned char buf[16];

	/* No EFI, or firmware that cannot: not supported, nothing written. */
	CHECK_INT(nmbl_get_firmware_setup_supported(ctx), 0);
	CHECK_INT(nmbl_set_boot_to_firmware_setup(ctx), -EOPNOTSUPP);
	fixture_write(OSI_SUPPORTED, "\x06\0\0\0\x42\0\0\0\0\0\0\0", 12);
	CHECK_INT(nmbl_get_firmware_setup_supported(ctx), 0);
	/* Broken: too short. */
	fixture_write(OSI_SUPPORTED, "\x06\0\0\0\x01\0", 6);
	CHECK_INT(nmbl_get_firmware_setup_supported(ctx), -EBADMSG);

	fixture_write(OSI_SUPPORTED, "\x06\0\0\0\x07\0\0\0\0\0\0\0", 12);
	CHECK_INT(nmbl_get_firmware_setup_supported(ctx), 1);
	/* Other indications already asked for stay. */
	fixture_write(OSI, "\x07\0\0\0\x04\0\0\0\0\0\0\x80", 12);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_to_firmware_setup(ctx), 0);
	CHECK_STR(fake.calls, "efivar OsIndications" GLOBAL " 12;");
	f = fopen(fixture_path(OSI), "rb");
	CHECK(f && fread(buf, 1, sizeof(buf), f) == 12);
	if (f)
		fclose(f);
	CHECK(memcmp(buf, "\x07\0\0\0\x05\0\0\0\0\0\0\x80", 12) == 0);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_lockdown,
		test_secure_boot,
		test_kexec_loaded,
		test_strerror_names_the_fault,
		test_firmware_setup,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
