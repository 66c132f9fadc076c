/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <string.h>

#include "nmbl-private.h"
#include "unit.h"

#define ESP_UUID "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b0"

static struct nmbl_ctx *ctx;

static void test_build_and_parse_round_trip(void)
{
	struct nmbl_load_option *opt = NULL;
	const void *extra = (const void *)1;
	void *buf = NULL;
	size_t len = 0;

	CHECK_INT(nmbl_load_option_build("Windows Boot Manager", ESP_UUID, 1, 2048, 204800,
					  "/EFI/Microsoft/Boot/bootmgfw.efi", &buf, &len),
		  0);
	/* 6 + 21 UTF-16 units + HD node + file node (33 units + 4) + end */
	CHECK_INT(len, 6 + 42 + 42 + (66 + 4) + 4);
	CHECK_INT(nmbl_load_option_parse(buf, len, &opt), 0);
	CHECK_INT(nmbl_load_option_get_attributes(opt), 1);
	CHECK_STR(nmbl_load_option_get_description(opt), "Windows Boot Manager");
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "HD(1,GPT,E5B0E5B0-1111-4222-8333-E5B0E5B0E5B0,0x800,0x32000)/"
		  "\\EFI\\Microsoft\\Boot\\bootmgfw.efi");
	CHECK_STR(nmbl_load_option_get_partuuid(opt), ESP_UUID);
	CHECK_STR(nmbl_load_option_get_file(opt), "\\EFI\\Microsoft\\Boot\\bootmgfw.efi");
	CHECK_INT(nmbl_load_option_get_optional_data(opt, &extra), 0);
	opt = nmbl_load_option_free(opt);
	free(buf);

	/* A relative path starts at the root; the GUID's case does not matter. */
	CHECK_INT(nmbl_load_option_build("x", "E5B0E5B0-1111-4222-8333-E5B0E5B0E5B0", 2, 1, 2,
					  "EFI/BOOT/BOOTX64.EFI", &buf, &len),
		  0);
	CHECK_INT(nmbl_load_option_parse(buf, len, &opt), 0);
	CHECK_STR(nmbl_load_option_get_file(opt), "\\EFI\\BOOT\\BOOTX64.EFI");
	opt = nmbl_load_option_free(opt);
	free(buf);
}

static void test_build_refuses_bad_arguments(void)
{
	void *buf = NULL;
	size_t len = 0;

	CHECK_INT(nmbl_load_option_build("x", "e5b0e5b0-1111-4222-8333-e5b0e5b0e5b", 1, 0, 1,
					  "\\a.efi", &buf, &len),
		  -EINVAL);
	CHECK_INT(nmbl_load_option_build("x", "e5b0e5b0x1111-4222-8333-e5b0e5b0e5b0", 1, 0, 1,
					  "\\a.efi", &buf, &len),
		  -EINVAL);
	CHECK_INT(nmbl_load_option_build("x", "g5b0e5b0-1111-4222-8333-e5b0e5b0e5b0", 1, 0, 1,
					  "\\a.efi", &buf, &len),
		  -EINVAL);
	CHECK_INT(nmbl_load_option_build("x", ESP_UUID, 0, 0, 1, "\\a.efi", &buf, &len), -EINVAL);
	CHECK_INT(nmbl_load_option_build("x", ESP_UUID, 1, 0, 1, NULL, &buf, &len), -EINVAL);
	CHECK(buf == NULL);
}

