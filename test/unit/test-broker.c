/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static struct nmbl_ctx *ctx;

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
	const char *kernel[] = { "/dev/vda", "2048", "/vmlinuz-6.1", "(hd0,gpt2)/vmlinuz-6.1",
				 "BOOT_IMAGE=/vmlinuz root=UUID=x ro" };
	const char *boot[] = { "debian" };
	const char *initrd[] = { "/dev/vda", "2048", "/initrd.img", "/initrd.img", "1" };
	const char *chain[] = { "/dev/nvme0n1", "0", "/EFI/Microsoft/Boot/bootmgfw.efi" };
	const char *env[] = { "/dev/vda", "2048", "/grub2/grubenv" };
	const char *fetch_url[] = { "https://boot.example.org:8443/grub/grub.cfg-01-52-54-00-12-34-56" };
	const char *kernel_url[] = { "tftp://10.0.2.2/images/pxeboot/vmlinuz",
				     "(tftp)/images/pxeboot/vmlinuz",
				     "BOOT_IMAGE=(tftp)/images/pxeboot/vmlinuz ip=dhcp" };
	const char *initrd_url[] = { "http://[fd00::2]/initrd.img", "(http,[fd00::2])/initrd.img",
				     "0" };

	CHECK_INT(round_trip(NMBL_BROKER_MEASURE, measure, 2, &m), 0);
	CHECK_INT(m.request, NMBL_BROKER_MEASURE);
	CHECK_INT(m.n_fields, 2);
	CHECK_STR(m.fields[1], "grub_cmd: linux /vmlinuz");
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, kernel, 5, &m), 0);
	CHECK_STR(m.fields[2], "/vmlinuz-6.1");
	CHECK_STR(m.fields[4], "BOOT_IMAGE=/vmlinuz root=UUID=x ro");
	CHECK_INT(round_trip(NMBL_BROKER_INITRD, initrd, 5, &m), 0);
	CHECK_STR(m.fields[4], "1");
	CHECK_INT(round_trip(NMBL_BROKER_BOOT, boot, 1, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_CHAINLOAD, chain, 3, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_FIRMWARE_SETUP, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_ENTRY_REQUESTS, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_MENU_SHOWN, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_GRUBENV_WRITE, env, 3, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_FETCH, fetch_url, 1, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL_URL, kernel_url, 3, &m), 0);
	CHECK_STR(m.fields[1], "(tftp)/images/pxeboot/vmlinuz");
	CHECK_INT(round_trip(NMBL_BROKER_INITRD_URL, initrd_url, 3, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_CANCEL, NULL, 0, &m), 0);
}

