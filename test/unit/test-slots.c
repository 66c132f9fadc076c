/* SPDX-License-Identifier: GPL-3.0-or-later */
/* nmbl's A/B slots (slots.c) on a fixture ESP: the files, the Boot####
 * options, BootNext and BootOrder after each step a machine goes through,
 * with the firmware's part (BootNext spent, BootCurrent) played by hand. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

#define ESP_UUID "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0"
#define UKI CORPUS "/uki.efi"
#define KERNEL CORPUS "/kernel.efi"

static struct nmbl_ctx *ctx;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void rm_rf(const char *path)
{
	nftw(fixture_path(path), remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void set_u16(const char *name, const int *numbers, size_t n)
{
	unsigned char v[4 + 2 * 16] = { 0x07, 0, 0, 0 };
	char path[128];

	for (size_t i = 0; i < n; i++) {
		v[4 + 2 * i] = (unsigned char)numbers[i];
		v[5 + 2 * i] = (unsigned char)(numbers[i] >> 8);
	}
	snprintf(path, sizeof(path), NMBL_EFIVARS "%s" GLOBAL, name);
	fixture_write(path, v, 4 + 2 * n);
}

/* The variable as text: "0002,0001" for a list of numbers, "" when absent. */
static const char *get_u16(const char *name)
{
	static char out[5 * 32 + 1];
	char path[128];
	unsigned char v[4 + 2 * 32];
	size_t len, o = 0;
	FILE *f;

	snprintf(path, sizeof(path), NMBL_EFIVARS "%s" GLOBAL, name);
	f = fopen(fixture_path(path), "rb");
	out[0] = '\0';
	if (!f)
		return out;
	len = fread(v, 1, sizeof(v), f);
	fclose(f);
	for (size_t i = 4; i + 1 < len; i += 2)
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%04X", o ? "," : "",
				      v[i] | v[i + 1] << 8);
	return out;
}

/* Up to SIZE bytes of the fixture's file PATH; 0 when it is missing. */
static size_t read_fixture(const char *path, unsigned char *buf, size_t size)
{
	FILE *f = fopen(fixture_path(path), "rb");
	size_t len;

	if (!f)
		return 0;
	len = fread(buf, 1, size, f);
	fclose(f);
	return len;
}

static bool exists(const char *path)
{
	return access(fixture_path(path), F_OK) == 0;
}

static bool same_file(const char *fixture, const char *host)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cmp -s %s %s", fixture_path(fixture), host);
	return system(cmd) == 0;
}

/* The firmware starts: BootNext taken (when set) and booted, or not. */
static void firmware_starts(int current)
{
	remove(fixture_path(NMBL_EFIVARS "BootNext" GLOBAL));
	set_u16("BootCurrent", &current, 1);
}

static void setup(int secure_boot)
{
	static const int order[] = { 1, 0 }, current = 1;
	unsigned char sb[5] = { 0x06, 0, 0, 0, (unsigned char)secure_boot };

	rm_rf(NMBL_EFIVARS);
	rm_rf("/efi");
	rm_rf("/boot");
	fixture_write(SB_VAR, sb, sizeof(sb));
	fixture_write(NMBL_EFIVARS "Boot0000" GLOBAL, "\x07\0\0\0", 4);
	fixture_write(NMBL_EFIVARS "Boot0001" GLOBAL, "\x07\0\0\0", 4);
	set_u16("BootOrder", order, 2);
	set_u16("BootCurrent", &current, 1);
	fixture_text("/proc/self/mountinfo",
		     "22 1 254:3 / / rw,relatime - ext4 /dev/vda3 rw\n"
		     "36 22 254:1 / /efi rw,relatime - vfat /dev/vda1 rw,fmask=0077\n"
		     "37 22 254:2 / /boot rw,relatime - ext4 /dev/vda2 rw\n");
	fixture_text("/efi/EFI/BOOT/BOOTX64.EFI", "the machine's own loader");
	fixture_text("/sys/class/block/vda/vda1/start", "2048\n");
	fixture_text("/sys/class/block/vda/vda1/size", "204800\n");
	fixture_text("/sys/class/block/vda/vda1/partition", "1\n");
	fixture_text("/sys/class/block/vda/queue/logical_block_size", "512\n");
	if (!exists("/sys/dev/block/254:1")) {
		fixture_text("/sys/dev/block/.keep", "");
		CHECK_INT(symlink("../../class/block/vda/vda1", fixture_path("/sys/dev/block/254:1")), 0);
	}
	if (!exists("/dev/vda")) {
		fixture_write("/dev/vda", "", 0);
		fixture_run("truncate -s 102M %s && printf 'label: gpt\\nunit: sectors\\n"
			    "start=2048, size=204800, type=U, uuid=" ESP_UUID "\\n' | "
			    "sfdisk -q %s >/dev/null 2>&1", fixture_path("/dev/vda"),
			    fixture_path("/dev/vda"));
	}
}

