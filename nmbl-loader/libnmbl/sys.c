/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The real side of the seam (nmbl-private.h).  Nothing else in libnmbl
 * makes a call that changes the machine.
 */
#include <linux/fs.h>
#include <linux/kexec.h>
#include <linux/keyctl.h>
#include <linux/reboot.h>
#include <linux/watchdog.h>
#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

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

int nmbl_sys_kexec_file_check(int kernel_fd)
{
	long page = sysconf(_SC_PAGESIZE);
	void *unreadable;
	int r = 0;

	/* The command line on a page nobody may read: the kernel's copy of it
	 * fails (-EFAULT) only after the kernel's format and signature
	 * checks, before the load. */
	unreadable = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (unreadable == MAP_FAILED)
		return -errno;
	if (syscall(SYS_kexec_file_load, kernel_fd, -1, 1UL, unreadable,
		    KEXEC_FILE_NO_INITRAMFS) < 0)
		r = -errno;
	munmap(unreadable, (size_t)page);
	return r;
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

int nmbl_sys_umount_tree(const char *target)
{
	if (umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

int nmbl_sys_reboot(bool kexec)
{
	if (syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2,
		    kexec ? LINUX_REBOOT_CMD_KEXEC : LINUX_REBOOT_CMD_RESTART, NULL) < 0)
		return -errno;
	return 0;
}

int nmbl_sys_systemctl(const char *verb, const char *arg)
{
	char *argv[] = { "systemctl", (char *)verb, (char *)arg, NULL };
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

int nmbl_sys_tpm_open(const char *path)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);

	return fd < 0 ? -errno : fd;
}

/* The kernel's TPM device takes a command in one write(2) and gives its
 * response in one read(2). */
ssize_t nmbl_sys_tpm_transmit(int fd, const void *cmd, size_t len, void *resp, size_t size)
{
	ssize_t n;

	do
		n = write(fd, cmd, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EIO;
	do
		n = read(fd, resp, size);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
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

int nmbl_sys_watchdog_open(const char *path)
{
	/* Opening it starts it. */
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int nmbl_sys_watchdog_set_timeout(int fd, unsigned *seconds)
{
	int t = (int)*seconds;

	if (ioctl(fd, WDIOC_SETTIMEOUT, &t) < 0)
		return -errno;
	*seconds = t > 0 ? (unsigned)t : 0;
	return 0;
}

int nmbl_sys_watchdog_stop(int fd)
{
	struct watchdog_info info;
	int options = WDIOS_DISABLECARD, r = 0;

	/* Nothing is written to a descriptor that is no watchdog: its
	 * number may have come from the environment. */
	if (ioctl(fd, WDIOC_GETSUPPORT, &info) < 0)
		return -errno;
	if (ioctl(fd, WDIOC_SETOPTIONS, &options) < 0)
		r = -errno;
	/* The magic close as well, for whoever holds the last copy of the
	 * descriptor: a driver may stop only on that. */
	if (write(fd, "V", 1) < 0 && r == 0)
		r = -errno;
	close(fd);
	return r;
}

/*
 * efivarfs makes every variable it finds at mount time immutable except
 * the few it knows are safe to change, so an existing variable takes a
 * write only once the flag is cleared, as systemd and libefivar do.
 * Returns whether the flag was set, or -errno.
 */
static int clear_immutable(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	int flags;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
		return -errno;
	if (!(flags & FS_IMMUTABLE_FL))
		return 0;
	flags &= ~FS_IMMUTABLE_FL;
	if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
		return -errno;
	return 1;
}

static void set_immutable(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	int flags;

	if (fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags |= FS_IMMUTABLE_FL;
		(void)ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
}

int nmbl_sys_efivar_write(const char *path, const void *data, size_t len)
{
	_cleanup_close_ int fd = -1;
	int was_immutable, r = 0;
	ssize_t n;

	was_immutable = clear_immutable(path);
	if (was_immutable < 0)
		return was_immutable;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = -errno;
	} else {
		/* efivarfs takes a variable in one write, attributes first. */
		n = write(fd, data, len);
		if (n < 0)
			r = -errno;
		else if ((size_t)n != len)
			r = -EIO;
	}
	if (was_immutable)
		set_immutable(path);
	return r;
}

int nmbl_sys_efivar_delete(const char *path)
{
	int r = clear_immutable(path);

	if (r < 0)
		return r;
	if (unlink(path) < 0)
		return -errno;
	return 0;
}

#if defined(__x86_64__) || defined(__i386__)
static uint64_t ticks(void)
{
	return __builtin_ia32_rdtsc();
}
#elif defined(__aarch64__)
static uint64_t ticks(void)
{
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#else
static uint64_t ticks(void)
{
	return 0;
}
#endif

static uint64_t clock_usec(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/*
 * The CPU's counter runs from reset, which is the time base the Boot Loader
 * Interface uses; its rate is measured against the kernel's raw clock over
 * a few milliseconds, as systemd-boot measures it against the firmware's.
 * Under a hypervisor the counter the guest sees can jump when the host moves
 * the virtual CPU: a measurement whose rate disagrees with the one before,
 * or that puts the kernel's start before reset, is taken again.
 */
static int measure(uint64_t *ret_now, uint64_t *ret_kernel, uint64_t *ret_rate)
{
	uint64_t t0, t1, c0, c1;

	c0 = ticks();
	if (c0 == 0)
		return -EOPNOTSUPP;
	t0 = clock_usec(CLOCK_MONOTONIC_RAW);
	do
		t1 = clock_usec(CLOCK_MONOTONIC_RAW);
	while (t1 - t0 < 4000);
	c1 = ticks();
	*ret_kernel = clock_usec(CLOCK_BOOTTIME);
	if (c1 <= c0)
		return -EAGAIN;
	*ret_rate = (c1 - c0) / (t1 - t0); /* ticks per microsecond */
	*ret_now = (uint64_t)((unsigned __int128)c1 * (t1 - t0) / (c1 - c0));
	return *ret_now > *ret_kernel ? 0 : -EAGAIN;
}

/* Within one percent of each other. */
static bool agree(uint64_t a, uint64_t b)
{
	return a && b && (a > b ? a - b : b - a) * 100 <= b;
}

int nmbl_sys_boot_clock(uint64_t *ret_now_usec, uint64_t *ret_kernel_usec)
{
	uint64_t now, kernel, rate, last_rate = 0;

	for (int i = 0; i < 5; i++) {
		int r = measure(&now, &kernel, &rate);

		if (r == -EOPNOTSUPP)
			return r;
		if (r == 0 && agree(rate, last_rate)) {
			*ret_now_usec = now;
			*ret_kernel_usec = kernel;
			return 0;
		}
		if (r == 0)
			last_rate = rate;
	}
	return -EAGAIN;
}
