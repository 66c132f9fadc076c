/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
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
	const char *kernel[] = { "/dev/vda", "2048", "/vmlinuz-6.1", "(hd0,gpt2)/vmlinuz-6.1" };
	const char *boot[] = { "BOOT_IMAGE=/vmlinuz root=UUID=x ro", "debian" };
	const char *initrd[] = { "/dev/vda", "2048", "/initrd.img", "/initrd.img", "1" };
	const char *chain[] = { "/dev/nvme0n1", "0", "/EFI/Microsoft/Boot/bootmgfw.efi" };
	const char *env[] = { "/dev/vda", "2048", "/grub2/grubenv" };

	CHECK_INT(round_trip(NMBL_BROKER_MEASURE, measure, 2, &m), 0);
	CHECK_INT(m.request, NMBL_BROKER_MEASURE);
	CHECK_INT(m.n_fields, 2);
	CHECK_STR(m.fields[1], "grub_cmd: linux /vmlinuz");
	CHECK_INT(round_trip(NMBL_BROKER_KERNEL, kernel, 4, &m), 0);
	CHECK_STR(m.fields[2], "/vmlinuz-6.1");
	CHECK_INT(round_trip(NMBL_BROKER_INITRD, initrd, 5, &m), 0);
	CHECK_STR(m.fields[4], "1");
	CHECK_INT(round_trip(NMBL_BROKER_BOOT, boot, 2, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_CHAINLOAD, chain, 3, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_FIRMWARE_SETUP, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_ENTRY_REQUESTS, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_MENU_SHOWN, NULL, 0, &m), 0);
	CHECK_INT(round_trip(NMBL_BROKER_GRUBENV_WRITE, env, 3, &m), 0);
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
	static char cmdline[NMBL_CMDLINE_MAX + 1];
	struct nmbl_broker_message m;
	const char *boot[] = { cmdline, "x" };

	memset(cmdline, 'a', NMBL_CMDLINE_MAX - 1);
	CHECK_INT(round_trip(NMBL_BROKER_BOOT, boot, 2, &m), 0);
	cmdline[NMBL_CMDLINE_MAX - 1] = 'a';
	CHECK_INT(round_trip(NMBL_BROKER_BOOT, boot, 2, &m), -EBADMSG);
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
	const char *boot[] = { "root=/dev/vda2", "fedora" };
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
	CHECK_INT(ask(broker, sv[1], NMBL_BROKER_BOOT, boot, 2, -1, reply, 2), -ENOENT);
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

int main(void)
{
	static void (*const tests[])(void) = {
		test_each_request_with_its_fields_parses,
		test_requests_out_of_shape_are_refused,
		test_command_line_within_the_limit,
		test_broker_answers_and_refuses,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
