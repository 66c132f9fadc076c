/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

#define ESP_UUID "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0"
#define NMBL "-" NMBL_VENDOR_GUID
#define MTC "MTC-eb704011-1402-11d3-8e77-00a0c969723b"
#define RECORD "NmblChainload" NMBL
#define BOOT_ID_A "0a0a0a0a-0000-4000-8000-00000000000a"
#define BOOT_ID_B "0b0b0b0b-0000-4000-8000-00000000000b"
#define BOOT_ID_C "0c0c0c0c-0000-4000-8000-00000000000c"

static struct nmbl_ctx *ctx;

/* A disk whose partition table (sfdisk's LABEL: "gpt" or "dos") lists the
 * ESP at sector 2048, as the second entry; sparse. */
static void write_disk(const char *label)
{
	char cmd[4096];

	fixture_write("/dev/vda", "", 0);
	snprintf(cmd, sizeof(cmd),
		 "truncate -s 102M %s && printf 'label: %s\\nunit: sectors\\n"
		 "x2 : start=2048, size=204800, type=U, uuid=" ESP_UUID "\\n' | "
		 "sfdisk -q %s >/dev/null 2>&1",
		 fixture_path("/dev/vda"), label, fixture_path("/dev/vda"));
	if (system(cmd) != 0) {
		fprintf(stderr, "cannot make a disk: %s\n", cmd);
		exit(2);
	}
}

/* An empty variable store, but for what every firmware has. */
static void clear_vars(void)
{
	DIR *d = opendir(fixture_path(NMBL_EFIVARS));
	struct dirent *de;
	char path[512];

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || strncmp(de->d_name, "SecureBoot-", 11) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", fixture_path(NMBL_EFIVARS), de->d_name);
		remove(path);
	}
	if (d)
		closedir(d);
}

static unsigned count_boot_options(void)
{
	DIR *d = opendir(fixture_path(NMBL_EFIVARS));
	struct dirent *de;
	unsigned n = 0;

	while (d && (de = readdir(d)))
		if (strncmp(de->d_name, "Boot", 4) == 0 &&
		    strcmp(de->d_name + 8, GLOBAL) == 0 &&
		    strspn(de->d_name + 4, "0123456789ABCDEF") == 4)
			n++;
	if (d)
		closedir(d);
	return n;
}

static void write_option(unsigned number, const char *partuuid, const char *file)
{
	unsigned char var[512];
	void *buf = NULL;
	size_t len = 0;
	char name[128];

	CHECK_INT(nmbl_load_option_build("someone's", partuuid, 1, 2048, 204800, file, &buf,
					 &len), 0);
	CHECK(len <= sizeof(var) - 4);
	memcpy(var, "\x07\0\0\0", 4);
	memcpy(var + 4, buf, len);
	snprintf(name, sizeof(name), NMBL_EFIVARS "Boot%04X" GLOBAL, number);
	fixture_write(name, var, 4 + len);
	free(buf);
}

/* A start of the firmware (the MTC count, or none) and of Linux. */
static void boot(int mtc, const char *boot_id)
{
	unsigned char v[8] = { 0x07, 0, 0, 0 };

	if (mtc >= 0) {
		v[4] = (unsigned char)mtc;
		fixture_write(NMBL_EFIVARS MTC, v, sizeof(v));
	} else {
		remove(fixture_path(NMBL_EFIVARS MTC));
	}
	fixture_text("/proc/sys/kernel/random/boot_id", boot_id);
	/* The firmware takes BootNext before it tries the option. */
	remove(fixture_path(NMBL_EFIVARS "BootNext" GLOBAL));
}

static void setup(void)
{
	clear_vars();
	boot(-1, BOOT_ID_A "\n");
	fixture_text("/sys/class/block/vda/vda1/start", "2048\n");
	fixture_text("/sys/class/block/vda/vda1/size", "204800\n");
	fixture_text("/sys/class/block/vda/vda1/partition", "1\n");
	fixture_text("/sys/class/block/vda/queue/logical_block_size", "512\n");
	write_disk("gpt");
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
	fixture_write(NMBL_EFIVARS "Boot0000" GLOBAL, "\x07\0\0\0", 4);
	{
		unsigned char var[512];

		memcpy(var, "\x07\0\0\0", 4);
		memcpy(var + 4, buf, len);
		fixture_write(NMBL_EFIVARS "Boot0001" GLOBAL, var, 4 + len);
	}
	free(buf);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/tools/HelloWorld.efi",
				     "nmbl chainload", &n), 0);
	CHECK_INT(n, 2);
	CHECK_STR(fake.calls, "efivar Boot0002" GLOBAL " 142;efivar " RECORD " 48;efivar BootNext"
		  GLOBAL " 6;");
	CHECK_INT(nmbl_read_boot_option(ctx, 2, &opt), 0);
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "HD(1,GPT,E5B0E5B0-1111-4222-8333-E5B0E5B0E5B0,0x800,0x32000)/"
		  "\\EFI\\tools\\HelloWorld.efi");
	nmbl_load_option_free(opt);

	/* The same program again in the same boot: its option, nmbl's record
	 * and BootNext already say it, and nothing is written. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/efi/TOOLS/helloworld.EFI",
				     "nmbl chainload", &n), 0);
	CHECK_INT(n, 2);
	CHECK_STR(fake.calls, "");
}

/* A menu taken over asks for program after program (or a grub.cfg does,
 * one a boot): before, each new program was a new Boot####, 300 requests
 * 300 options in the firmware's flash.  Now one option is nmbl's, each
 * program written over it: one write a program, none for a program asked
 * again. */