/* What a menu taken over might send, refused before anything is done. */
static void test_requests_out_of_shape_are_refused(void)
{
	struct nmbl_broker_message m;
	const char *pcr11[] = { "11", "leave-nmbl:kexec" };
	const char *pcr_octal[] = { "08", "x" };
	const char *not_disk[] = { "/etc/shadow", "0", "/vmlinuz", "x", "BOOT_IMAGE=x" };
	const char *disk_escape[] = { "/dev/../etc", "0", "/vmlinuz", "x", "BOOT_IMAGE=x" };
	const char *relative[] = { "/dev/vda", "0", "vmlinuz", "x", "BOOT_IMAGE=x" };
	const char *dotdot[] = { "/dev/vda", "0", "/boot/../../etc/shadow", "x", "BOOT_IMAGE=x" };
	const char *huge[] = { "/dev/vda", "99999999999999999999", "/vmlinuz", "x", "BOOT_IMAGE=x" };
	const char *sign[] = { "/dev/vda", "-1", "/vmlinuz", "x", "BOOT_IMAGE=x" };
	const char *four[] = { "/dev/vda", "0", "/vmlinuz", "x" };
	/* A line GRUB's linux never makes: what would be measured of it? */
	const char *bare[] = { "/dev/vda", "0", "/vmlinuz", "x", "root=/dev/vda2 init=/bin/sh" };
	static const char *const bad_urls[] = {
		"file:///etc/shadow", "ftp://10.0.2.2/x", "tftp:///x", "http://", "http://a b/c",
		"http://a/\nb", "http://a/\x7f", "-o/tmp/x", "TFTP://10.0.2.2/x",
	};
	size_t len;

	/* Only what nmbl-fetch reads, spelt so that nothing reads it another
	 * way. */
	for (size_t i = 0; i < ELEMENTSOF(bad_urls); i++) {
		const char *f[] = { bad_urls[i] };

		CHECK_INT(round_trip(NMBL_BROKER_FETCH, f, 1, &m), -EBADMSG);
	}
	/* Only GRUB's PCRs: 11 is nmbl's own, for its hand-over. */
	CHECK_INT(round_trip(NMBL_BROKER_MEASURE, pcr11, 2, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_MEASURE, pcr_octal, 2, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, not_disk, 5, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, disk_escape, 5, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, relative, 5, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, dotdot, 5, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, huge, 5, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, sign, 5, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, four, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, bare, 5, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_INITRD, not_disk, 4, &m), -EBADMSG);
	CHECK_INT(round_trip(NMBL_BROKER_GRUBENV_WRITE, dotdot, 3, &m), -EBADMSG);
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
	static char cmdline[NMBL_CMDLINE_MAX + 1] = "BOOT_IMAGE=";
	struct nmbl_broker_message m;
	const char *kernel[] = { "/dev/vda", "0", "/vmlinuz", "x", cmdline };

	memset(cmdline + strlen(cmdline), 'a', NMBL_CMDLINE_MAX - 1 - strlen(cmdline));
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, kernel, 5, &m), 0);
	cmdline[NMBL_CMDLINE_MAX - 1] = 'a';
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, kernel, 5, &m), -EBADMSG);
}

/* The broker's side, one request at a time, over a real socket pair: the
 * menu's call in this thread, the broker's answer in another. */
struct exchange {
	struct nmbl_broker *broker;
	int served;
};

static void *serve_one(void *data)
{
	struct exchange *x = data;

	x->served = nmbl_broker_serve(x->broker);
	return NULL;
}

static int ask(struct nmbl_broker *broker, int menu, enum nmbl_broker_request request,
	       const char *const *fields, size_t n, int data, char **reply, size_t n_reply)
{
	struct exchange x = { .broker = broker };
	pthread_t t;
	int r;

	CHECK_INT(pthread_create(&t, NULL, serve_one, &x), 0);
	r = nmbl_broker_call(menu, request, fields, n, data, reply, n_reply);
	pthread_join(t, NULL);
	CHECK_INT(x.served, 1);
	return r;
}

static int sealed(const char *text, bool seal)
{
	int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	CHECK(fd >= 0);
	CHECK_INT(write(fd, text, strlen(text)), (long long)strlen(text));
	if (seal)
		CHECK_INT(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE), 0);
	return fd;
}

static void test_broker_answers_and_refuses(void)
{
	static const unsigned char fedora[] = "\x07\0\0\0f\0c\0\x33\0\x39\0*\0\0";
	const char *measure[] = { "8", "grub_cmd: echo" };
	const char *pcr11[] = { "11", "leave-nmbl:kexec" };
	const char *boot[] = { "fedora" };
	struct nmbl_broker *broker = NULL;
	char *reply[2] = { NULL, NULL };
	int sv[2], fd;

	CHECK_INT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_INT(nmbl_broker_new(ctx, sv[0], &broker), 0);

	/* No watchdog named: nothing to stop. */
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MENU_SHOWN, NULL, 0, -1, NULL, 0), 0);
	/* A measurement needs its data, sealed; without a TPM it extends nothing. */
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MEASURE, measure, 2, -1, NULL, 0), -EBADMSG);
	fd = sealed("echo", false);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MEASURE, measure, 2, fd, NULL, 0), -EBADMSG);
	close(fd);
	fd = sealed("echo", true);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MEASURE, measure, 2, fd, NULL, 0), 0);
	/* PCR 11 is nmbl's own. */
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MEASURE, pcr11, 2, fd, NULL, 0), -EBADMSG);
	close(fd);
	/* Nothing to boot before a kernel was asked for. */
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), -ENOENT);
	free(reply[0]);
	free(reply[1]);
	CHECK_INT(nmbl_broker_get_outcome(broker), NMBL_BROKER_NOTHING);

	/* The one-shot entry, taken; no default. */
	fixture_write(NMBL_EFIVARS "LoaderEntryOneShot-" NMBL_LOADER_GUID, fedora, sizeof(fedora));
	fake.calls[0] = '\0';
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_ENTRY_REQUESTS, NULL, 0, -1, reply, 2), 1);
	CHECK_STR(reply[0], "fc39*");
	CHECK_STR(reply[1], "");
	CHECK_STR(fake.calls, "efivar-delete LoaderEntryOneShot-" NMBL_LOADER_GUID ";");
	free(reply[0]);
	free(reply[1]);

	/* The menu gone: the conversation ends. */
	close(sv[1]);
	CHECK_INT(nmbl_broker_serve(broker), 0);
	nmbl_broker_free(broker);
	close(sv[0]);
}

