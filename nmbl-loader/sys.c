/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The real side of the seam (nmbl-private.h).  Nothing else in libnmbl
 * makes a call that changes the machine.
 */
#include <linux/keyctl.h>
#include <linux/reboot.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "nmbl-private.h"

extern char **environ;

int nmbl_sys_kexec_file_load(int kernel_fd, int initrd_fd,
			     const char *cmdline, unsigned long flags)
{
	/* The kernel wants the length including the terminating NUL. */
	if (syscall(SYS_kexec_file_load, kernel_fd, initrd_fd,
		    strlen(cmdline) + 1, cmdline, flags) < 0)
		return -errno;
	return 0;
}

int nmbl_sys_mount(const char *source, const char *target,
		   const char *fstype, unsigned long flags, const char *data)
{
	if (mount(source, target, fstype, flags, data) < 0)
		return -errno;
	return 0;
}

int nmbl_sys_umount(const char *target)
{
	if (umount2(target, UMOUNT_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

int nmbl_sys_reboot_kexec(void)
{
	if (syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
		    LINUX_REBOOT_CMD_KEXEC, NULL) < 0)
		return -errno;
	return 0;
}

int nmbl_sys_systemctl_kexec(void)
{
	char *argv[] = { "systemctl", "kexec", NULL };
	pid_t pid;
	int status, r;

	r = posix_spawnp(&pid, "systemctl", NULL, NULL, argv, environ);
	if (r)
		return -r;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EIO;
	return 0;
}

long nmbl_sys_keyring_read(int32_t keyring, int32_t *buf, size_t len)
{
	long n = syscall(SYS_keyctl, KEYCTL_READ, keyring, buf, len);

	return n < 0 ? -errno : n;
}

int nmbl_sys_key_describe(int32_t key, char *buf, size_t len)
{
	long n = syscall(SYS_keyctl, KEYCTL_DESCRIBE, key, buf, len);

	if (n < 0)
		return -errno;
	if ((size_t)n > len)
		return -ENAMETOOLONG;
	return 0;
}

int nmbl_sys_finit_module(int fd, const char *params)
{
	if (syscall(SYS_finit_module, fd, params, 0) < 0)
		return -errno;
	return 0;
}

int nmbl_sys_efivar_write(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -errno;
	/* efivarfs takes a variable in one write, attributes first. */
	n = write(fd, data, len);
	if (n < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	if (close(fd) < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}
