/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "nmbl-private.h"
#include "unit.h"

static unsigned char buf[NMBL_BROKER_MESSAGE_MAX + 16];

/* REQUEST with N FIELDS, built and parsed again: parse's result. */
static int round_trip(uint32_t request, const char *const *fields, size_t n,
		      struct nmbl_broker_message *ret)
{
	size_t len;

	CHECK_INT(nmbl_broker_build(request, fields, n, buf, sizeof(buf), &len), 0);
	return nmbl_broker_parse(buf, len, ret);
}

static void test_each_request_with_its_fields_parses(void)
{
	struct nmbl_broker_message m;
	const char *measure[] = { "8", "grub_cmd: linux /vmlinuz" };
	const char *kernel[] = { "/dev/vda", "2048", "/vmlinuz-6.1", "(hd0,gpt2)/vmlinuz-6.1" };
	const char *boot[] = { "BOOT_IMAGE=/vmlinuz root=UUID=x ro", "debian" };
	const char *chain[] = { "/dev/nvme0n1", "0", "/EFI/Microsoft/Boot/bootmgfw.efi" };

	CHECK_INT(round_trip(NMBL_BROKER_MEASURE, measure, 2, &m), 0);
	CHECK_INT(m.request, NMBL_BROKER_MEASURE);
	CHECK_INT(m.n_fields, 2);
	CHECK_STR(m.fields[1], "grub_cmd: linux /vmlinuz");
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, kernel, 4, &m), 0);
	CHECK_STR(m.fields[2], "/vmlinuz-6.1");
	CHECK_INT(round_trip(NMBL_BROKER_INITRD, kernel, 4, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_BOOT, boot, 2, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_CHAINLOAD, chain, 3, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_FIRMWARE_SETUP, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_ENTRY_REQUESTS, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_MENU_SHOWN, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_GRUBENV_WRITE, chain, 2, &m), 0);
}

/* What a menu taken over might send, refused before anything is done. */
static void test_requests_out_of_shape_are_refused(void)
{
	struct nmbl_broker_message m;
	const char *pcr11[] = { "11", "leave-nmbl:kexec" };
	const char *pcr_octal[] = { "08", "x" };
	const char *not_disk[] = { "/etc/shadow", "0", "/vmlinuz", "x" };
	const char *disk_escape[] = { "/dev/../etc", "0", "/vmlinuz", "x" };
	const char *relative[] = { "/dev/vda", "0", "vmlinuz", "x" };
	const char *dotdot[] = { "/dev/vda", "0", "/boot/../../etc/shadow", "x" };
	const char *huge[] = { "/dev/vda", "99999999999999999999", "/vmlinuz", "x" };
	const char *sign[] = { "/dev/vda", "-1", "/vmlinuz", "x" };
	const char *three[] = { "/dev/vda", "0", "/vmlinuz" };
	size_t len;

	/* Only GRUB's PCRs: 11 is nmbl's own, for its hand-over. */
	CHECK_INT(round_trip(NMBL_BROKER_MEASURE, pcr11, 2, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_MEASURE, pcr_octal, 2, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, not_disk, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, disk_escape, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, relative, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, dotdot, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, huge, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, sign, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, three, 3, &m), -EBADMSG);
	CHECK_INT(round_trip(0, NULL, 0, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_GRUBENV_WRITE + 1, NULL, 0, &m), -EBADMSG);
	/* A field without its NUL, bytes after the last field. */
	CHECK_INT(nmbl_broker_build(NMBL_BROKER_MEASURE, pcr_octal, 2, buf, sizeof(buf), &len), 0);
	CHECK_INT(nmbl_broker_parse(buf, len - 1, &m), -EBADMSG);
	buf[len] = 'x';
	CHECK_INT(nmbl_broker_parse(buf, len + 1, &m), -EBADMSG);
	CHECK_INT(nmbl_broker_parse(buf, 7, &m), -EBADMSG);
}

static void test_command_line_within_the_limit(void)
{
	static char cmdline[NMBL_CMDLINE_MAX + 1];
	struct nmbl_broker_message m;
	const char *boot[] = { cmdline, "x" };

	memset(cmdline, 'a', NMBL_CMDLINE_MAX - 1);
	CHECK_INT(round_trip(NMBL_BROKER_BOOT, boot, 2, &m), 0);
	cmdline[NMBL_CMDLINE_MAX - 1] = 'a';
	CHECK_INT(round_trip(NMBL_BROKER_BOOT, boot, 2, &m), -EBADMSG);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_each_request_with_its_fields_parses,
		test_requests_out_of_shape_are_refused,
		test_command_line_within_the_limit,
		NULL,
	};

	return unit_main(tests);
}
