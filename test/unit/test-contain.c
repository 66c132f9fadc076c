/* SPDX-License-Identifier: GPL-3.0-or-later */
/* The contained menu and the contained disk tools, in a child of the test
 * (which runs as root, as nmbl's init does): their credentials, and each
 * call the filter denies. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libnmbl.h"
#include "unit.h"

static FILE *out;

static void report(void *data, const char *call, int err)
{
	(void)data;
	fprintf(out, "%s %d\n", call, err);
}

/* Run FN in a child contained by CONTAIN, writing to a pipe; what it
 * wrote, and how it ended. */
static void run_in(int (*contain)(void), void (*fn)(void), char *buf, size_t size,
		   int *ret_status)
{
	int fds[2];
	ssize_t n;
	pid_t pid;

	CHECK_INT(pipe(fds), 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int r;

		close(fds[0]);
		out = fdopen(fds[1], "w");
		r = contain();
		fprintf(out, "contain %d\n", r);
		fflush(out);
		if (r == 0)
			fn();
		fflush(out);
		_exit(0);
	}
	close(fds[1]);
	for (size_t len = 0;; len += (size_t)n) {
		n = read(fds[0], buf + len, size - 1 - len);
		if (n <= 0) {
			buf[len] = '\0';
			break;
		}
	}
	close(fds[0]);
	CHECK_INT(waitpid(pid, ret_status, 0), pid);
}

static void run_contained(void (*fn)(void), char *buf, size_t size, int *ret_status)
{
	run_in(nmbl_contain_menu, fn, buf, size, ret_status);
}

/* A file of root's (as the image's programs, a disk's node are), when a
 * test names one. */
static const char *roots_file;
/* A file as nmbl-init leaves a disk's node: root's, readable by the menu's
 * group. */
static const char *disk_file;

static void probe(void)
{
	char line[256];
	FILE *f;

	nmbl_contain_probe(report, NULL);
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Cap", 3) || !strncmp(line, "Seccomp:", 8) ||
		    !strncmp(line, "NoNewPrivs:", 11) || !strncmp(line, "Uid:", 4) ||
		    !strncmp(line, "Gid:", 4))
			fputs(line, out);
	if (f)
		fclose(f);
	if (disk_file) {
		int fd = open(disk_file, O_RDONLY | O_CLOEXEC);

		fprintf(out, "read: disk %d\n", fd < 0 ? errno : 0);
		if (fd >= 0)
			close(fd);
	}
	if (roots_file) {
		int fd = open(roots_file, O_WRONLY | O_CLOEXEC);

		fprintf(out, "write: root's file %d\n", fd < 0 ? errno : 0);
		if (fd >= 0)
			close(fd);
	}
}

/* Every call the probe tried, in BUF, was refused: those the filter names
 * with EPERM, one newer than its list (open_tree_attr) with ENOSYS. */
static void check_all_refused(const char *buf)
{
	int calls = 0;

	for (const char *line = buf, *end; (end = strchr(line, '\n')); line = end + 1) {
		const char *last = memrchr(line, ' ', (size_t)(end - line));
		int want = EPERM;

		if (memchr(line, ':', (size_t)(end - line)) || !strncmp(line, "contain ", 8) ||
		    !strncmp(line, "ns ", 3) || !strncmp(line, "node ", 5) || !last)
			continue;
		if (!strncmp(line, "open_tree_attr ", 15))
			want = ENOSYS;
		calls++;
		if (atoi(last + 1) != want)
			fprintf(stderr, "not refused with %s: %.*s\n", strerror(want),
				(int)(end - line), line);
		CHECK_INT(atoi(last + 1), want);
	}
	CHECK(calls > 40);
	CHECK(strstr(buf, "open_tree_attr 38\n"));
	CHECK(strstr(buf, "mknod(S_IFCHR) 1\n"));
}