static struct nmbl_slots *open_slots(void)
{
	struct nmbl_slots *s = NULL;

	CHECK_INT(nmbl_slots_open(ctx, NULL, &s), 0);
	return s;
}

/* The file the option starts, and its load option data as UTF-8. */
static void check_option(int number, const char *file, const char *data)
{
	struct nmbl_load_option *opt = NULL;
	const void *d;
	char *text = NULL;
	size_t len;

	CHECK_INT(nmbl_read_boot_option(ctx, (unsigned)number, &opt), 0);
	if (!opt)
		return;
	CHECK_STR(nmbl_load_option_get_file(opt), file);
	CHECK_STR(nmbl_load_option_get_partuuid(opt), ESP_UUID);
	len = nmbl_load_option_get_optional_data(opt, &d);
	if (data) {
		CHECK(len >= 2 && ((const char *)d)[len - 1] == 0 && ((const char *)d)[len - 2] == 0);
		CHECK_INT(nmbl_utf16_to_utf8(d, len, &text), 0);
		CHECK_STR(text, data);
	} else {
		CHECK_INT(len, 0);
	}
	free(text);
	nmbl_load_option_free(opt);
}

static void test_new_uki_is_offered_once_then_blessed(void)
{
	struct nmbl_slots *s;
	enum nmbl_bless_result res;
	char slot = 0;

	setup(0);
	s = open_slots();
	CHECK_STR(nmbl_slots_get_esp(s), "/efi");
	CHECK_INT(nmbl_slots_get_state(s, 'a'), NMBL_SLOT_EMPTY);
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), 0);
	CHECK_INT(slot, 'a');
	CHECK(same_file("/efi/EFI/nmbl/nmbl-a.efi", UKI));
	CHECK(!exists("/efi/EFI/nmbl/nmbl-a.efi.new"));
	CHECK_INT(nmbl_slots_get_boot_number(s, 'a'), 2);
	check_option(2, "\\EFI\\nmbl\\nmbl-a.efi", NULL);
	/* Offered once; BootOrder still starts what it started. */
	CHECK_STR(get_u16("BootNext"), "0002");
	CHECK_STR(get_u16("BootOrder"), "0001,0000");
	CHECK_INT(nmbl_slots_get_state(s, 'a'), NMBL_SLOT_TRIAL);
	/* Blessing before the firmware tried it changes nothing. */
	CHECK_INT(nmbl_slots_bless(s, &res), 0);
	CHECK_INT(res, NMBL_BLESS_PENDING);
	CHECK_STR(get_u16("BootOrder"), "0001,0000");
	nmbl_slots_free(s);

	firmware_starts(2);
	s = open_slots();
	CHECK_INT(nmbl_slots_get_current(s), 'a');
	CHECK_INT(nmbl_slots_bless(s, &res), 0);
	CHECK_INT(res, NMBL_BLESS_GOOD);
	CHECK_STR(get_u16("BootOrder"), "0002,0001,0000");
	CHECK_INT(nmbl_slots_get_state(s, 'a'), NMBL_SLOT_GOOD);
	/* Again, at the next boot: nothing on trial. */
	CHECK_INT(nmbl_slots_bless(s, &res), 0);
	CHECK_INT(res, NMBL_BLESS_NOTHING);
	nmbl_slots_free(s);
}

