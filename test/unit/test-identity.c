/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "nmbl-private.h"
#include "unit.h"

/* The corpus kernel says "6.1.0-test (nmbl) #1 SMP", its UKI too. */
#define GCC "(gcc-12 (Debian 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40)"

static struct nmbl_ctx *ctx;

static int running(const char *image, const char *proc_version)
{
	struct nmbl_image *img = NULL;
	int r;

	if (proc_version)
		fixture_text("/proc/version", proc_version);
	else
		remove(fixture_path("/proc/version"));
	r = nmbl_image_new_from_file(ctx, image, &img);
	if (r < 0)
		return r;
	r = nmbl_image_is_running_kernel(ctx, img);
	nmbl_image_unref(img);
	return r;
}

static void test_same_build_is_the_running_kernel(void)
{
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux version 6.1.0-test (nmbl) " GCC " #1 SMP\n"), 1);
	/* A UKI is its .linux; a signature changes nothing. */
	CHECK_INT(running(CORPUS "/uki.efi", "Linux version 6.1.0-test (nmbl) " GCC " #1 SMP\n"), 1);
	CHECK_INT(running(CORPUS "/kernel-signed.efi", "Linux version 6.1.0-test (nmbl) " GCC " #1 SMP"), 1);
}

static void test_any_other_build_is_not(void)
{
	/* Another build number, builder, release, or build date. */
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux version 6.1.0-test (nmbl) " GCC " #2 SMP\n"), 0);
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux version 6.1.0-test (other) " GCC " #1 SMP\n"), 0);
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux version 6.1.0-tes (nmbl) " GCC " #1 SMP\n"), 0);
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux version 6.1.0-test (nmbl) " GCC " #1 SMP 2025\n"), 0);
}

static void test_what_cannot_be_compared(void)
{
	CHECK_INT(running(CORPUS "/efi-program.efi", "Linux version 6.1.0-test (nmbl) " GCC " #1 SMP\n"),
		  -ENODATA);
	CHECK_INT(running(CORPUS "/kernel.efi", NULL), -ENOENT);
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux version 6.1.0-test\n"), -EBADMSG);
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux version 6.1.0-test (nmbl) (gcc #1 SMP\n"),
		  -EBADMSG);
	CHECK_INT(running(CORPUS "/kernel.efi", "Linux 6.1.0-test (nmbl) " GCC " #1 SMP\n"), -EBADMSG);
	CHECK_INT(nmbl_image_is_running_kernel(ctx, NULL), -EINVAL);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_same_build_is_the_running_kernel,
		test_any_other_build_is_not,
		test_what_cannot_be_compared,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