static void test_hundreds_of_programs_one_option(void)
{
	unsigned n = 99, writes = 0;
	char file[64];

	setup();
	write_option(0, ESP_UUID, "/EFI/Microsoft/Boot/bootmgfw.efi");
	for (int i = 0; i < 300; i++) {
		snprintf(file, sizeof(file), "/EFI/x/program-%d.efi", i);
		fake.calls[0] = '\0';
		CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, file, "nmbl chainload", &n), 0);
		CHECK_INT(n, 1);
		for (const char *c = fake.calls; (c = strstr(c, "efivar ")); c++)
			writes++;
	}
	CHECK_INT(count_boot_options(), 2);
	/* The option, its record and BootNext the first time, then the
	 * option alone. */
	CHECK_INT(writes, 3 + 299);
	fake.calls[0] = '\0';
	for (int i = 0; i < 300; i++)
		CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, file, "nmbl chainload", &n), 0);
	CHECK_STR(fake.calls, "");
	/* Windows' own option starts Windows: nothing of nmbl's is written
	 * but the record and BootNext. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/Microsoft/Boot/bootmgfw.efi",
				     "nmbl chainload", &n), 0);
	CHECK_INT(n, 0);
	CHECK_STR(fake.calls, "efivar " RECORD " 48;efivar BootNext" GLOBAL " 6;");
	CHECK_INT(count_boot_options(), 2);
}

/* However grub.cfg spells the path, one Boot#### for the program. */
static void test_one_option_per_program(void)
{
	static const char *const spellings[] = {
		"/EFI/x/a.efi",
		"\\EFI\\X\\A.EFI",
		"/EFI/./x/../x/a.efi",
		"//EFI///x//a.efi",
		"EFI\\x/./A.efi",
	};
	struct nmbl_load_option *opt = NULL;
	unsigned n = 99;

	setup();
	for (int i = 0; i < 100; i++) {
		/* Each a reboot through the firmware that started it well. */
		boot(2 * i, i % 2 ? BOOT_ID_A : BOOT_ID_B);
		CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048,
					     spellings[i % ELEMENTSOF(spellings)], "nmbl chainload",
					     &n), 0);
		CHECK_INT(n, 0);
	}
	CHECK_INT(count_boot_options(), 1);
	/* Written as the first spelling, with the firmware's separators. */
	CHECK_INT(nmbl_read_boot_option(ctx, 0, &opt), 0);
	CHECK_STR(nmbl_load_option_get_file(opt), "\\EFI\\x\\a.efi");
	nmbl_load_option_free(opt);
}

/* Another program, or the same path on another partition, takes the
 * lowest free number, or the option of the same description (the caller's
 * own) rewritten; an option someone else wrote for the program is reused
 * as it is. */
static void test_lowest_free_and_others_options(void)
{
	unsigned n = 99;

	setup();
	write_option(0, "e5b0e5b0-1111-4222-8333-000000000000", "/EFI/x/a.efi");
	write_option(2, ESP_UUID, "/EFI/shell.efi");
	write_option(5, ESP_UUID, "\\efi\\X\\b.EFI");
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	CHECK_INT(n, 1);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/c.efi", "x", &n), 0);
	CHECK_INT(n, 1);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/y/../b.efi", "x", &n), 0);
	CHECK_INT(n, 5);
	CHECK_STR(fake.calls, "efivar " RECORD " 48;efivar BootNext" GLOBAL " 6;");
	/* Two that name it: the lower one, whatever order the directory lists. */
	write_option(4, ESP_UUID, "/EFI/X/B.EFI");
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/b.efi", "x", &n), 0);
	CHECK_INT(n, 4);
	CHECK_INT(count_boot_options(), 5);
}

/* With the firmware's start count (EDK2's MTC), the start after the one
 * nmbl set BootNext in is the one that was to run the program. */