/* One spelling for a file, the one the firmware opens; its case is kept. */
static void test_efi_paths(void)
{
	static const char *const cases[][2] = {
		{ "/EFI/x/a.efi", "\\EFI\\x\\a.efi" },
		{ "\\EFI\\X\\A.EFI", "\\EFI\\X\\A.EFI" },
		{ "/EFI/./x/../x/a.efi", "\\EFI\\x\\a.efi" },
		{ "//EFI\\/x///a.efi/", "\\EFI\\x\\a.efi" },
		{ "EFI/x/a.efi", "\\EFI\\x\\a.efi" },
		{ "/../../a.efi", "\\a.efi" },
		{ "/EFI/x/../../a.efi", "\\a.efi" },
		{ "/./.", "\\" },
		{ "", "\\" },
		{ "/EFI/.../..a/a..efi", "\\EFI\\...\\..a\\a..efi" },
	};
	void *buf = NULL;
	size_t len = 0;
	char *s = NULL;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		CHECK_INT(nmbl_efi_path_normalize(cases[i][0], &s), 0);
		CHECK_STR(s, cases[i][1]);
		free(s);
		CHECK(nmbl_efi_path_equal(cases[i][0], cases[i][1]));
	}
	CHECK(nmbl_efi_path_equal("/efi/X/A.efi", "\\EFI\\x\\a.EFI"));
	CHECK(!nmbl_efi_path_equal("/EFI/x/a.efi", "/EFI/x/a.efi.bak"));
	CHECK(!nmbl_efi_path_equal("/EFI/x/a.efi", "/EFI/y/a.efi"));
	CHECK(!nmbl_efi_path_equal("/EFI/x/a.efi", "/EFI/x"));
	/* Case folds in ASCII only, as in any locale. */
	CHECK(!nmbl_efi_path_equal("/\xc3\xa9.efi", "/\xc3\x89.efi"));

	/* The option holds that spelling. */
	CHECK_INT(nmbl_load_option_build("x", ESP_UUID, 1, 2048, 204800, "/EFI/./x//../X/a.efi",
					 &buf, &len), 0);
	/* description "x", HD node, file node (12 units and the NUL), end */
	CHECK_INT(len, 6 + 4 + 42 + (2 * 13 + 4) + 4);
	CHECK(memcmp((unsigned char *)buf + 6 + 4 + 42 + 4, "\\\0E\0F\0I\0\\\0X\0\\\0a\0", 16) == 0);
	free(buf);
}

/* What OVMF makes of its built-in shell and a virtio disk. */
static const unsigned char shell_option[] = {
	0x01, 0x00, 0x00, 0x00, 0x2c, 0x00,
	'S', 0, 'h', 0, 0xe9, 0, 'l', 0, 'l', 0, 0, 0,
	/* Fv(7CB8BDC9-F8EB-4F34-AAEA-3EE4AF6516A1) */
	0x04, 0x07, 0x14, 0x00, 0xc9, 0xbd, 0xb8, 0x7c, 0xeb, 0xf8, 0x34, 0x4f,
	0xaa, 0xea, 0x3e, 0xe4, 0xaf, 0x65, 0x16, 0xa1,
	/* FvFile(7C04A583-9E3E-4F1C-AD65-E05268D0B4D1) */
	0x04, 0x06, 0x14, 0x00, 0x83, 0xa5, 0x04, 0x7c, 0x3e, 0x9e, 0x1c, 0x4f,
	0xad, 0x65, 0xe0, 0x52, 0x68, 0xd0, 0xb4, 0xd1,
	0x7f, 0xff, 0x04, 0x00,
	/* optional data */
	'N', 'O',
};

static const unsigned char disk_option[] = {
	0x01, 0x00, 0x00, 0x00, 0x20, 0x00,
	'd', 0, 0, 0,
	/* PciRoot(0x0)/Pci(0x3,0x0)/Path(3,1,0100) then a second instance */
	0x02, 0x01, 0x0c, 0x00, 0xd0, 0x41, 0x03, 0x0a, 0x00, 0x00, 0x00, 0x00,
	0x01, 0x01, 0x06, 0x00, 0x00, 0x03,
	0x03, 0x01, 0x06, 0x00, 0x01, 0x00,
	0x7f, 0x01, 0x04, 0x00,
	0x7f, 0xff, 0x04, 0x00,
};

/* The disks firmware boots from, each as UEFI's text names it. */
static const unsigned char sata_nvme_usb_scsi[] = {
	0x01, 0x00, 0x00, 0x00, 0x2c, 0x00,
	0, 0,
	0x03, 0x12, 0x0a, 0x00, 0x01, 0x00, 0xff, 0xff, 0x00, 0x00,
	0x03, 0x17, 0x10, 0x00, 0x01, 0x00, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8,
	0x03, 0x05, 0x06, 0x00, 0x02, 0x00,
	0x03, 0x02, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00,
	0x7f, 0xff, 0x04, 0x00,
};

