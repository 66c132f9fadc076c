// SPDX-License-Identifier: GPL-3.0-or-later
/*
 * The benchmark's kexec floor: the only program of an initramfs that also
 * holds the entry's kernel, initrd and command line (under /entry).  It
 * loads them with kexec_file_load and starts them at once: the least time
 * any boot loader that hands over by kexec can take in the same VM, with
 * no menu, no udev and no disk to read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/reboot.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char *what)
{
	fprintf(stderr, "kexec-floor: %s: %s\n", what, strerror(errno));
	syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
		LINUX_REBOOT_CMD_POWER_OFF, NULL);
	return 1;
}

int main(void)
{
	char cmdline[4096];
	ssize_t n;
	int fd, kernel, initrd;

	fd = open("/entry/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail("/entry/cmdline");
	n = read(fd, cmdline, sizeof(cmdline) - 1);
	close(fd);
	if (n < 0)
		return fail("/entry/cmdline");
	cmdline[n] = '\0';
	cmdline[strcspn(cmdline, "\n")] = '\0';

	kernel = open("/entry/vmlinuz", O_RDONLY | O_CLOEXEC);
	if (kernel < 0)
		return fail("/entry/vmlinuz");
	initrd = open("/entry/initrd.img", O_RDONLY | O_CLOEXEC);
	if (initrd < 0)
		return fail("/entry/initrd.img");
	if (syscall(SYS_kexec_file_load, kernel, initrd, strlen(cmdline) + 1, cmdline, 0UL) < 0)
		return fail("kexec_file_load");
	syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_KEXEC, NULL);
	return fail("reboot");
}
