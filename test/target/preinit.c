/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * target-preinit - process 1 of the VM tests' quick target initramfs
 * (mkquickinitrd).
 *
 * What the target's dracut initramfs does for most tests, and no more:
 * load the modules of a virtio disk, ext4 and efivarfs (and those each
 * rd.driver.pre= names), mount root=UUID= (an ext4) read-only, or
 * read-write with rw, carry the marker initrds' files over in
 * /run/nmbl-initrd-marker, and start the root's /sbin/init.  Under TCG,
 * dracut's shell init and udev took about ten seconds of every boot into
 * the target; this takes under one.  Tests of what a real initramfs does
 * (nmbl's handover module, other disk controllers) use the dracut one.
 *
 * A failure says what on the console and reboots: QEMU with -no-reboot
 * then exits, and the test sees why rather than wait for a marker.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Written by mkquickinitrd: a line per module it carries, "NAME PATH...",
 * the paths in load order (dependencies first, NAME's own last). */
#define MODULE_LIST "/etc/target-modules"
/* Loaded at every boot; rd.driver.pre= may add more of the list. */
static const char *const always[] = {
	"virtio_pci", "virtio_blk", "crc32c_generic", "ext4", "efivarfs",
};
#define MARKER_DIR "/nmbl-initrd-marker"
#define MARKER_DIR_RUN "/run/nmbl-initrd-marker"
/* How long root may take to appear: a virtio disk is there once its
 * driver is loaded, so this is only a bound. */
#define ROOT_WAIT_SECONDS 30

#define EXT4_SUPER_OFFSET 1024
#define EXT4_MAGIC_OFFSET 0x38
#define EXT4_UUID_OFFSET 0x68
#define EXT4_MAGIC 0xef53

static char cmdline[4096];

__attribute__((format(printf, 1, 2), noreturn))
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("target-preinit: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n", stderr);
	sync();
	reboot(RB_AUTOBOOT);
	_exit(1);
}

/* The value of kernel parameter NAME= from the Nth occurrence on (N counts
 * from 0), up to the next space, into BUF; false when there is none. */
static bool param(const char *name, int n, char *buf, size_t size)
{
	size_t len = strlen(name);
	const char *p = cmdline;

	while (*p) {
		const char *end = strchr(p, ' ');
		size_t wlen = end ? (size_t)(end - p) : strlen(p);

		if (wlen > len && strncmp(p, name, len) == 0 && p[len] == '=' && n-- == 0) {
			snprintf(buf, size, "%.*s", (int)(wlen - len - 1), p + len + 1);
			return true;
		}
		if (!end)
			break;
		p = end + 1;
	}
	return false;
}

/* The word NAME is on the command line. */
static bool flag(const char *name)
{
	size_t len = strlen(name);

	for (const char *p = cmdline; (p = strstr(p, name)); p += len)
		if ((p == cmdline || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0'))
			return true;
	return false;
}

static void read_cmdline(void)
{
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		die("cannot open /proc/cmdline: %s", strerror(errno));
	n = read(fd, cmdline, sizeof(cmdline) - 1);
	close(fd);
	if (n < 0)
		die("cannot read /proc/cmdline: %s", strerror(errno));
	cmdline[n] = '\0';
	cmdline[strcspn(cmdline, "\n")] = '\0';
}

static void insert(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die("cannot open %s: %s", path, strerror(errno));
	/* ENODEV: nothing here for it to drive, such as crc32c-intel (ext4's
	 * soft dependency) on a CPU without SSE4.2; crc32c_generic does. */
	if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST && errno != ENODEV)
		die("cannot load %s: %s", path, strerror(errno));
	close(fd);
}

/* NAME and what it depends on, as MODULE_LIST says ('-' and '_' alike,
 * as modprobe takes them). */
static void load(const char *name)
{
	char line[1024], want[128];
	bool found = false;
	FILE *f = fopen(MODULE_LIST, "re");

	if (!f)
		die("cannot open " MODULE_LIST ": %s", strerror(errno));
	snprintf(want, sizeof(want), "%s", name);
	for (char *c = want; *c; c++)
		if (*c == '-')
			*c = '_';
	while (!found && fgets(line, sizeof(line), f)) {
		char *save = NULL, *word = strtok_r(line, " \n", &save);

		if (!word || strcmp(word, want) != 0)
			continue;
		found = true;
		while ((word = strtok_r(NULL, " \n", &save)))
			insert(word);
	}
	fclose(f);
	if (!found)
		die("module %s is not in this initramfs", name);
}

static void load_modules(void)
{
	char list[256];

	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		load(always[i]);
	for (int n = 0; param("rd.driver.pre", n, list, sizeof(list)); n++) {
		char *save = NULL;

		for (char *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save))
			load(m);
	}
}

/* /dev/NAME holds an ext4 whose UUID is UUID (as root=UUID= spells it). */
static bool has_uuid(const char *name, const char *uuid)
{
	unsigned char sb[EXT4_UUID_OFFSET + 16];
	char path[300], text[37];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/dev/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = pread(fd, sb, sizeof(sb), EXT4_SUPER_OFFSET);
	close(fd);
	if (n != (ssize_t)sizeof(sb) ||
	    (sb[EXT4_MAGIC_OFFSET] | sb[EXT4_MAGIC_OFFSET + 1] << 8) != EXT4_MAGIC)
		return false;
	for (int i = 0, o = 0; i < 16; i++) {
		o += sprintf(text + o, "%02x", sb[EXT4_UUID_OFFSET + i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			text[o++] = '-';
	}
	return strcasecmp(text, uuid) == 0;
}

static bool find_root(const char *uuid, char *dev, size_t size)
{
	DIR *d = opendir("/sys/class/block");
	struct dirent *de;
	bool found = false;

	if (!d)
		die("cannot list /sys/class/block: %s", strerror(errno));
	while (!found && (de = readdir(d)))
		if (de->d_name[0] != '.' && has_uuid(de->d_name, uuid)) {
			snprintf(dev, size, "/dev/%s", de->d_name);
			found = true;
		}
	closedir(d);
	return found;
}

/* Until the root's device is there, looking again at each uevent. */
static void wait_for_root(const char *uuid, char *dev, size_t size)
{
	struct sockaddr_nl addr = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	time_t deadline = time(NULL) + ROOT_WAIT_SECONDS;
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);

	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		die("cannot follow uevents: %s", strerror(errno));
	while (!find_root(uuid, dev, size)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char buf[4096];
		time_t left = deadline - time(NULL);

		if (left <= 0)
			die("no ext4 with UUID %s appeared in %d s", uuid, ROOT_WAIT_SECONDS);
		if (poll(&p, 1, (int)left * 1000) > 0)
			while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
				;
	}
	close(fd);
}

static void copy_file(const char *from, const char *to)
{
	char buf[4096];
	ssize_t n;
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (in < 0 || out < 0)
		die("cannot copy %s to %s: %s", from, to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			die("cannot write %s: %s", to, strerror(errno));
	close(in);
	close(out);
}

/* The marker initrds' files, which the initramfs loses at the switch. */
static void keep_markers(void)
{
	DIR *d = opendir(MARKER_DIR);
	struct dirent *de;

	if (!d)
		return;
	if (mkdir(MARKER_DIR_RUN, 0755) < 0)
		die("cannot make " MARKER_DIR_RUN ": %s", strerror(errno));
	while ((de = readdir(d))) {
		char from[300], to[300];

		if (de->d_name[0] == '.')
			continue;
		snprintf(from, sizeof(from), MARKER_DIR "/%s", de->d_name);
		snprintf(to, sizeof(to), MARKER_DIR_RUN "/%s", de->d_name);
		copy_file(from, to);
	}
	closedir(d);
}

static void mount_fs(const char *source, const char *target, const char *type,
		     unsigned long flags)
{
	if (mount(source, target, type, flags, NULL) < 0)
		die("cannot mount %s on %s: %s", source, target, strerror(errno));
}

int main(void)
{
	static const char *const moved[] = { "/dev", "/proc", "/sys", "/run" };
	char uuid[64], dev[300];

	mount_fs("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_fs("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC);
	mount_fs("devtmpfs", "/dev", "devtmpfs", MS_NOSUID);
	mount_fs("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV);
	read_cmdline();
	if (!param("root", 0, uuid, sizeof(uuid)) || strncmp(uuid, "UUID=", 5) != 0)
		die("root=UUID=... is the only root this initramfs mounts: %s", cmdline);
	memmove(uuid, uuid + 5, strlen(uuid + 5) + 1);

	load_modules();
	wait_for_root(uuid, dev, sizeof(dev));
	mount_fs(dev, "/sysroot", "ext4", flag("rw") ? 0 : MS_RDONLY);
	keep_markers();

	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
		char target[64];

		snprintf(target, sizeof(target), "/sysroot%s", moved[i]);
		mount_fs(moved[i], target, NULL, MS_MOVE);
	}
	if (chdir("/sysroot") < 0)
		die("cannot enter /sysroot: %s", strerror(errno));
	mount_fs(".", "/", NULL, MS_MOVE);
	if (chroot(".") < 0 || chdir("/") < 0)
		die("cannot switch root: %s", strerror(errno));
	execl("/sbin/init", "/sbin/init", (char *)NULL);
	die("cannot start /sbin/init: %s", strerror(errno));
}