static void test_failed_trial_leaves_boot_order_and_the_good_slot(void)
{
	struct nmbl_slots *s;
	enum nmbl_bless_result res;
	char slot = 0, uki2_copy[512];

	test_new_uki_is_offered_once_then_blessed();
	/* Another UKI: the same with a byte more after its sections. */
	fixture_text("/tmp/.keep", "");
	snprintf(uki2_copy, sizeof(uki2_copy), "%s", fixture_path("/tmp/uki2.efi"));
	fixture_run("cp %s %s && printf x >>%s", UKI, uki2_copy, uki2_copy);
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, uki2_copy, NULL, &slot), 0);
	CHECK_INT(slot, 'b');
	CHECK_INT(nmbl_slots_get_boot_number(s, 'b'), 3);
	check_option(3, "\\EFI\\nmbl\\nmbl-b.efi", NULL);
	CHECK_STR(get_u16("BootNext"), "0003");
	CHECK_STR(get_u16("BootOrder"), "0002,0001,0000");
	CHECK(same_file("/efi/EFI/nmbl/nmbl-a.efi", UKI));
	nmbl_slots_free(s);

	/* Slot b panicked: the firmware went on by BootOrder, to slot a. */
	firmware_starts(2);
	s = open_slots();
	CHECK_INT(nmbl_slots_bless(s, &res), 0);
	CHECK_INT(res, NMBL_BLESS_FAILED);
	CHECK_INT(nmbl_slots_get_state(s, 'b'), NMBL_SLOT_FAILED);
	CHECK_INT(nmbl_slots_get_state(s, 'a'), NMBL_SLOT_GOOD);
	CHECK_STR(get_u16("BootOrder"), "0002,0001,0000");
	CHECK_STR(get_u16("BootNext"), "");
	nmbl_slots_free(s);

	/* A fixed UKI goes to slot b again, never over the good slot a. */
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, uki2_copy, NULL, &slot), 0);
	CHECK_INT(slot, 'b');
	CHECK_INT(nmbl_slots_get_boot_number(s, 'b'), 3);
	CHECK_STR(get_u16("BootNext"), "0003");
	nmbl_slots_free(s);
	firmware_starts(3);
	s = open_slots();
	CHECK_INT(nmbl_slots_bless(s, &res), 0);
	CHECK_INT(res, NMBL_BLESS_GOOD);
	CHECK_STR(get_u16("BootOrder"), "0003,0002,0001,0000");
	/* The next one goes to slot a, which first leaves BootOrder. */
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), 0);
	CHECK_INT(slot, 'a');
	CHECK_STR(get_u16("BootOrder"), "0003,0001,0000");
	CHECK_STR(get_u16("BootNext"), "0002");
	nmbl_slots_free(s);
}

static void test_same_uki_twice_changes_nothing(void)
{
	struct nmbl_slots *s;
	char slot = 0;

	setup(0);
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), 0);
	CHECK_INT(slot, 'a');
	CHECK_STR(fake.calls, "");
	CHECK(!exists("/efi/EFI/nmbl/nmbl-b.efi"));
	nmbl_slots_free(s);
}