static void test_denied_calls_get_eperm_without_capabilities(void)
{
	static char buf[16384];
	char expect[64];
	int status;

	run_contained(probe, buf, sizeof(buf), &status);
	CHECK(WIFEXITED(status));
	CHECK(strstr(buf, "contain 0\n"));
	check_all_refused(buf);
	snprintf(expect, sizeof(expect), "Uid:\t%d\t%d\t%d\t%d\n", NMBL_MENU_UID, NMBL_MENU_UID,
		 NMBL_MENU_UID, NMBL_MENU_UID);
	CHECK(strstr(buf, expect));
	CHECK(strstr(buf, "CapPrm:\t0000000000000000\n"));
	CHECK(strstr(buf, "CapEff:\t0000000000000000\n"));
	CHECK(strstr(buf, "CapBnd:\t0000000000000000\n"));
	CHECK(strstr(buf, "NoNewPrivs:\t1\n"));
	CHECK(strstr(buf, "Seccomp:\t2\n"));
}

static void probe_tool(void)
{
	static const char *const paths[] = { "/proc/sys/kernel/modprobe",
					      "/sys/kernel/uevent_helper",
					      "/proc/sys/kernel/hostname" };
	static const char *const nodes[] = { "/dev/kmsg", "/dev/console", "/dev/tty" };
	char ns[64] = "";
	struct stat st;

	probe();
	/* An array's node may be made (here, where no directory is, the call
	 * gets past the filter and fails on the path), a disk's may not. */
	fprintf(out, "node md %d\n",
		mknod("/nonexistent/md127", S_IFBLK | 0600, makedev(9, 127)) < 0 ? errno : 0);
	fprintf(out, "node sda %d\n",
		mknod("/nonexistent/sda", S_IFBLK | 0600, makedev(8, 0)) < 0 ? errno : 0);
	/* The console, the kernel's log: /dev/null in the tool's namespace. */
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		if (stat(nodes[i], &st) == 0)
			fprintf(out, "node %s %u:%u\n", nodes[i], major(st.st_rdev),
				minor(st.st_rdev));
	if (readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1) > 0)
		fprintf(out, "ns %s\n", ns);
	/* Where root would name a program for the kernel to run (where the
	 * kernel has them), and any other of the kernel's settings. */
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int fd = open(paths[i], O_WRONLY | O_CLOEXEC);

		fprintf(out, "write: %s %d\n", paths[i], fd < 0 ? errno : 0);
		if (fd >= 0)
			close(fd);
	}
}

/* A new file of root's on the mount of "/", its name in PATH: a
 * descriptor, or -1. */
static int root_fs_file(char *path, size_t size)
{
	static const char *const dirs[] = { "/var/tmp", "/root", "/var", "/" };
	struct stat root, st;

	if (stat("/", &root) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		int fd;

		if (stat(dirs[i], &st) < 0 || st.st_dev != root.st_dev)
			continue;
		snprintf(path, size, "%s/nmbl-contain.XXXXXX", strcmp(dirs[i], "/") ? dirs[i] : "");
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0 && fchmod(fd, 0644) == 0)
			return fd;
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
	}
	return -1;
}

/* mdadm and LVM's tool, run by nmbl's init on what the disks hold: root
 * with only the capabilities that set up md and device-mapper (CHOWN 0,
 * IPC_LOCK 14, SYS_ADMIN 21, MKNOD 27), the filter, a mount namespace of
 * their own where the root and the kernel's settings are read-only and
 * the console is /dev/null. */