/*
 * A menu taken over, answered by the real broker.  The machine runs the
 * corpus kernel ("6.1.0-test (nmbl) #1 SMP") from the ext4 /dev/vda3, at
 * sector 4096 of /dev/vda, which holds /boot: its files are where nmbl
 * mounts it (the seam's mount does nothing).
 */
#define PROC_VERSION "Linux version 6.1.0-test (nmbl) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP\n"
#define LINE "BOOT_IMAGE=/vmlinuz root=UUID=7a46e7a1 ro console=ttyS0,115200 quiet"
#define MOUNTED "/run/nmbl/mnt/vda3"

static void machine(void)
{
	static unsigned char ext4_sb[2048];
	char cmd[8192];

	ext4_sb[1080] = 0x53;
	ext4_sb[1081] = 0xef;
	memset(&fake, 0, sizeof(fake));
	fake.root = fixture_root();
	fixture_text("/proc/version", PROC_VERSION);
	fixture_text("/proc/cmdline", LINE "\n");
	fixture_text("/proc/sys/kernel/printk", "4\t4\t1\t7\n");
	fixture_text("/proc/filesystems", "\text4\n");
	fixture_text("/proc/self/mountinfo", "22 1 0:5 / /dev rw - devtmpfs devtmpfs rw\n");
	fixture_text("/sys/class/block/vda/vda3/start", "4096\n");
	fixture_text("/sys/class/block/vda3/partition", "3\n");
	fixture_write("/dev/vda3", ext4_sb, sizeof(ext4_sb));
	fixture_text("/dev/disk/by-uuid/.keep", "");
	unlink(fixture_path("/dev/disk/by-uuid/7a46e7a1"));
	CHECK_INT(symlink("../../vda3", fixture_path("/dev/disk/by-uuid/7a46e7a1")), 0);
	fixture_text(MOUNTED "/.keep", "");
	snprintf(cmd, sizeof(cmd), "cp %s %s", CORPUS "/kernel.efi", fixture_path(MOUNTED "/vmlinuz"));
	fixture_run("%s", cmd);
	fixture_text("/sysroot/sbin/init", "#!\n");
	chmod(fixture_path("/sysroot/sbin/init"), 0755);
}

/* A broker for a menu at *MENU, on CTX. */
static struct nmbl_broker *new_broker(struct nmbl_ctx *c, int sv[2])
{
	struct nmbl_broker *broker = NULL;

	CHECK_INT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_INT(nmbl_broker_new(c, sv[0], &broker), 0);
	return broker;
}

static void end_broker(struct nmbl_broker *broker, int sv[2])
{
	nmbl_broker_free(broker);
	close(sv[0]);
	close(sv[1]);
}

static unsigned efivar_writes(void)
{
	unsigned n = 0;

	for (const char *c = fake.calls; (c = strstr(c, "efivar")); c++)
		n++;
	return n;
}

static const char *const kernel_request[] = { "/dev/vda", "4096", "/vmlinuz", "/vmlinuz", LINE };

