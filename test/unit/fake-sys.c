/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The test side of libnmbl's seam: records each call and returns the
 * errno a test injected, instead of changing the machine.
 */
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"

struct fake_sys fake;

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
	size_t len = strlen(fake.calls);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fake.calls + len, sizeof(fake.calls) - len, fmt, ap);
	va_end(ap);
}

int nmbl_sys_kexec_file_load(int kernel_fd, int initrd_fd, const char *cmdline,
			     unsigned long flags)
{
	ssize_t n;

	fake.kexec_flags = flags;
	snprintf(fake.kexec_cmdline, sizeof(fake.kexec_cmdline), "%s", cmdline);
	fake.kexec_kernel_len = kernel_fd >= 0 ?
		pread(kernel_fd, fake.kexec_kernel, sizeof(fake.kexec_kernel), 0) : -1;
	n = initrd_fd >= 0 ? pread(initrd_fd, fake.kexec_initrd,
				   sizeof(fake.kexec_initrd), 0) : -1;
	fake.kexec_initrd_len = n;
	record("kexec_file_load;");
	return fake.kexec_errno;
}

int nmbl_sys_mount(const char *source, const char *target, const char *fstype,
		   unsigned long flags, const char *data)
{
	(void)flags;
	record("mount %s %s %s %s;", source + strlen(fake.root),
	       target + strlen(fake.root), fstype, data ? data : "-");
	return fake.mount_errno;
}

int nmbl_sys_umount(const char *target)
{
	record("umount %s;", target + strlen(fake.root));
	return 0;
}

int nmbl_sys_reboot_kexec(void)
{
	record("reboot_kexec;");
	return fake.reboot_errno;
}

int nmbl_sys_systemctl_kexec(void)
{
	record("systemctl_kexec;");
	return fake.systemctl_errno;
}
