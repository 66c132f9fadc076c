/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <linux/kexec.h>
#include <string.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static struct nmbl_ctx *setup(void)
{
	struct nmbl_ctx *ctx;

	fixture_text("/boot/vmlinuz", "MZkernel");
	fixture_text("/boot/a.img", "AAAAA");
	fixture_text("/boot/b.img", "BBB");
	fixture_text("/boot/c.img", "CCCC");
	fixture_text("/sys/kernel/kexec_loaded", "1\n");
	fixture_text("/proc/1/comm", "sh\n");
	memset(&fake, 0, sizeof(fake));
	fake.root = fixture_root();
	CHECK_INT(nmbl_new(fixture_root(), &ctx), 0);
	return ctx;
}

static void test_load_concatenates_initrds_like_grub(void)
{
	struct nmbl_ctx *ctx = setup();
	char a[4096], b[4096], c[4096];
	const char *initrds[] = { a, b, c };

	snprintf(a, sizeof(a), "%s", fixture_path("/boot/a.img"));
	snprintf(b, sizeof(b), "%s", fixture_path("/boot/b.img"));
	snprintf(c, sizeof(c), "%s", fixture_path("/boot/c.img"));
	CHECK_INT(nmbl_load(ctx, fixture_path("/boot/vmlinuz"), initrds, 3,
			    "BOOT_IMAGE=/vmlinuz root=UUID=x ro"), 0);
	CHECK_STR(fake.kexec_cmdline, "BOOT_IMAGE=/vmlinuz root=UUID=x ro");
	CHECK_INT(fake.kexec_flags, 0);
	CHECK_INT(fake.kexec_kernel_len, 8);
	/* Each initrd starts on a 4-byte boundary; the last is not padded. */
	CHECK_INT(fake.kexec_initrd_len, 8 + 4 + 4);
	CHECK(memcmp(fake.kexec_initrd, "AAAAA\0\0\0BBB\0CCCC", 16) == 0);
	nmbl_unref(ctx);
}

static void test_load_single_initrd_and_none(void)
{
	struct nmbl_ctx *ctx = setup();
	char a[4096];
	const char *initrds[] = { a };

	snprintf(a, sizeof(a), "%s", fixture_path("/boot/a.img"));
	CHECK_INT(nmbl_load(ctx, fixture_path("/boot/vmlinuz"), initrds, 1, NULL), 0);
	CHECK_INT(fake.kexec_initrd_len, 5);
	CHECK_STR(fake.kexec_cmdline, "");
	CHECK_INT(nmbl_load(ctx, fixture_path("/boot/vmlinuz"), NULL, 0, "quiet"), 0);
	CHECK_INT(fake.kexec_flags, KEXEC_FILE_NO_INITRAMFS);
	CHECK_INT(fake.kexec_initrd_len, -1);
	nmbl_unref(ctx);
}

static void test_load_errors(void)
{
	struct nmbl_ctx *ctx = setup();
	char a[4096];
	const char *initrds[] = { a };

	CHECK_INT(nmbl_load(ctx, fixture_path("/boot/missing"), NULL, 0, ""), -ENOENT);
	CHECK_INT(nmbl_load(ctx, fixture_path("/boot"), NULL, 0, ""), -EISDIR);
	snprintf(a, sizeof(a), "%s", fixture_path("/boot/missing.img"));
	CHECK_INT(nmbl_load(ctx, fixture_path("/boot/vmlinuz"), initrds, 1, ""), -ENOENT);
	CHECK_STR(fake.calls, "");
	/* The kernel's verdict reaches the caller untouched. */
	fake.kexec_errno = -ENOKEY;
	CHECK_INT(nmbl_load(ctx, fixture_path("/boot/vmlinuz"), NULL, 0, ""), -ENOKEY);
	CHECK_INT(nmbl_load(NULL, "x", NULL, 0, ""), -EINVAL);
	CHECK_INT(nmbl_load(ctx, "x", NULL, 1, ""), -EINVAL);
	nmbl_unref(ctx);
}


static void test_uki_is_split_like_systemd_stub(void)
{
	struct nmbl_ctx *ctx = setup();
	const char *uki = CORPUS "/uki.efi";

	/* Secure Boot: the UKI's signed .cmdline wins over the entry's. */
	fixture_write(SB_VAR, "\x06\0\0\0\x01", 5);
	CHECK_INT(nmbl_load(ctx, uki, NULL, 0, "BOOT_IMAGE=/uki.efi rw"), 0);
	CHECK_STR(fake.kexec_cmdline, "quiet");
	CHECK(memcmp(fake.kexec_kernel, "MZ", 2) == 0);
	CHECK_INT(fake.kexec_flags, 0);
	/* .ucode first, then .initrd, each on a 4-byte boundary. */
	CHECK_INT(fake.kexec_initrd_len, 8 + 8);
	CHECK(memcmp(fake.kexec_initrd, "UCODE\0\0\0" "07070100", 16) == 0);

	/* Without Secure Boot the entry's options replace it. */
	fixture_write(SB_VAR, "\x06\0\0\0\x00", 5);
	CHECK_INT(nmbl_load(ctx, uki, NULL, 0, "BOOT_IMAGE=/uki.efi rw"), 0);
	CHECK_STR(fake.kexec_cmdline, "BOOT_IMAGE=/uki.efi rw");
	CHECK_INT(nmbl_load(ctx, uki, NULL, 0, ""), 0);
	CHECK_STR(fake.kexec_cmdline, "quiet");
	nmbl_unref(ctx);
}