/* BOOT asked again and again, its direct boot failing at the root each
 * time: before, each wrote LoaderTimeInitUSec, LoaderTimeExecUSec and
 * more into the firmware's flash (200 requests, 602 writes).  Now the Boot
 * Loader Interface is written once, when nmbl's init keeps the hand-over,
 * and a prepared hand-over takes no further request. */
static void test_boot_loader_interface_written_once_kept(void)
{
	const char *boot[] = { "debian-6.1" }, *measure[] = { "8", "grub_cmd: boot" };
	const char *chain[] = { "/dev/vda", "4096", "/EFI/x.efi" };
	char *reply[2] = { NULL, NULL };
	struct nmbl_broker *broker;
	unsigned writes = 0;
	int sv[2], fd;

	machine();
	fake.clock_now_usec = 9000000;
	fake.clock_kernel_usec = 2000000;
	broker = new_broker(ctx, sv);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_KERNEL, kernel_request, 5, -1, NULL, 0), 0);
	fake.mount_errno = -EIO;
	for (int i = 0; i < 200; i++) {
		fake.calls[0] = '\0';
		CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), -EIO);
		CHECK_STR(reply[0], "root");
		writes += efivar_writes();
		free(reply[0]);
		free(reply[1]);
	}
	CHECK_INT(writes, 0);
	CHECK_INT(nmbl_broker_get_outcome(broker), NMBL_BROKER_NOTHING);

	fake.mount_errno = 0;
	fake.calls[0] = '\0';
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), 0);
	CHECK_STR(reply[0], "direct");
	free(reply[0]);
	free(reply[1]);
	CHECK_INT(nmbl_broker_get_outcome(broker), NMBL_BROKER_DIRECT);
	CHECK_INT(efivar_writes(), 0);
	/* One hand-over a session: nothing more is done. */
	fd = sealed("boot", true);
	for (int i = 0; i < 100; i++) {
		CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, NULL, 0), -EALREADY);
		CHECK_INT(ask(broker, sv[1], NMBL_BROKER_KERNEL, kernel_request, 5, -1, NULL, 0),
			  -EALREADY);
		CHECK_INT(ask(broker, sv[1], NMBL_BROKER_CHAINLOAD, chain, 3, -1, NULL, 0), -EALREADY);
		CHECK_INT(ask(broker, sv[1], NMBL_BROKER_FIRMWARE_SETUP, NULL, 0, -1, NULL, 0),
			  -EALREADY);
		CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MEASURE, measure, 2, fd, NULL, 0), -EALREADY);
	}
	close(fd);
	CHECK_INT(efivar_writes(), 0);

	/* Kept: the record, once, now. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_broker_keep(broker), 0);
	CHECK_INT(efivar_writes(), 5);
	CHECK(strstr(fake.calls, "efivar LoaderEntrySelected-" NMBL_LOADER_GUID " 26;") != NULL);
	CHECK(strstr(fake.calls, "efivar LoaderTimeExecUSec-") != NULL);
	/* The same entry at the next boot: only the times. */
	fake.clock_now_usec = 9500000;
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_set_loader_entry(ctx, "debian-6.1"), 0);
	CHECK_INT(efivar_writes(), 2);
	CHECK(strstr(fake.calls, "efivar LoaderTimeInitUSec-") != NULL);
	CHECK(strstr(fake.calls, "efivar LoaderTimeExecUSec-") != NULL);
	end_broker(broker, sv);
}

/* A direct boot prepared and then not taken (the menu crashed, or ended
 * otherwise than it said): everything is as before it, the entry's line
 * no longer over /proc/cmdline, where nmbl's own parameters are read. */
