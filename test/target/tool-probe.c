/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * tool-probe: a disk tool taken over by what the disks hold, for the VM
 * tests.  The test image (test/dracut/98nmbl-toolprobe) installs it as
 * mdadm, in front of the real one, which it then executes with its own
 * arguments, so that the volumes are set up all the same.  First it tries
 * what such a tool must not do, from inside the containment nmbl-init
 * gave it, and says how each went, one line each on its standard error
 * (which nmbl-init says on the console, after "mdadm: "):
 *
 *   nmbl-tool-probe: CALL ERRNO-NAME      (or "done" when it went through)
 *   nmbl-tool-probe: console MAJOR:MINOR  what /dev/console is here
 *
 * and it leaves a process behind, in a session of its own, named
 * nmbl-escapee: the booted system must not have it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define REAL "/usr/sbin/mdadm.real"
/* open_tree_attr(2), Linux 6.15: the same number on every architecture. */
#define NR_OPEN_TREE_ATTR 467
/* quotactl_fd(2), Linux 5.14: the same on every architecture. */
#define NR_QUOTACTL_FD 443

static void said(const char *call, int r)
{
	fprintf(stderr, "nmbl-tool-probe: %s %s\n", call, r < 0 ? strerrorname_np(errno) : "done");
}

static void escape(void)
{
	pid_t pid = fork();

	if (pid != 0)
		return;
	/* Off the tool's session and process group, as a taken-over tool
	 * would hide a process. */
	setsid();
	prctl(PR_SET_NAME, "nmbl-escapee");
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	struct stat st;
	int fd;

	(void)argc;
	/* A clone of the read-only /proc/sys, writable. */
	said("open_tree_attr", (int)syscall(NR_OPEN_TREE_ATTR, AT_FDCWD, "/proc/sys",
					     1 /* OPEN_TREE_CLONE */, NULL, 0));
	/* A call the filter's list does not name (Linux 5.14). */
	said("quotactl_fd", (int)syscall(NR_QUOTACTL_FD, -1, 0, 0, NULL));
	/* The program nmbl-init runs for every menu, rewritten. */
	fd = open("/usr/libexec/nmbl/nmbl-console", O_WRONLY | O_APPEND | O_CLOEXEC);
	said("write-console-program", fd);
	/* The program the kernel runs for an unclaimed device, made. */
	fd = open("/usr/sbin/modprobe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	said("create-modprobe", fd);
	/* A disk's node made where the tool may write, and opened. */
	if (stat("/dev/vda", &st) == 0) {
		int r = mknod("/dev/nmbl-probe-vda", S_IFBLK | 0600, st.st_rdev);

		said("mknod-disk", r);
		fd = r == 0 ? open("/dev/nmbl-probe-vda", O_RDWR | O_CLOEXEC) : -1;
		if (r == 0)
			said("open-made-disk", fd);
	}
	said("mknod-mem", mknod("/tmp/nmbl-probe-mem", S_IFCHR | 0600, makedev(1, 1)));
	if (stat("/dev/console", &st) == 0)
		fprintf(stderr, "nmbl-tool-probe: console %u:%u\n", major(st.st_rdev),
			minor(st.st_rdev));
	escape();
	execv(REAL, argv);
	fprintf(stderr, "nmbl-tool-probe: cannot run %s: %s\n", REAL, strerror(errno));
	return 127;
}