static void test_disk_tools_keep_only_what_sets_up_volumes(void)
{
	static char buf[16384];
	char ns[64] = "", expect[80], roots[PATH_MAX];
	int status, fd;

	/* A file of root's on the root file system, whose mount the tool has
	 * read-only (not the fixture's, under /tmp, which the tool has of its
	 * own, nor the build's, which may be anywhere). */
	fd = root_fs_file(roots, sizeof(roots));
	CHECK(fd >= 0);
	close(fd);
	roots_file = roots;
	run_in(nmbl_contain_tool, probe_tool, buf, sizeof(buf), &status);
	roots_file = NULL;
	unlink(roots);
	CHECK(WIFEXITED(status));
	CHECK(strstr(buf, "contain 0\n"));
	check_all_refused(buf);
	CHECK(strstr(buf, "Uid:\t0\t0\t0\t0\n"));
	for (const char *cap = "CapPrm:CapEff:CapBnd:"; *cap; cap += 7) {
		snprintf(expect, sizeof(expect), "%.7s\t0000000008204001\n", cap);
		CHECK(strstr(buf, expect));
	}
	CHECK(strstr(buf, "NoNewPrivs:\t1\n"));
	CHECK(strstr(buf, "Seccomp:\t2\n"));
	/* Root's programs are out of its reach, root as it is: the root is
	 * read-only. */
	CHECK(strstr(buf, "write: root's file 30\n"));
	CHECK(strstr(buf, "node md 2\n"));
	CHECK(strstr(buf, "node sda 1\n"));
	for (const char *p = strstr(buf, "node /dev/"); p; p = strstr(p + 1, "node /dev/"))
		CHECK(strstr(p, " 1:3\n") == strchr(p, '\n') - 4);
	CHECK(readlink("/proc/self/ns/mnt", ns, sizeof(ns) - 1) > 0);
	snprintf(expect, sizeof(expect), "ns %s\n", ns);
	CHECK(strstr(buf, "ns mnt:["));
	CHECK(!strstr(buf, expect));
	for (const char *p = strstr(buf, "write: /"); p; p = strstr(p + 1, "write: /")) {
		char path[64];
		int err = -1;

		CHECK(sscanf(p, "write: %63s %d", path, &err) == 2);
		/* Read-only, and the kernel's settings only root's (not a
		 * capability's) anyway. */
		if (access(path, F_OK) == 0 || err != ENOENT)
			CHECK(err == EROFS || err == EACCES);
	}
	CHECK(strstr(buf, "write: /proc/sys/kernel/hostname "));
}

/* The socket families a contained process got (0) or was refused (EPERM),
 * as the probe reported them in BUF. */
static int socket_errno(const char *buf, const char *family)
{
	char want[64];
	const char *p;

	snprintf(want, sizeof(want), "socket(%s) ", family);
	p = strstr(buf, want);
	return p ? atoi(p + strlen(want)) : -1;
}

/* The menu may open no socket to the network, on a network boot either;
 * the helper that fetches for it may (IP), but no raw Ethernet, and it
 * reads no disk, which the menu does. */
static void test_menu_gets_no_network_its_fetcher_ip_only(void)
{
	static char buf[16384];
	char expect[64];
	int status;

	fixture_text("/disk", "");
	disk_file = fixture_path("/disk");
	CHECK_INT(chmod(fixture_root(), 0755), 0);
	CHECK_INT(chown(disk_file, 0, NMBL_MENU_GID), 0);
	CHECK_INT(chmod(disk_file, 0640), 0);
	run_contained(probe, buf, sizeof(buf), &status);
	CHECK_INT(socket_errno(buf, "AF_INET"), EPERM);
	CHECK_INT(socket_errno(buf, "AF_INET6"), EPERM);
	CHECK_INT(socket_errno(buf, "AF_PACKET"), EPERM);
	CHECK(strstr(buf, "read: disk 0\n"));
	run_in(nmbl_contain_fetcher, probe, buf, sizeof(buf), &status);
	disk_file = NULL;
	CHECK(WIFEXITED(status));
	/* The process that parses the network's bytes reads no disk. */
	CHECK(strstr(buf, "read: disk 13\n"));
	CHECK(strstr(buf, "contain 0\n"));
	CHECK_INT(socket_errno(buf, "AF_INET"), 0);
	CHECK_INT(socket_errno(buf, "AF_PACKET"), EPERM);
	CHECK(strstr(buf, "CapEff:\t0000000000000000\n"));
	CHECK(strstr(buf, "kexec_file_load 1\n"));
	/* A user and group of its own: not the menu's, which read the disks. */
	snprintf(expect, sizeof(expect), "Gid:\t%d\t%d\t%d\t%d\n", NMBL_FETCH_GID,
		 NMBL_FETCH_GID, NMBL_FETCH_GID, NMBL_FETCH_GID);
	CHECK(strstr(buf, expect));
	snprintf(expect, sizeof(expect), "Uid:\t%d\t%d\t%d\t%d\n", NMBL_FETCH_UID,
		 NMBL_FETCH_UID, NMBL_FETCH_UID, NMBL_FETCH_UID);
	CHECK(strstr(buf, expect));
}