static void test_direct_boot_not_taken_is_undone(void)
{
	const char *boot[] = { "debian-6.1" };
	const char *kernel[] = { "/dev/vda", "4096", "/vmlinuz", "/vmlinuz",
				 LINE " loglevel=7" };
	char *reply[2] = { NULL, NULL };
	struct nmbl_broker *broker;
	char level[64];
	int sv[2];

	machine();
	fixture_text("/proc/cmdline", LINE " loglevel=3\n");
	broker = new_broker(ctx, sv);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_KERNEL, kernel, 5, -1, NULL, 0), 0);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), 0);
	CHECK_STR(reply[0], "direct");
	free(reply[0]);
	free(reply[1]);
	CHECK(strstr(fake.calls, "mount /nmbl-cmdline /proc/cmdline - -;") != NULL);
	CHECK_INT(nmbl_read_small(ctx, "/proc/sys/kernel/printk", level, sizeof(level)), 1);
	fake.calls[0] = '\0';
	end_broker(broker, sv);
	CHECK_STR(fake.calls, "umount /proc/cmdline;umount /sysroot;");
	CHECK(nmbl_read_small(ctx, "/proc/sys/kernel/printk", level, sizeof(level)) > 0);
	CHECK_STR(level, "4 4 1 7");
	/* Kept, it stays. */
	broker = new_broker(ctx, sv);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_KERNEL, kernel, 5, -1, NULL, 0), 0);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), 0);
	free(reply[0]);
	free(reply[1]);
	CHECK_INT(nmbl_broker_keep(broker), 0);
	fake.calls[0] = '\0';
	end_broker(broker, sv);
	CHECK_STR(fake.calls, "");
}

/* "initrd" again: a new list (position 0).  Before, the broker forgot
 * the last list but the context held its initrds on, and a hand-over
 * through the entry's initrd unpacked every initrd measured since
 * "linux", where GRUB and kexec take the last list only. */
static void test_a_new_initrd_list_drops_the_last(void)
{
	const char *first[] = { "/dev/vda", "4096", "/a.img", "/a.img", "0" };
	const char *second[] = { "/dev/vda", "4096", "/b.img", "/b.img", "0" };
	const char *more[] = { "/dev/vda", "4096", "/c.img", "/c.img", "1" };
	struct nmbl_broker *broker;
	int sv[2];

	machine();
	fixture_text(MOUNTED "/a.img", "AAAA");
	fixture_text(MOUNTED "/b.img", "BBBB");
	fixture_text(MOUNTED "/c.img", "CCCC");
	broker = new_broker(ctx, sv);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_KERNEL, kernel_request, 5, -1, NULL, 0), 0);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_INITRD, first, 5, -1, NULL, 0), 0);
	CHECK_INT((int)ctx->n_initrds, 1);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_INITRD, second, 5, -1, NULL, 0), 0);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_INITRD, more, 5, -1, NULL, 0), 0);
	CHECK_INT((int)ctx->n_initrds, 2);
	CHECK_STR(ctx->initrds[0].path, fixture_path(MOUNTED "/b.img"));
	CHECK_STR(ctx->initrds[1].path, fixture_path(MOUNTED "/c.img"));
	end_broker(broker, sv);
	nmbl_held_initrds_clear(ctx);
}

/* The kernel's name, which the menu gave, in the kernel's log: before,
 * written with its newlines, so that a menu could forge a line of the
 * booted system's journal ("<2>sshd: ...") or a terminal's escape
 * sequence on the console.  Now one line, its control characters
 * escaped. */
static void test_kernel_log_line_stays_one_line(void)
{
	const char *kernel[] = { "/dev/vda", "4096", "/vmlinuz",
				 "/vmlinuz\n<2>sshd: Accepted password for root\x1b[2J\\", LINE };
	const char *boot[] = { "debian-6.1" };
	char *reply[2] = { NULL, NULL }, *text = NULL;
	struct nmbl_broker *broker;
	size_t len = 0;
	int sv[2];

	machine();
	fixture_text("/dev/kmsg", "");
	broker = new_broker(ctx, sv);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_KERNEL, kernel, 5, -1, NULL, 0), 0);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), 0);
	CHECK_STR(reply[0], "direct");
	free(reply[0]);
	free(reply[1]);
	CHECK_INT(nmbl_read_file(ctx, "/dev/kmsg", 4096, &text, &len), 0);
	CHECK_STR(text, "<5>nmbl: booting /vmlinuz\\x0a<2>sshd: Accepted password for root"
			"\\x1b[2J\\\\ without a second kernel: switching root\n");
	free(text);
	end_broker(broker, sv);
	unlink(fixture_path("/dev/kmsg"));
}