static void test_parse_firmware_options(void)
{
	struct nmbl_load_option *opt = NULL;
	const void *extra = NULL;

	CHECK_INT(nmbl_load_option_parse(shell_option, sizeof(shell_option), &opt), 0);
	CHECK_STR(nmbl_load_option_get_description(opt), "Sh\xc3\xa9ll");
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "Fv(7CB8BDC9-F8EB-4F34-AAEA-3EE4AF6516A1)/"
		  "FvFile(7C04A583-9E3E-4F1C-AD65-E05268D0B4D1)");
	CHECK(nmbl_load_option_get_partuuid(opt) == NULL);
	CHECK(nmbl_load_option_get_file(opt) == NULL);
	CHECK_INT(nmbl_load_option_get_optional_data(opt, &extra), 2);
	CHECK(extra && memcmp(extra, "NO", 2) == 0);
	opt = nmbl_load_option_free(opt);

	CHECK_INT(nmbl_load_option_parse(disk_option, sizeof(disk_option), &opt), 0);
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "PciRoot(0x0)/Pci(0x3,0x0)/Path(3,1,0100),");
	opt = nmbl_load_option_free(opt);

	CHECK_INT(nmbl_load_option_parse(sata_nvme_usb_scsi, sizeof(sata_nvme_usb_scsi), &opt), 0);
	CHECK_STR(nmbl_load_option_get_description(opt), "");
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "Sata(0x1,0xffff,0x0)/NVMe(0x1,01-02-03-04-05-06-07-08)/USB(0x2,0x0)/Scsi(0x0,0x1)");
	opt = nmbl_load_option_free(opt);
}

/* A network boot's option as firmware writes it: "N", then
 * PciRoot(0x0)/Pci(0x3,0x0)/MAC/[Vlan/]IPv4 or IPv6/[Uri]. */
static size_t network_option(unsigned char *buf, bool vlan, bool ipv6, const char *uri)
{
	static const unsigned char head[] = { 1, 0, 0, 0, 0, 0, 'N', 0, 0, 0,
					      2, 1, 12, 0, 0xd0, 0x41, 0x03, 0x0a, 0, 0, 0, 0,
					      1, 1, 6, 0, 0, 3 };
	size_t n = sizeof(head);

	memcpy(buf, head, n);
	buf[n++] = 3, buf[n++] = 0x0b, buf[n++] = 37, buf[n++] = 0;
	memset(buf + n, 0, 33);
	memcpy(buf + n, "\x52\x54\x00\x12\x34\x56", 6);
	buf[n + 32] = 1;
	n += 33;
	if (vlan) {
		buf[n++] = 3, buf[n++] = 0x14, buf[n++] = 6, buf[n++] = 0;
		buf[n++] = 5, buf[n++] = 0;
	}
	if (ipv6) {
		buf[n++] = 3, buf[n++] = 0x0d, buf[n++] = 60, buf[n++] = 0;
		memset(buf + n, 0, 56);
		buf[n + 16] = 0xfd, buf[n + 17] = 0x00, buf[n + 31] = 2;
		n += 56;
	} else {
		buf[n++] = 3, buf[n++] = 0x0c, buf[n++] = 27, buf[n++] = 0;
		memset(buf + n, 0, 23);
		memcpy(buf + n + 4, "\x0a\x00\x02\x02", 4);
		n += 23;
	}
	if (uri) {
		buf[n++] = 3, buf[n++] = 0x18, buf[n++] = (unsigned char)(strlen(uri) + 4);
		buf[n++] = 0;
		memcpy(buf + n, uri, strlen(uri));
		n += strlen(uri);
	}
	buf[n++] = 0x7f, buf[n++] = 0xff, buf[n++] = 4, buf[n++] = 0;
	/* The device path's length, after the attributes. */
	buf[4] = (unsigned char)(n - 10);
	return n;
}