/* dhcpcd: not root, the network's capabilities only, kept through exec
 * (ambient: NET_BIND_SERVICE 10, NET_ADMIN 12, NET_RAW 13), IP and raw
 * Ethernet sockets, the rest of the filter. */
static void test_dhcp_client_keeps_only_the_networks_powers(void)
{
	static char buf[16384];
	char expect[64];
	int status;

	/* Root's file, which anyone may read, in a directory anyone may
	 * enter: only being root would let one write it. */
	fixture_text("/roots", "");
	roots_file = fixture_path("/roots");
	CHECK_INT(chmod(fixture_root(), 0755), 0);
	CHECK_INT(chmod(roots_file, 0644), 0);
	run_in(nmbl_contain_dhcp, probe, buf, sizeof(buf), &status);
	roots_file = NULL;
	CHECK(WIFEXITED(status));
	CHECK(strstr(buf, "contain 0\n"));
	snprintf(expect, sizeof(expect), "Uid:\t%d\t%d\t%d\t%d\n", NMBL_NET_UID, NMBL_NET_UID,
		 NMBL_NET_UID, NMBL_NET_UID);
	CHECK(strstr(buf, expect));
	snprintf(expect, sizeof(expect), "Gid:\t%d\t%d\t%d\t%d\n", NMBL_NET_GID, NMBL_NET_GID,
		 NMBL_NET_GID, NMBL_NET_GID);
	CHECK(strstr(buf, expect));
	for (const char *cap = "CapPrm:CapEff:CapBnd:CapAmb:CapInh:"; *cap; cap += 7) {
		snprintf(expect, sizeof(expect), "%.7s\t0000000000003400\n", cap);
		CHECK(strstr(buf, expect));
	}
	CHECK(strstr(buf, "NoNewPrivs:\t1\n"));
	CHECK_INT(socket_errno(buf, "AF_INET"), 0);
	CHECK_INT(socket_errno(buf, "AF_INET6"), 0);
	CHECK_INT(socket_errno(buf, "AF_PACKET"), 0);
	CHECK(strstr(buf, "kexec_file_load 1\n"));
	CHECK(strstr(buf, "mount 1\n"));
	CHECK(strstr(buf, "ptrace 1\n"));
	CHECK(strstr(buf, "write: root's file 13\n"));
}

static void x32_call(void)
{
#ifdef __x86_64__
	syscall(0x40000000 | SYS_getpid);
#else
	raise(SIGSYS);
#endif
	fprintf(out, "still running\n");
}

static void test_another_architectures_entry_kills(void)
{
	char buf[256];
	int status;

	run_contained(x32_call, buf, sizeof(buf), &status);
	CHECK(strstr(buf, "contain 0\n"));
	CHECK(!strstr(buf, "still running"));
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_denied_calls_get_eperm_without_capabilities,
		test_another_architectures_entry_kills,
		test_disk_tools_keep_only_what_sets_up_volumes,
		test_menu_gets_no_network_its_fetcher_ip_only,
		test_dhcp_client_keeps_only_the_networks_powers,
		NULL,
	};

	return unit_main(tests);
}