/* PCR 8 holds the line that boots.  Before, the menu said what the line
 * was (its own MEASURE "kernel_cmdline: ..."), and could measure the
 * usual line and boot another, with rd.break: a secret sealed to PCRs
 * 8+9 unsealed.  Now the broker measures the line KERNEL gave it, as
 * GRUB's linux words it, boots that very line, and refuses the menu's. */
static void test_command_line_measured_is_the_one_booted(void)
{
	static const char measured[] = "/vmlinuz root=UUID=7a46e7a1 ro console=ttyS0,115200 quiet";
	const char *boot[] = { "debian-6.1" };
	const char *claim[] = { "8", "kernel_cmdline: /vmlinuz root=UUID=7a46e7a1 ro quiet" };
	unsigned char digest[32], pcr[64] = { 0 };
	char *reply[2] = { NULL, NULL }, *log;
	struct nmbl_broker *broker;
	struct nmbl_ctx *c = NULL;
	unsigned n, extends;
	size_t len;
	FILE *f;
	int sv[2], fd;

	machine();
	/* Another kernel runs: this one is loaded, for kexec. */
	fixture_text("/proc/version", "Linux version 6.1.0-other (nmbl) (gcc) #2 SMP\n");
	fixture_text("/sys/firmware/acpi/tables/TPM2", "TPM2");
	fixture_text("/sys/class/tpm/tpm0/tpm_version_major", "2\n");
	fake.tpm_banks[0] = 0x000b;
	CHECK_INT(nmbl_new(fixture_root(), &c), 0);
	nmbl_set_measure(c, true);
	broker = new_broker(c, sv);

	fd = sealed("/vmlinuz root=UUID=7a46e7a1 ro quiet", true);
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MEASURE, claim, 2, fd, NULL, 0), -EPERM);
	close(fd);
	CHECK_INT(fake.tpm_extends, 0);

	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_KERNEL, kernel_request, 5, -1, NULL, 0), 0);
	/* The kernel into PCR 9, then its line into PCR 8. */
	CHECK(strstr(fake.calls, ";tpm_extend 9;tpm_extend 8;") != NULL);
	CHECK_INT(fake.tpm_extends, 2);
	extends = fake.tpm_extends;
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), 0);
	CHECK_STR(reply[0], "kexec");
	free(reply[0]);
	free(reply[1]);
	CHECK_STR(fake.kexec_cmdline, LINE);
	CHECK_INT(fake.tpm_extends, extends);

	/* PCR 8 is the line booted, extended from zeros, and the log says so. */
	EVP_Digest(measured, strlen(measured), digest, &n, EVP_sha256(), NULL);
	memcpy(pcr + 32, digest, 32);
	EVP_Digest(pcr, 64, digest, &n, EVP_sha256(), NULL);
	CHECK(memcmp(fake.tpm_pcrs[0][8], digest, 32) == 0);
	log = calloc(1, 65536);
	f = fopen(fixture_path(NMBL_TPM_LOG), "rb");
	len = f && log ? fread(log, 1, 65535, f) : 0;
	if (f)
		fclose(f);
	CHECK(len > 0 && strstr(log, "kernel_cmdline: /vmlinuz root=UUID=7a46e7a1 ro "
				     "console=ttyS0,115200 quiet") != NULL);
	free(log);
	end_broker(broker, sv);
	nmbl_unref(c);
	fixture_run("rm -rf '%s/sys/firmware/acpi' '%s/sys/class/tpm' '%s/run/nmbl'", fixture_root(),
		    fixture_root(), fixture_root());
}

/* CHAINLOAD asked 300 times for 300 programs in one session: before, 300
 * Boot#### options; now the first prepares the hand-over and the rest are
 * refused, three variables written in all. */