static void test_parse_network_options(void)
{
	static const unsigned char mac[6] = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 };
	struct nmbl_load_option *opt = NULL;
	unsigned char buf[512], got[6];
	size_t len;

	/* PXE over IPv4. */
	len = network_option(buf, false, false, NULL);
	CHECK_INT(nmbl_load_option_parse(buf, len, &opt), 0);
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "PciRoot(0x0)/Pci(0x3,0x0)/MAC(525400123456,0x1)/IPv4(10.0.2.2)");
	CHECK(nmbl_load_option_get_mac(opt, got) && memcmp(got, mac, 6) == 0);
	CHECK_INT(nmbl_load_option_get_ip_version(opt), 4);
	CHECK_INT(nmbl_load_option_get_vlan(opt), -1);
	CHECK(nmbl_load_option_get_uri(opt) == NULL);
	CHECK(nmbl_load_option_get_partuuid(opt) == NULL);
	opt = nmbl_load_option_free(opt);

	/* HTTP Boot over IPv6 on VLAN 5, with its URL. */
	len = network_option(buf, true, true, "http://[fd00::2]:8080/nmbl/nmbl-net.efi");
	CHECK_INT(nmbl_load_option_parse(buf, len, &opt), 0);
	CHECK_STR(nmbl_load_option_get_device_path(opt),
		  "PciRoot(0x0)/Pci(0x3,0x0)/MAC(525400123456,0x1)/Vlan(5)/IPv6(fd00:0:0:0:0:0:0:2)/"
		  "Uri(http://[fd00::2]:8080/nmbl/nmbl-net.efi)");
	CHECK_INT(nmbl_load_option_get_ip_version(opt), 6);
	CHECK_INT(nmbl_load_option_get_vlan(opt), 5);
	CHECK_STR(nmbl_load_option_get_uri(opt), "http://[fd00::2]:8080/nmbl/nmbl-net.efi");
	opt = nmbl_load_option_free(opt);

	/* The empty Uri() of the option firmware makes for HTTP Boot. */
	len = network_option(buf, false, false, "");
	CHECK_INT(nmbl_load_option_parse(buf, len, &opt), 0);
	CHECK(nmbl_load_option_get_uri(opt) == NULL);
	opt = nmbl_load_option_free(opt);

	/* A URL with a control character is no URL. */
	len = network_option(buf, false, false, "http://a/\tb");
	CHECK_INT(nmbl_load_option_parse(buf, len, &opt), -EBADMSG);
	CHECK(opt == NULL);
	/* A disk's option has none of it. */
	CHECK_INT(nmbl_load_option_parse(shell_option, sizeof(shell_option), &opt), 0);
	CHECK(!nmbl_load_option_get_mac(opt, got));
	CHECK_INT(nmbl_load_option_get_ip_version(opt), 0);
	CHECK_INT(nmbl_load_option_get_vlan(opt), -1);
	opt = nmbl_load_option_free(opt);
}

static void test_parse_refuses_malformed_options(void)
{
	struct nmbl_load_option *opt = NULL;
	unsigned char b[sizeof(shell_option)];

	/* Every cut of a valid option that loses the end node is malformed. */
	for (size_t n = 0; n < sizeof(shell_option) - 2; n++)
		CHECK_INT(nmbl_load_option_parse(shell_option, n, &opt), -EBADMSG);
	CHECK(opt == NULL);
	/* The path list claims more than there is. */
	memcpy(b, shell_option, sizeof(b));
	b[4] = 0x40;
	CHECK_INT(nmbl_load_option_parse(b, sizeof(b), &opt), -EBADMSG);
	/* A node shorter than its header, or longer than the list. */
	memcpy(b, shell_option, sizeof(b));
	b[18 + 2] = 0x03;
	CHECK_INT(nmbl_load_option_parse(b, sizeof(b), &opt), -EBADMSG);
	b[18 + 2] = 0x40;
	CHECK_INT(nmbl_load_option_parse(b, sizeof(b), &opt), -EBADMSG);
	/* No end node inside the list. */
	memcpy(b, shell_option, sizeof(b));
	b[58] = 0x03;
	CHECK_INT(nmbl_load_option_parse(b, sizeof(b), &opt), -EBADMSG);
	CHECK(opt == NULL);
}

