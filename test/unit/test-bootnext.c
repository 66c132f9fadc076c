/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

#define VARS "/sys/firmware/efi/efivars/"
#define GLOBAL "-8be4df61-93ca-11d2-aa0d-00e098032b8c"
#define ESP_UUID "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0"

static struct nmbl_ctx *ctx;

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* A disk whose GPT lists the ESP at sector 2048 (the second entry). */
static void write_disk(const char *signature)
{
	static unsigned char disk[512 * 34];
	static const unsigned char guid[16] = {
		0xb0, 0xe5, 0xb0, 0xe5, 0x11, 0x11, 0x22, 0x42,
		0x83, 0x33, 0xe5, 0xb0, 0xe5, 0xb0, 0xe5, 0xb0,
	};
	unsigned char *e;

	memset(disk, 0, sizeof(disk));
	memcpy(disk + 512, signature, 8);
	put64(disk + 512 + 72, 2);
	put32(disk + 512 + 80, 128);
	put32(disk + 512 + 84, 128);
	e = disk + 1024 + 128;
	memcpy(e + 16, guid, 16);
	put64(e + 32, 2048);
	put64(e + 40, 2048 + 204800 - 1);
	fixture_write("/dev/vda", disk, sizeof(disk));
}

static void setup(void)
{
	fixture_text("/sys/class/block/vda/vda1/start", "2048\n");
	fixture_text("/sys/class/block/vda/vda1/size", "204800\n");
	fixture_text("/sys/class/block/vda/vda1/partition", "1\n");
	fixture_text("/sys/class/block/vda/queue/logical_block_size", "512\n");
	write_disk("EFI PART");
}

static void test_new_option_then_boot_next(void)
{
	struct nmbl_load_option *opt = NULL;
	void *buf = NULL;
	size_t len;
	unsigned n = 99;

	setup();
	/* Boot0000 and Boot0001 taken by the firmware's own options. */
	CHECK_INT(nmbl_load_option_build("UEFI Shell", ESP_UUID, 1, 2048, 204800, "/shell.efi",
					 &buf, &len), 0);
	fixture_write(VARS "Boot0000" GLOBAL, "\x07\0\0\0", 4);
	{
		unsigned char var[512];

		memcpy(var, "\x07\0\0\0", 4);
		memcpy(var + 4, buf, len);
		fixture_write(VARS "Boot0001" GLOBAL, var, 4 + len);
	}
	free(buf);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/tools/HelloWorld.efi",
				     "nmbl chainload", &n), 0);
	CHECK_INT(n, 2);
	CHECK_STR(fake.calls, "efivar Boot0002" GLOBAL " 142;efivar BootNext" GLOBAL " 6;");
	CHECK_INT(nmbl_read_boot_option(ctx, 2, &opt), 0);
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "HD(1,GPT,E5B0E5B0-1111-4222-8333-E5B0E5B0E5B0,0x800,0x32000)/"
		  "\\EFI\\tools\\HelloWorld.efi");
	nmbl_load_option_free(opt);

	/* The same program again: its option is reused, only BootNext changes. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/efi/TOOLS/helloworld.EFI",
				     "nmbl chainload", &n), 0);
	CHECK_INT(n, 2);
	CHECK_STR(fake.calls, "efivar BootNext" GLOBAL " 6;");
}

static void test_refusals(void)
{
	setup();
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 4096, "/a.efi", "x", NULL), -ENXIO);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 0, "/a.efi", "x", NULL), -EINVAL);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/", 2048, "/a.efi", "x", NULL), -EINVAL);
	write_disk("NOT GPT!");
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/a.efi", "x", NULL), -ENOTBLK);
	/* A table that claims more entries than any disk has. */
	write_disk("EFI PART");
	{
		FILE *f = fopen(fixture_path("/dev/vda"), "r+b");
		unsigned char big[4];

		put32(big, 100000);
		CHECK(f && fseek(f, 512 + 80, SEEK_SET) == 0 && fwrite(big, 1, 4, f) == 4);
		if (f)
			fclose(f);
	}
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/a.efi", "x", NULL), -EBADMSG);
	/* Cut short: the entries are not there. */
	fixture_write("/dev/vda", "", 0);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/a.efi", "x", NULL), -EBADMSG);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_new_option_then_boot_next,
		test_refusals,
		NULL,
	};

	fixture_text(VARS "SecureBoot" GLOBAL, "");
	return unit_main_ctx(tests, &ctx);
}