static void test_cmdline_longer_than_the_kernel_takes(void)
{
	struct nmbl_ctx *ctx = setup();
	char *cmdline = malloc(2049);

	memset(cmdline, 'x', 2048);
	cmdline[2048] = '\0';
	CHECK_INT(nmbl_load(ctx, CORPUS "/kernel.efi", NULL, 0, cmdline), -E2BIG);
	CHECK_STR(fake.calls, "");
	cmdline[2047] = '\0';
	CHECK_INT(nmbl_load(ctx, CORPUS "/kernel.efi", NULL, 0, cmdline), 0);
	free(cmdline);
	nmbl_unref(ctx);
}

static void test_check_asks_the_kernel_without_loading(void)
{
	struct nmbl_ctx *ctx = setup();
	const char *uki = CORPUS "/uki.efi";
	char *cmdline = malloc(2049);

	CHECK_INT(nmbl_check(ctx, CORPUS "/kernel.efi", "root=UUID=x ro"), 0);
	CHECK_STR(fake.calls, "kexec_file_check;");
	CHECK(memcmp(fake.kexec_kernel, "MZ", 2) == 0);
	/* A UKI: its .linux. */
	fake.calls[0] = '\0';
	fake.kexec_kernel[0] = '\0';
	CHECK_INT(nmbl_check(ctx, uki, ""), 0);
	CHECK_STR(fake.calls, "kexec_file_check;");
	CHECK(memcmp(fake.kexec_kernel, "MZ", 2) == 0);
	/* The kernel's refusal, as nmbl_load() would get it. */
	fake.calls[0] = '\0';
	fake.kexec_errno = -EKEYREJECTED;
	CHECK_INT(nmbl_check(ctx, CORPUS "/kernel.efi", ""), -EKEYREJECTED);
	fake.kexec_errno = 0;
	/* What is no PE image, and a line too long, never reach the kernel. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_check(ctx, fixture_path("/boot/vmlinuz"), ""), -ENOEXEC);
	CHECK_INT(nmbl_check(ctx, fixture_path("/boot/missing"), ""), -ENOENT);
	memset(cmdline, 'x', 2048);
	cmdline[2048] = '\0';
	CHECK_INT(nmbl_check(ctx, CORPUS "/kernel.efi", cmdline), -E2BIG);
	CHECK_STR(fake.calls, "");
	/* A kernel that loaded it all the same: unloaded again. */
	fake.check_loads = true;
	CHECK_INT(nmbl_check(ctx, CORPUS "/kernel.efi", ""), 0);
	CHECK_STR(fake.calls, "kexec_file_check;kexec_file_load;");
	CHECK_INT(fake.kexec_flags, KEXEC_FILE_UNLOAD);
	CHECK_INT(nmbl_check(NULL, "x", ""), -EINVAL);
	CHECK_INT(nmbl_check(ctx, NULL, ""), -EINVAL);
	free(cmdline);
	nmbl_unref(ctx);
}

/* Only the answer the kernel gives after its signature check counts:
 * -EINVAL comes before it for an empty file or another architecture's
 * image, and is a refusal like any other. */
static void test_check_fails_closed(void)
{
	struct nmbl_ctx *ctx = setup();
	char dir[4096];

	fake.kexec_errno = -EINVAL;
	CHECK_INT(nmbl_check(ctx, CORPUS "/kernel.efi", ""), -EINVAL);
	CHECK_STR(fake.calls, "kexec_file_check;");
	CHECK(!ctx->kernel_accepted);
	fake.kexec_errno = -ENOEXEC;
	CHECK_INT(nmbl_check(ctx, CORPUS "/kernel.efi", ""), -ENOEXEC);
	CHECK(!ctx->kernel_accepted);
	fake.kexec_errno = 0;
	/* An empty file and a directory never reach the kernel. */
	fake.calls[0] = '\0';
	fixture_text("/boot/empty", "");
	CHECK_INT(nmbl_check(ctx, fixture_path("/boot/empty"), ""), -ENOEXEC);
	snprintf(dir, sizeof(dir), "%s", fixture_path("/boot"));
	CHECK_INT(nmbl_check(ctx, dir, ""), -EISDIR);
	CHECK_STR(fake.calls, "");
	CHECK(!ctx->kernel_accepted);
	/* Accepted, but not the running kernel: no direct boot of it. */
	CHECK_INT(nmbl_check(ctx, CORPUS "/kernel.efi", ""), 0);
	CHECK(ctx->kernel_accepted);
	CHECK(!ctx->accepted_is_running);
	nmbl_unref(ctx);
}