static void test_interrupted_install_then_next_install_completes(void)
{
	struct nmbl_slots *s;
	char slot = 0;

	setup(0);
	/* Killed while writing: half a file beside the slot, no option. */
	fixture_text("/efi/EFI/nmbl/nmbl-a.efi.new", "MZ half");
	s = open_slots();
	fake.efivar_errno = -ENOSPC;
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), -ENOSPC);
	fake.efivar_errno = 0;
	CHECK_STR(get_u16("BootNext"), "");
	CHECK_STR(get_u16("BootOrder"), "0001,0000");
	nmbl_slots_free(s);
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), 0);
	CHECK_INT(slot, 'a');
	CHECK(!exists("/efi/EFI/nmbl/nmbl-a.efi.new"));
	CHECK(same_file("/efi/EFI/nmbl/nmbl-a.efi", UKI));
	CHECK_STR(get_u16("BootNext"), "0002");
	nmbl_slots_free(s);
}

static void test_remove_puts_back_what_nmbl_found(void)
{
	struct nmbl_slots *s;

	test_failed_trial_leaves_boot_order_and_the_good_slot();
	s = open_slots();
	CHECK_INT(nmbl_slots_remove(s), 0);
	CHECK_STR(get_u16("BootOrder"), "0001,0000");
	CHECK_STR(get_u16("BootNext"), "");
	CHECK(!exists(NMBL_EFIVARS "Boot0002" GLOBAL));
	CHECK(!exists(NMBL_EFIVARS "Boot0003" GLOBAL));
	CHECK(exists(NMBL_EFIVARS "Boot0001" GLOBAL));
	CHECK(!exists("/efi/EFI/nmbl/nmbl-a.efi"));
	CHECK(!exists("/efi/EFI/nmbl/nmbl-b.efi"));
	CHECK(!exists("/efi/EFI/nmbl/slots"));
	CHECK(exists("/efi/EFI/BOOT/BOOTX64.EFI"));
	CHECK_INT(nmbl_slots_get_state(s, 'a'), NMBL_SLOT_EMPTY);
	/* Twice is once. */
	CHECK_INT(nmbl_slots_remove(s), 0);
	nmbl_slots_free(s);
}

static void test_shim_starts_each_slot_and_its_csv_names_the_good_one(void)
{
	static const unsigned char csv[] = "\xff\xfes\0h\0i\0m\0x\0006\0004\0.\0e\0f\0i\0,\0"
					   "n\0m\0b\0l\0,\0n\0m\0b\0l\0-\0a\0.\0e\0f\0i\0,\0";
	struct nmbl_slots *s;
	enum nmbl_bless_result res;
	unsigned char buf[256];
	char slot = 0;
	size_t len;

	setup(0);
	fixture_text("/efi/EFI/fedora/BOOTX64.CSV", "fedora's own");
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, UKI, "/EFI/fedora/shimx64.efi", &slot), 0);
	CHECK(same_file("/efi/EFI/fedora/nmbl-a.efi", UKI));
	check_option(2, "\\EFI\\fedora\\shimx64.efi", "nmbl-a.efi");
	/* Another shim, while nmbl has slots beside this one: refused. */
	CHECK_INT(nmbl_slots_install(s, UKI, "\\EFI\\debian\\shimx64.efi", &slot), -EEXIST);
	nmbl_slots_free(s);
	firmware_starts(2);
	s = open_slots();
	CHECK_INT(nmbl_slots_bless(s, &res), 0);
	CHECK_INT(res, NMBL_BLESS_GOOD);
	len = read_fixture("/efi/EFI/fedora/BOOTX64.CSV", buf, sizeof(buf));
	CHECK(len > sizeof(csv) - 1 && memcmp(buf, csv, sizeof(csv) - 1) == 0);
	CHECK_INT(nmbl_slots_remove(s), 0);
	len = read_fixture("/efi/EFI/fedora/BOOTX64.CSV", buf, sizeof(buf));
	CHECK(len == 12 && memcmp(buf, "fedora's own", 12) == 0);
	nmbl_slots_free(s);
}