static void test_chainload_once_a_session(void)
{
	char file[64], *reply[1] = { NULL };
	const char *chain[] = { "/dev/vda", "2048", file };
	struct nmbl_broker *broker;
	unsigned writes = 0;
	int sv[2];

	machine();
	fixture_text("/sys/class/block/vda/vda1/start", "2048\n");
	fixture_text("/sys/class/block/vda/vda1/size", "204800\n");
	fixture_text("/sys/class/block/vda/vda1/partition", "1\n");
	fixture_text("/sys/class/block/vda/queue/logical_block_size", "512\n");
	fixture_run("cp %s/dev/vda3 %s/dev/vda1", fixture_root(), fixture_root());
	fixture_text(NMBL_EFIVARS ".keep", "");
	fixture_write("/dev/vda", "", 0);
	fixture_run("truncate -s 102M %s && printf 'label: gpt\\nunit: sectors\\n"
		    "start=2048, size=204800, type=U\\n' | sfdisk -q %s >/dev/null 2>&1",
		    fixture_path("/dev/vda"), fixture_path("/dev/vda"));
	broker = new_broker(ctx, sv);
	for (int i = 0; i < 300; i++) {
		char path[128];

		snprintf(file, sizeof(file), "/EFI/x/p%d.efi", i);
		snprintf(path, sizeof(path), "/run/nmbl/mnt/vda1%s", file);
		fixture_text(path, "MZ");
		fake.calls[0] = '\0';
		CHECK_INT(ask(broker, sv[1], NMBL_BROKER_CHAINLOAD, chain, 3, -1, reply, 1),
			  i == 0 ? 0 : -EALREADY);
		free(reply[0]);
		reply[0] = NULL;
		writes += efivar_writes();
	}
	CHECK_INT(writes, 3);
	CHECK_INT(nmbl_broker_get_outcome(broker), NMBL_BROKER_REBOOT);
	end_broker(broker, sv);
}

/*
 * A network boot's files through a helper in nmbl-fetch's place, which
 * answers by the URL's last word as nmbl-fetch would: the file, "no such
 * file", or a file that never comes whole.
 */
static const char fake_fetch[] =
	"#!/bin/sh\n"
	"for url; do :; done\n"
	"case $url in\n"
	"*/grub.cfg) printf 'menuentry x {}\\n'; echo '15 15' >&3 ;;\n"
	"*/vmlinuz) cat \"$NMBL_TEST_KERNEL\"; echo '9 9' >&3 ;;\n"
	"*/missing) echo \"$url: the TFTP server has no such file\" >&2; exit 3 ;;\n"
	"*/forever) while echo '1 1000' >&3; do sleep 0.1; done ;;\n"
	"esac\n";

struct heard {
	unsigned progress;
	unsigned cancel_after;
};

static int on_progress(void *data, uint64_t done, uint64_t total)
{
	struct heard *h = data;

	(void)done;
	(void)total;
	h->progress++;
	return h->cancel_after && h->progress >= h->cancel_after ? -ECANCELED : 0;
}

static int fetch(struct nmbl_broker *broker, int menu, enum nmbl_broker_request request,
		 const char *const *fields, size_t n, struct heard *h, int *fd, char **reply)
{
	struct exchange x = { .broker = broker };
	pthread_t t;
	int r;

	CHECK_INT(pthread_create(&t, NULL, serve_one, &x), 0);
	r = nmbl_broker_call_full(menu, request, fields, n, -1, on_progress, h, fd, reply, 1);
	pthread_join(t, NULL);
	CHECK_INT(x.served, 1);
	return r;
}