/* GRUB's names become paths in nmbl's mount of the partition; nothing in
 * them leads out of that file system. */
#define IN_PART(name) fixture_path("/run/nmbl/mnt/vda2/" name)

static bool opens(struct nmbl_ctx *ctx, const char *path)
{
	int fd = nmbl_open_regular(ctx, path);

	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

static void test_paths_stay_inside_their_partition(void)
{
	struct nmbl_ctx *ctx = setup();

	fixture_text("/run/nmbl/mnt/vda2/vmlinuz", "MZkernel");
	fixture_text("/run/nmbl/mnt/vda2/sub/initrd", "INITRD");
	fixture_text("/secret", "initramfs");
	/* Absolute and relative links, magic links and "..", resolved
	 * inside vda2, where there is no secret. */
	CHECK(symlink("/secret", IN_PART("abs")) == 0);
	CHECK(symlink("../../../../secret", IN_PART("rel")) == 0);
	CHECK(symlink("/proc/self/root/secret", IN_PART("magic")) == 0);
	CHECK(symlink("/sub/../sub/initrd", IN_PART("link")) == 0);
	CHECK_INT(nmbl_open_regular(ctx, IN_PART("abs")), -ENOENT);
	CHECK_INT(nmbl_open_regular(ctx, IN_PART("rel")), -ENOENT);
	CHECK_INT(nmbl_open_regular(ctx, IN_PART("../../../../secret")), -ENOENT);
	CHECK_INT(nmbl_open_regular(ctx, IN_PART("magic")), -ENOENT);
	CHECK_INT(nmbl_open_regular(ctx, fixture_path("/run/nmbl/mnt/../../../secret")), -EINVAL);
	/* What is inside still opens, through links and ".." alike. */
	CHECK(opens(ctx, IN_PART("link")));
	CHECK(opens(ctx, IN_PART("sub/../vmlinuz")));
	/* The loader refuses what leads out, as a missing file. */
	CHECK_INT(nmbl_load(ctx, IN_PART("abs"), NULL, 0, ""), -ENOENT);
	nmbl_unref(ctx);
}

static void test_unload(void)
{
	struct nmbl_ctx *ctx = setup();

	CHECK_INT(nmbl_unload(ctx), 0);
	CHECK_INT(fake.kexec_flags, KEXEC_FILE_UNLOAD);
	nmbl_unref(ctx);
}

static void test_exec_without_systemd_unmounts_then_reboots(void)
{
	struct nmbl_ctx *ctx = setup();
	char *mp;

	fixture_text("/sys/class/block/vda/vda2/start", "81920\n");
	fixture_text("/dev/vda2", "");
	fixture_text("/proc/filesystems", "\text4\n");
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 81920, &mp), 0);
	free(mp);
	fake.calls[0] = '\0';
	fake.reboot_errno = -EPERM;
	CHECK_INT(nmbl_exec(ctx), -EPERM);
	CHECK_STR(fake.calls, "umount /run/nmbl/mnt/vda2;reboot_kexec;");
	nmbl_unref(ctx);
}

static void test_exec_through_systemd(void)
{
	struct nmbl_ctx *ctx = setup();

	fixture_text("/proc/1/comm", "systemd\n");
	fake.systemctl_errno = -EIO;
	CHECK_INT(nmbl_exec(ctx), -EIO);
	CHECK_STR(fake.calls, "systemctl_kexec;");
	nmbl_unref(ctx);
}

static void test_reboot_with_and_without_systemd(void)
{
	struct nmbl_ctx *ctx = setup();

	fake.reboot_errno = -EPERM;
	CHECK_INT(nmbl_reboot(ctx), -EPERM);
	CHECK_STR(fake.calls, "reboot;");
	fixture_text("/proc/1/comm", "systemd\n");
	fake.calls[0] = '\0';
	fake.systemctl_errno = -EIO;
	CHECK_INT(nmbl_reboot(ctx), -EIO);
	CHECK_STR(fake.calls, "systemctl_reboot;");
	CHECK_INT(nmbl_reboot(NULL), -EINVAL);
	nmbl_unref(ctx);
}

static void test_exec_needs_a_loaded_kernel(void)
{
	struct nmbl_ctx *ctx = setup();

	fixture_text("/sys/kernel/kexec_loaded", "0\n");
	CHECK_INT(nmbl_exec(ctx), -ENOENT);
	CHECK_STR(fake.calls, "");
	nmbl_unref(ctx);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_load_concatenates_initrds_like_grub,
		test_load_single_initrd_and_none,
		test_load_errors,
		test_uki_is_split_like_systemd_stub,
		test_cmdline_longer_than_the_kernel_takes,
		test_check_asks_the_kernel_without_loading,
		test_check_fails_closed,
		test_paths_stay_inside_their_partition,
		test_unload,
		test_exec_without_systemd_unmounts_then_reboots,
		test_exec_through_systemd,
		test_exec_needs_a_loaded_kernel,
		test_reboot_with_and_without_systemd,
		NULL,
	};
	return unit_main(tests);
}