static void test_refused_before_the_firmware_sees_it(void)
{
	struct nmbl_slots *s;
	char slot = 0;

	/* Under Secure Boot, an unsigned UKI: the firmware would refuse it. */
	setup(1);
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), -ENODATA);
	/* A kernel is no UKI. */
	CHECK_INT(nmbl_slots_install(s, KERNEL, NULL, &slot), -ENOEXEC);
	CHECK_INT(nmbl_slots_install(s, "/nonexistent.efi", NULL, &slot), -ENOENT);
	CHECK(!exists("/efi/EFI/nmbl/nmbl-a.efi"));
	CHECK_STR(get_u16("BootNext"), "");
	CHECK_STR(get_u16("BootOrder"), "0001,0000");
	nmbl_slots_free(s);
}

static void test_the_esp_is_a_mounted_fat(void)
{
	struct nmbl_slots *s = NULL;

	setup(0);
	CHECK_INT(nmbl_slots_open(ctx, "/boot", &s), -ENOTDIR);
	CHECK_INT(nmbl_slots_open(ctx, "/srv", &s), -ENOTDIR);
	CHECK_INT(nmbl_slots_open(ctx, "relative", &s), -EINVAL);
	fixture_text("/proc/self/mountinfo", "22 1 254:3 / / rw - ext4 /dev/vda3 rw\n");
	CHECK_INT(nmbl_slots_open(ctx, NULL, &s), -ENOENT);
	CHECK(s == NULL);
	/* A trailing slash names the same mount point. */
	setup(0);
	CHECK_INT(nmbl_slots_open(ctx, "/efi/", &s), 0);
	if (s)
		CHECK_STR(nmbl_slots_get_esp(s), "/efi");
	s = nmbl_slots_free(s);
	/* A state file nmbl did not write, or one leading out of \EFI. */
	fixture_text("/efi/EFI/nmbl/slots", "hello\n");
	CHECK_INT(nmbl_slots_open(ctx, NULL, &s), -EBADMSG);
	fixture_text("/efi/EFI/nmbl/slots", "version=1\ndir=\\EFI\\..\\..\\x\n");
	CHECK_INT(nmbl_slots_open(ctx, NULL, &s), -EBADMSG);
}

/* Another system's option, as its installer writes it. */
/* Boot<NUMBER>: DESCRIPTION, starting FILE on the ESP with DATA (LEN bytes)
 * as its load options. */
static void write_option(int number, const char *description, const char *file,
			 const void *data, size_t len)
{
	_cleanup_free_ void *opt = NULL;
	unsigned char raw[4 + 1024] = { 0x07, 0, 0, 0 };
	char path[128];
	size_t opt_len = 0;

	CHECK_INT(nmbl_load_option_build_data(description, ESP_UUID, 1, 2048, 204800, file, data,
					      len, &opt, &opt_len),
		  0);
	if (!opt || opt_len > sizeof(raw) - 4)
		return;
	memcpy(raw + 4, opt, opt_len);
	snprintf(path, sizeof(path), NMBL_EFIVARS "Boot%04X" GLOBAL, number);
	fixture_write(path, raw, 4 + opt_len);
}

static void write_windows_option(int number)
{
	write_option(number, "Windows Boot Manager", "\\EFI\\Microsoft\\Boot\\bootmgfw.efi",
		     NULL, 0);
}

/* The slots file is on the ESP, which anyone with the disk may write: its
 * boot-a=0000 names Windows' option.  Before, install wrote slot a's
 * option over Boot0000 and remove deleted it and took it out of
 * BootOrder; now both leave it alone, and slot a gets a number of its own. */