static void test_network_files_fetched_held_and_booted(void)
{
	struct nmbl_fetch_options net = { .timeout_s = 30, .stall_s = 5 };
	const char *cfg[] = { "tftp://10.0.2.2/nmbl/grub.cfg" };
	const char *missing[] = { "tftp://10.0.2.2/nmbl/missing" };
	const char *forever[] = { "http://10.0.2.2:8080/forever" };
	const char *kernel[] = { "tftp://10.0.2.2/vmlinuz", "(tftp)/vmlinuz", LINE };
	const char *boot[] = { "installer" };
	char *reply[2] = { NULL, NULL };
	struct nmbl_broker *broker;
	struct heard h = { 0 };
	char text[64] = "";
	int sv[2], fd = -1;

	machine();
	fixture_text("/usr/libexec/nmbl/nmbl-fetch", fake_fetch);
	chmod(fixture_path("/usr/libexec/nmbl/nmbl-fetch"), 0755);
	setenv("NMBL_TEST_KERNEL", CORPUS "/kernel.efi", 1);
	broker = new_broker(ctx, sv);

	/* Not started from the network: nothing is fetched. */
	CHECK_INT(fetch(broker, sv[1], NMBL_BROKER_FETCH, cfg, 1, &h, &fd, reply),
		  -ENETUNREACH);
	CHECK_INT(fd, -1);
	free(reply[0]);
	reply[0] = NULL;
	CHECK_INT(nmbl_broker_set_network(broker, &net), 0);

	/* The file, sealed, and the menu heard how far it came. */
	CHECK_INT(fetch(broker, sv[1], NMBL_BROKER_FETCH, cfg, 1, &h, &fd, reply), 0);
	CHECK(fd >= 0);
	CHECK_INT(read(fd, text, sizeof(text) - 1), 15);
	CHECK_STR(text, "menuentry x {}\n");
	CHECK_INT(fcntl(fd, F_GET_SEALS) & F_SEAL_WRITE, F_SEAL_WRITE);
	CHECK(h.progress >= 1);
	close(fd);
	fd = -1;
	free(reply[0]);
	reply[0] = NULL;

	/* No such file: GRUB hears it, with the helper's sentence. */
	CHECK_INT(fetch(broker, sv[1], NMBL_BROKER_FETCH, missing, 1, &h, &fd, reply), -ENOENT);
	CHECK_STR(reply[0], "tftp://10.0.2.2/nmbl/missing: the TFTP server has no such file");
	CHECK_INT(fd, -1);
	free(reply[0]);
	reply[0] = NULL;

	/* Esc while a file comes: cancelled, and the broker serves on. */
	h = (struct heard){ .cancel_after = 3 };
	CHECK_INT(fetch(broker, sv[1], NMBL_BROKER_FETCH, forever, 1, &h, &fd, reply),
		  -ECANCELED);
	CHECK_INT(fd, -1);
	free(reply[0]);
	reply[0] = NULL;
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_MENU_SHOWN, NULL, 0, -1, NULL, 0), 0);

	/* A kernel from the network: held, and booted by kexec (another
	 * kernel runs), with the line asked for. */
	fixture_text("/proc/version", "Linux version 6.1.0-other (nmbl) (gcc) #2 SMP\n");
	h = (struct heard){ 0 };
	CHECK_INT(fetch(broker, sv[1], NMBL_BROKER_KERNEL_URL, kernel, 3, &h, NULL, reply), 0);
	free(reply[0]);
	reply[0] = NULL;
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 1, -1, reply, 2), 0);
	CHECK_STR(reply[0], "kexec");
	CHECK_STR(fake.kexec_cmdline, LINE);
	free(reply[0]);
	free(reply[1]);
	CHECK_INT(nmbl_broker_get_outcome(broker), NMBL_BROKER_KEXEC);
	end_broker(broker, sv);
	unsetenv("NMBL_TEST_KERNEL");
	fixture_run("rm -rf '%s/usr/libexec/nmbl' '%s/run/nmbl'", fixture_root(), fixture_root());
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_each_request_with_its_fields_parses,
		test_requests_out_of_shape_are_refused,
		test_command_line_within_the_limit,
		test_broker_answers_and_refuses,
		test_boot_loader_interface_written_once_kept,
		test_direct_boot_not_taken_is_undone,
		test_a_new_initrd_list_drops_the_last,
		test_kernel_log_line_stays_one_line,
		test_command_line_measured_is_the_one_booted,
		test_chainload_once_a_session,
		test_network_files_fetched_held_and_booted,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