static void test_utf16_conversions(void)
{
	static const unsigned char pair[] = { 0x3d, 0xd8, 0x00, 0xde, 'a', 0 };
	static const unsigned char lone_low[] = { 0x00, 0xde, 'a', 0, 0, 0, 'b', 0 };
	static const unsigned char lone_high_at_end[] = { 'a', 0, 0x3d, 0xd8 };
	char *s = NULL;
	void *u = NULL;
	size_t len = 0;

	CHECK_INT(nmbl_utf16_to_utf8(pair, sizeof(pair), &s), 0);
	CHECK_STR(s, "\xf0\x9f\x98\x80" "a");
	free(s);
	/* Stops at the NUL; a lone surrogate becomes U+FFFD. */
	CHECK_INT(nmbl_utf16_to_utf8(lone_low, sizeof(lone_low), &s), 0);
	CHECK_STR(s, "\xef\xbf\xbd" "a");
	free(s);
	CHECK_INT(nmbl_utf16_to_utf8(lone_high_at_end, sizeof(lone_high_at_end), &s), 0);
	CHECK_STR(s, "a\xef\xbf\xbd");
	free(s);
	/* An odd byte at the end is no unit. */
	CHECK_INT(nmbl_utf16_to_utf8("a\0b", 3, &s), 0);
	CHECK_STR(s, "a");
	free(s);

	CHECK_INT(nmbl_utf8_to_utf16("\xf0\x9f\x98\x80" "\xc3\xa9", &u, &len), 0);
	CHECK_INT(len, 8);
	CHECK(memcmp(u, "\x3d\xd8\x00\xde\xe9\0\0\0", 8) == 0);
	free(u);
	/* Broken UTF-8 (a cut sequence, a stray continuation) becomes U+FFFD. */
	CHECK_INT(nmbl_utf8_to_utf16("\xe2\x82" "a\x80", &u, &len), 0);
	CHECK_INT(len, 8);
	CHECK(memcmp(u, "\xfd\xff" "a\0" "\xfd\xff\0\0", 8) == 0);
	free(u);
}

static void test_boot_current_from_efivarfs(void)
{
	struct nmbl_load_option *opt = NULL;
	unsigned char var[4 + sizeof(shell_option)];
	unsigned n = 0;

	fixture_write(NMBL_EFIVARS "BootCurrent" GLOBAL, "\x06\0\0\0\x0a\x00", 6);
	CHECK_INT(nmbl_get_boot_current(ctx, &n), 0);
	CHECK_INT(n, 10);
	memcpy(var, "\x07\0\0\0", 4);
	memcpy(var + 4, shell_option, sizeof(shell_option));
	fixture_write(NMBL_EFIVARS "Boot000A" GLOBAL, var, sizeof(var));
	CHECK_INT(nmbl_read_boot_option(ctx, n, &opt), 0);
	CHECK_STR(nmbl_load_option_get_description(opt), "Sh\xc3\xa9ll");
	opt = nmbl_load_option_free(opt);

	/* Broken variables: short, long, missing. */
	fixture_write(NMBL_EFIVARS "BootCurrent" GLOBAL, "\x06\0\0\0\x0a", 5);
	CHECK_INT(nmbl_get_boot_current(ctx, &n), -EBADMSG);
	fixture_write(NMBL_EFIVARS "BootCurrent" GLOBAL, "\x06\0\0\0\x0a\0\0", 7);
	CHECK_INT(nmbl_get_boot_current(ctx, &n), -EFBIG);
	fixture_write(NMBL_EFIVARS "BootCurrent" GLOBAL, "\x06\0", 2);
	CHECK_INT(nmbl_get_boot_current(ctx, &n), -EBADMSG);
	CHECK_INT(n, 10);
	fixture_write(NMBL_EFIVARS "Boot000B" GLOBAL, "\x07\0\0\0\x01", 5);
	CHECK_INT(nmbl_read_boot_option(ctx, 11, &opt), -EBADMSG);
	CHECK_INT(nmbl_read_boot_option(ctx, 12, &opt), -ENOENT);
	CHECK_INT(nmbl_read_boot_option(ctx, 0x10000, &opt), -EINVAL);
	CHECK(opt == NULL);
}

/* What nmbl-init asks at its start: started from the network, and from
 * which card (the option BootCurrent names, no LoaderDevicePartUUID);
 * which interface that card is, and the machine's other cards. */