static void test_came_back_by_start_count(void)
{
	unsigned n = 99;

	setup();
	boot(7, BOOT_ID_A);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	CHECK_INT(n, 0);
	/* The reboot failed: the same start, so it is asked again. */
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);

	/* Refused by the firmware, which went on to nmbl. */
	boot(8, BOOT_ID_B);
	fake.calls[0] = '\0';
	n = 99;
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "\\EFI\\X\\A.EFI", "x", &n), -ELOOP);
	CHECK_INT(n, 0);
	CHECK_STR(fake.calls, "");
	CHECK(access(fixture_path(NMBL_EFIVARS "BootNext" GLOBAL), F_OK) < 0);
	/* All through this start: a fallback entry, the menu started again. */
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), -ELOOP);
	/* Another program is no loop (nmbl's option, rewritten for it). */
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/b.efi", "x", &n), 0);
	CHECK_INT(n, 0);

	/* b.efi booted an OS, which rebooted to nmbl later: two starts on. */
	boot(10, BOOT_ID_C);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/b.efi", "x", &n), 0);
	CHECK_INT(n, 0);
	/* A program that returned at once: nmbl in the same start again. */
	boot(11, BOOT_ID_A);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/b.efi", "x", &n), -ELOOP);
	/* The count wraps as the firmware's 32-bit one does. */
	boot(-1, BOOT_ID_B);
	fixture_write(NMBL_EFIVARS MTC, "\x07\0\0\0\xff\xff\xff\xff", 8);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/b.efi", "x", &n), 0);
	boot(0, BOOT_ID_C);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/b.efi", "x", &n), -ELOOP);
	CHECK_INT(count_boot_options(), 1);
}

/* Without it, the first Linux boot after the record is the one that came
 * back, and stays refused until the next. */
static void test_came_back_by_boot_id(void)
{
	unsigned n = 99;

	setup();
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	boot(-1, BOOT_ID_B "\n");
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), -ELOOP);
	/* Remembered as refused in this boot, in the same one variable. */
	CHECK_STR(fake.calls, "efivar " RECORD " 48;");
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), -ELOOP);
	CHECK_STR(fake.calls, "");
	boot(-1, BOOT_ID_C);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	/* Linux without a boot id: refused once, then tried. */
	remove(fixture_path("/proc/sys/kernel/random/boot_id"));
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), -ELOOP);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	CHECK_INT(count_boot_options(), 1);
}

/* A record nmbl cannot read is no record; one it cannot write is no
 * BootNext. */
static void test_record_malformed_or_unwritable(void)
{
	unsigned char good[4 + 44], bad[4 + 44 + 1];
	unsigned n = 99;
	FILE *f;

	setup();
	boot(3, BOOT_ID_A);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	f = fopen(fixture_path(NMBL_EFIVARS RECORD), "rb");
	CHECK(f && fread(good, 1, sizeof(good), f) == sizeof(good));
	if (f)
		fclose(f);
	/* As it is, the next start refuses. */
	boot(4, BOOT_ID_B);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), -ELOOP);
	/* Another version, size, a NUL in the boot id, or cut short: none. */
	memcpy(bad, good, sizeof(good));
	bad[4] = 2;
	fixture_write(NMBL_EFIVARS RECORD, bad, sizeof(good));
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	boot(5, BOOT_ID_C);
	memcpy(bad, good, sizeof(good));
	bad[4 + 1] = 1, bad[4 + 4] = 4, bad[4 + 44] = 0;
	fixture_write(NMBL_EFIVARS RECORD, bad, sizeof(bad));
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	boot(6, BOOT_ID_A);
	bad[4 + 4] = 5;
	bad[4 + 20] = '\0';
	fixture_write(NMBL_EFIVARS RECORD, bad, sizeof(good));
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	boot(7, BOOT_ID_B);
	fixture_write(NMBL_EFIVARS RECORD, "\x07", 1);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	boot(8, BOOT_ID_C);
	{
		char big[4 + 4096] = { 0x07 };

		fixture_write(NMBL_EFIVARS RECORD, big, sizeof(big));
	}
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), 0);
	/* The record first: if it cannot be written, neither is BootNext. */
	boot(10, BOOT_ID_A);
	fake.efivar_errno = -ENOSPC;
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/EFI/x/a.efi", "x", &n), -ENOSPC);
	CHECK_STR(fake.calls, "efivar " RECORD " 48;");
	fake.efivar_errno = 0;
}

static void test_refusals(void)
{
	setup();
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 4096, "/a.efi", "x", NULL), -ENXIO);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 0, "/a.efi", "x", NULL), -EINVAL);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/", 2048, "/a.efi", "x", NULL), -EINVAL);
	write_disk("dos");
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/a.efi", "x", NULL), -ENOTBLK);
	/* No table at all. */
	fixture_write("/dev/vda", "", 0);
	CHECK_INT(nmbl_set_boot_next(ctx, "/dev/vda", 2048, "/a.efi", "x", NULL), -ENOTBLK);
	write_disk("gpt");
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_new_option_then_boot_next,
		test_hundreds_of_programs_one_option,
		test_one_option_per_program,
		test_lowest_free_and_others_options,
		test_came_back_by_start_count,
		test_came_back_by_boot_id,
		test_record_malformed_or_unwritable,
		test_refusals,
		NULL,
	};

	fixture_text(SB_VAR, "");
	return unit_main_ctx(tests, &ctx);
}