static void test_slots_file_naming_another_option_leaves_it_alone(void)
{
	unsigned char before[1024], after[1024];
	size_t before_len, after_len;
	struct nmbl_slots *s;
	char slot = 0;

	setup(0);
	write_windows_option(0);
	before_len = read_fixture(NMBL_EFIVARS "Boot0000" GLOBAL, before, sizeof(before));
	fixture_text("/efi/EFI/nmbl/slots", "version=1\nboot-a=0000\nboot-b=0001\n");
	s = open_slots();
	CHECK_INT(nmbl_slots_get_boot_number(s, 'a'), -ENOENT);
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), 0);
	CHECK_INT(slot, 'a');
	CHECK_INT(nmbl_slots_get_boot_number(s, 'a'), 2);
	check_option(2, "\\EFI\\nmbl\\nmbl-a.efi", NULL);
	CHECK_STR(get_u16("BootNext"), "0002");
	after_len = read_fixture(NMBL_EFIVARS "Boot0000" GLOBAL, after, sizeof(after));
	CHECK(after_len == before_len && memcmp(before, after, before_len) == 0);
	CHECK_INT(nmbl_slots_remove(s), 0);
	nmbl_slots_free(s);
	after_len = read_fixture(NMBL_EFIVARS "Boot0000" GLOBAL, after, sizeof(after));
	CHECK(after_len == before_len && memcmp(before, after, before_len) == 0);
	CHECK(exists(NMBL_EFIVARS "Boot0001" GLOBAL));
	CHECK(!exists(NMBL_EFIVARS "Boot0002" GLOBAL));
	CHECK_STR(get_u16("BootOrder"), "0001,0000");

	/* A number that holds no option is nmbl's to take. */
	setup(0);
	fixture_text("/efi/EFI/nmbl/slots", "version=1\nboot-a=0007\n");
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, UKI, NULL, &slot), 0);
	CHECK_INT(nmbl_slots_get_boot_number(s, 'a'), 7);
	nmbl_slots_free(s);
}

/* Boot<NUMBER>, labelled "nmbl" as BOOTX64.CSV says, starting shim with
 * DATA (LEN bytes of UTF-16, no NUL, as shim's fallback writes it). */
static void write_fallback_option(int number, const char *data, size_t len)
{
	write_option(number, "nmbl", "\\EFI\\nmbl\\shimx64.efi", data, len);
}

/* The firmware lost its variables; shim's fallback read BOOTX64.CSV and
 * made the good slot's option again, at another number: that option is
 * the slot's, and this start came from the slot. */
static void test_option_shims_fallback_made_is_the_slots(void)
{
	static const char slot_a[] = "n\0m\0b\0l\0-\0a\0.\0e\0f\0i\0";
	static const char slot_b[] = "n\0m\0b\0l\0-\0b\0.\0e\0f\0i\0";
	enum nmbl_bless_result res;
	struct nmbl_slots *s;
	char slot = 0;

	setup(0);
	s = open_slots();
	CHECK_INT(nmbl_slots_install(s, UKI, "/EFI/nmbl/shimx64.efi", &slot), 0);
	CHECK_INT(nmbl_slots_get_boot_number(s, 'a'), 2);
	nmbl_slots_free(s);
	firmware_starts(2);
	s = open_slots();
	CHECK_INT(nmbl_slots_bless(s, &res), 0);
	nmbl_slots_free(s);

	remove(fixture_path(NMBL_EFIVARS "Boot0002" GLOBAL));
	write_fallback_option(3, slot_b, sizeof(slot_b) - 1);
	write_fallback_option(4, slot_a, sizeof(slot_a) - 1);
	firmware_starts(4);
	s = open_slots();
	CHECK_INT(nmbl_slots_get_boot_number(s, 'a'), 4);
	CHECK_INT(nmbl_slots_get_current(s), 'a');
	nmbl_slots_free(s);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_new_uki_is_offered_once_then_blessed,
		test_failed_trial_leaves_boot_order_and_the_good_slot,
		test_same_uki_twice_changes_nothing,
		test_interrupted_install_then_next_install_completes,
		test_remove_puts_back_what_nmbl_found,
		test_shim_starts_each_slot_and_its_csv_names_the_good_one,
		test_refused_before_the_firmware_sees_it,
		test_the_esp_is_a_mounted_fat,
		test_slots_file_naming_another_option_leaves_it_alone,
		test_option_shims_fallback_made_is_the_slots,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