static void test_network_boot_and_cards(void)
{
	static const char uuid[] = "E5B0E5B0-1111-4222-8333-E5B0E5B0E5B0";
	unsigned char partuuid[4 + 2 * sizeof(uuid)] = { 7 };
	struct nmbl_network_boot *boot = NULL, *other = NULL;
	struct nmbl_network_card *cards = NULL;
	unsigned char var[4 + 512];
	char *ifname = NULL;
	size_t len, n = 9;

	memcpy(var, "\x07\0\0\0", 4);
	len = network_option(var + 4, true, false, "http://10.0.2.100/nmbl/nmbl-net.efi");
	fixture_write(NMBL_EFIVARS "Boot000C" GLOBAL, var, 4 + len);
	fixture_write(NMBL_EFIVARS "BootCurrent" GLOBAL, "\x06\0\0\0\x0c\x00", 6);
	CHECK_INT(nmbl_get_network_boot(ctx, &boot), 0);
	CHECK(boot && memcmp(boot->mac, "\x52\x54\x00\x12\x34\x56", 6) == 0);
	CHECK(boot && boot->ip_version == 4 && boot->vlan == 5);
	CHECK_STR(boot ? boot->uri : NULL, "http://10.0.2.100/nmbl/nmbl-net.efi");
	/* Started from a disk's partition: no network boot. */
	for (size_t i = 0; i < sizeof(uuid); i++)
		partuuid[4 + 2 * i] = (unsigned char)uuid[i];
	fixture_write(NMBL_EFIVARS "LoaderDevicePartUUID-" NMBL_LOADER_GUID, partuuid,
		      sizeof(partuuid));
	CHECK_INT(nmbl_get_network_boot(ctx, &other), -ENOENT);
	remove(fixture_path(NMBL_EFIVARS "LoaderDevicePartUUID-" NMBL_LOADER_GUID));

	/* Cards: two of the machine's, in the order of their names; not lo,
	 * a VLAN's interface (the same address), nor an InfiniBand card. */
	CHECK_INT(nmbl_list_network_cards(ctx, &cards, &n), 0);
	CHECK_INT(n, 0);
	free(cards);
	fixture_text("/sys/class/net/lo/type", "772\n");
	fixture_text("/sys/class/net/lo/address", "00:00:00:00:00:00\n");
	fixture_text("/sys/class/net/eth1/device/vendor", "0x1af4\n");
	fixture_text("/sys/class/net/eth1/type", "1\n");
	fixture_text("/sys/class/net/eth1/address", "52:54:00:12:34:57\n");
	fixture_text("/sys/class/net/eth0/device/vendor", "0x1af4\n");
	fixture_text("/sys/class/net/eth0/type", "1\n");
	fixture_text("/sys/class/net/eth0/address", "52:54:00:12:34:56\n");
	fixture_text("/sys/class/net/eth0.5/type", "1\n");
	fixture_text("/sys/class/net/eth0.5/address", "52:54:00:12:34:56\n");
	fixture_text("/sys/class/net/ib0/device/vendor", "0x15b3\n");
	fixture_text("/sys/class/net/ib0/type", "32\n");
	fixture_text("/sys/class/net/ib0/address", "80:00:02:08:fe:80:00:00:00:00:00:00\n");
	CHECK_INT(nmbl_list_network_cards(ctx, &cards, &n), 0);
	CHECK_INT(n, 2);
	if (n == 2) {
		CHECK_STR(cards[0].ifname, "eth0");
		CHECK_STR(cards[1].ifname, "eth1");
		CHECK(memcmp(cards[1].mac, "\x52\x54\x00\x12\x34\x57", 6) == 0);
	}
	free(cards);
	CHECK_INT(nmbl_find_network_interface(ctx, boot ? boot->mac : NULL, &ifname), 0);
	CHECK_STR(ifname, "eth0");
	free(ifname);
	CHECK_INT(nmbl_list_network_cards(ctx, NULL, &n), -EINVAL);
	CHECK(other == NULL);
	boot = nmbl_network_boot_free(boot);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_build_and_parse_round_trip,
		test_build_refuses_bad_arguments,
		test_efi_paths,
		test_parse_firmware_options,
		test_parse_network_options,
		test_parse_refuses_malformed_options,
		test_utf16_conversions,
		test_boot_current_from_efivarfs,
		test_network_boot_and_cards,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
