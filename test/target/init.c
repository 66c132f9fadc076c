/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * init of the VM tests' target system: the kernel that nmbl kexecs (or
 * that QEMU boots directly) ends up here.  It reports what the test must
 * check -- kernel release, command line, which initrds arrived, uptime --
 * and powers the machine off so that QEMU exits.
 *
 * It never waits for anything: whatever fails, it prints what it has and
 * powers off.  Run as any PID but 1 (e.g. by hand on the build host) it
 * mounts nothing, only prints to stdout and exits, so that the output can
 * be checked without a VM.
 *
 * Output, one write(2) per line so that kernel messages cannot split it:
 *   NMBL-TARGET-UP release=<uname -r> cmdline=<whole /proc/cmdline>
 *   NMBL-TARGET-INITRD <marker> <marker> ...     (empty list: no marker)
 *   NMBL-TARGET-UPTIME <first field of /proc/uptime>
 *   NMBL-TARGET-KERNEL boot-id=<this kernel's boot id> linux-starts=<N>
 *                      nmbl-lines=<N>   (from the kernel log: how often a
 *                                      kernel started in it, and how many
 *                                      of its lines nmbl wrote; a direct
 *                                      boot shows nmbl's, a kexec none)
 *   NMBL-TARGET-PROCS <pid>:<comm> ...   every process but this one and the
 *                                      kernel's threads (empty: none): a
 *                                      direct boot must bring none of
 *                                      nmbl's along
 *   NMBL-TARGET-NET <card>[=<IPv4 address>] ... routes=<N>
 *                                      the network cards that are up (lo
 *                                      aside), their addresses, and how
 *                                      many IPv4 routes the kernel has: a
 *                                      direct boot must bring along none of
 *                                      what nmbl's DHCP set up
 *   NMBL-TARGET-BLOCK <name> ...        the kernel's block devices
 *                                      (/sys/block, sorted): a direct boot
 *                                      must leave none of the md arrays and
 *                                      device-mapper volumes nmbl's menu had
 *   NMBL-TARGET-EFIVAR <name>=<value>   for each Boot Loader Interface
 *                                      variable the boot left (UTF-16;
 *                                      LoaderFeatures in hex)
 *   NMBL-TARGET-EFIVAR-SET <name>=<value> for each nmbl_test.efivar=<name>=<value>
 *                                      on the command line: what
 *                                      "bootctl set-oneshot/set-default"
 *                                      would write, written before power-off
 *
 * With nmbl.test-root=dirty or =check on the command line (a userspace
 * parameter, so a direct boot may carry it), the root file system too:
 *   NMBL-TARGET-ROOT options=<the root's options in /proc/mounts>
 *   dirty: writes /nmbl-journal (this boot's id), fsync()s it into the
 *     journal and powers off without unmounting or syncing, so the next
 *     mount has a journal to replay:
 *   NMBL-TARGET-ROOT-DIRTY <ok|error>
 *   check: what the journal held, then whether the root can be written:
 *   NMBL-TARGET-ROOT-FILE <content of /nmbl-journal|missing>
 *   NMBL-TARGET-ROOT-RW <ok|error>     (remount read-write, write, fsync)
 *   NMBL-TARGET-ROOT-RO <ok|error>     (remount read-only: clean again)
 *
 * With nmbl.test-tpm on the command line, what a verifier of the boot's
 * measurements reads (the tests replay the logs to the PCRs):
 *   NMBL-TARGET-PCR <bank> <index> <hex>     PCRs 0-15 of each bank in sysfs
 *   NMBL-TARGET-FILE <path> <base64>         a file, in lines of 3000
 *   NMBL-TARGET-FILE-END <path> <size|missing>   characters at most
 *   for nmbl's logs in /run/log/nmbl/, systemd's userspace log and the
 *   firmware's event log as this kernel has it.
 *
 * With a second disk (/dev/vdb) holding a LUKS2 volume, what a user sealing
 * a volume to the TPM sees (whatever the command line):
 *   NMBL-TARGET-LUKS enroll pcrs=<list> exit=<status>   when the volume has
 *                                      no token yet and its label is
 *                                      nmbl-tpm2-pcrs=<list>: enrolled by
 *                                      systemd-cryptenroll --tpm2-pcrs=<list>
 *   NMBL-TARGET-LUKS unlock token=<yes|no> exit=<status>   whether the
 *                                      volume has a token, and cryptsetup open
 *                                      --test-passphrase --token-only: 0
 *                                      when the TPM gave the key
 *
 * With nmbl.test-bootcfg=ACTION[,ACTION]... (install:PATH[@SHIM], bless,
 * status, remove), what nmbl's package and bless unit do on a real system:
 * the ESP (/dev/vda1, FAT; the entry loads vfat with rd.driver.pre=)
 * mounted on /efi, then "nmbl --verbose bootcfg ACTION [PATH] [--shim
 * SHIM]" for each, its own lines (and libnmbl's) on the console, and after
 * each:
 *   NMBL-TARGET-BOOTCFG <action> exit=<status>
 *   NMBL-TARGET-BOOTORDER order=<BootOrder, 0003,0001> next=<BootNext|->
 * Two more actions for shim, followed by the same two lines (exit is 0 or
 * an errno): sbat-latest asks shim to apply its latest SBAT level at the
 * next start (SbatPolicy, as "mokutil --set-sbat-policy latest" writes
 * it), and trust says what the kernel's keyrings were given and what shim
 * left:
 *   NMBL-TARGET-CERT <text>       each kernel message about an X.509
 *                                 certificate it loaded, and from where
 *   NMBL-TARGET-SBATLEVEL <line>  each line of SbatLevelRT
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

/* The dracut hook of the target initramfs copies the markers here, since
 * the initramfs itself is gone after switch_root. */
#define MARKER_DIR_RUN "/run/nmbl-initrd-marker"
/* Where the marker initrds put them: seen directly when this init runs
 * from an initramfs without switching root. */
#define MARKER_DIR_INITRD "/nmbl-initrd-marker"

#define LINE_MAX_LEN 4096
#define CMDLINE_MAX_LEN 2048
#define MARKER_MAX_LEN 64
#define MARKERS_MAX 32

static int console_fd = -1;
static bool stdout_is_console;

__attribute__((format(printf, 1, 2)))
static void out_line(const char *fmt, ...)
{
	char line[LINE_MAX_LEN];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';

	if (console_fd >= 0 && write(console_fd, line, n) < 0)
		console_fd = -1;
	if (!stdout_is_console && write(STDOUT_FILENO, line, n) < 0)
		return; /* nowhere left to tell */
}

/* Printing the same line twice on one serial port would break the "exactly
 * one marker line" promise, and stdout of PID 1 usually is the console. */
static bool same_char_device(int a, int b)
{
	struct stat sa, sb;

	if (fstat(a, &sa) < 0 || fstat(b, &sb) < 0)
		return false;
	return S_ISCHR(sa.st_mode) && S_ISCHR(sb.st_mode) &&
	       sa.st_rdev == sb.st_rdev;
}

static void open_console(void)
{
	console_fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	stdout_is_console = console_fd >= 0 &&
			    same_char_device(console_fd, STDOUT_FILENO);
}

/* After dracut's switch_root these are already mounted (moved): EBUSY is
 * the normal case, not an error. */
/* A mount point is on another device than its parent directory. */
static bool mounted(const char *path)
{
	char parent[64];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", path);
	return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* What an init mounts unless its initramfs moved it here already (as a
 * real init checks too: a second proc on top would hide what is mounted
 * inside the first, such as a boot loader's /proc/cmdline). */
static void mount_api_fs(void)
{
	static const struct {
		const char *source, *target, *type;
	} fs[] = {
		{ "proc", "/proc", "proc" },
		{ "sysfs", "/sys", "sysfs" },
		{ "devtmpfs", "/dev", "devtmpfs" },
	};
	size_t i;

	for (i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		if (!mounted(fs[i].target) &&
		    mount(fs[i].source, fs[i].target, fs[i].type,
			  MS_NOSUID | MS_NOEXEC, NULL) < 0 && errno != EBUSY)
			out_line("NMBL-TARGET-WARN mount %s: %s", fs[i].target,
				 strerror(errno));
}

/* Reads at most size-1 bytes of a small file into buf, NUL-terminated,
 * control characters (including newlines) replaced by spaces and trailing
 * spaces dropped.  Returns the length, or -1 with errno set. */
static ssize_t read_text(const char *dir, const char *name, char *buf,
			 size_t size)
{
	size_t len = 0;
	ssize_t n;
	int dfd = AT_FDCWD, fd, saved;

	if (dir) {
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -1;
	}
	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	saved = errno;
	if (dir)
		close(dfd);
	if (fd < 0) {
		errno = saved;
		return -1;
	}
	while (len < size - 1) {
		n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
	}
	close(fd);
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = ' ';
	while (len > 0 && buf[len - 1] == ' ')
		buf[--len] = '\0';
	return len;
}

#define EFIVARS "/sys/firmware/efi/efivars"
#define LOADER_GUID "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

/* systemd's Boot Loader Interface: what the boot loader said of the boot,
 * as bootctl status would show it, and what the last boot asked of this
 * one.  efivarfs needs its module, which the target initramfs loads. */
static void report_loader_variables(void)
{
	static const char *const names[] = {
		"LoaderInfo", "LoaderEntrySelected", "LoaderDevicePartUUID",
		"LoaderImageIdentifier", "LoaderFirmwareType", "StubInfo",
		"LoaderTimeInitUSec", "LoaderTimeExecUSec", "LoaderFeatures",
		"LoaderEntryOneShot", "LoaderEntryDefault",
	};

	if (mount("efivarfs", EFIVARS, "efivarfs", MS_NOSUID | MS_NOEXEC, NULL) < 0 &&
	    errno != EBUSY) {
		out_line("NMBL-TARGET-WARN mount %s: %s", EFIVARS, strerror(errno));
		return;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[128], raw[1024], value[512];
		size_t len = 0, v = 0;
		ssize_t n;
		int fd;

		snprintf(path, sizeof(path), EFIVARS "/%s-" LOADER_GUID, names[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		while ((n = read(fd, raw + len, sizeof(raw) - len)) > 0)
			len += (size_t)n;
		close(fd);
		if (strcmp(names[i], "LoaderFeatures") == 0) {
			/* A little-endian 64-bit mask. */
			unsigned long long mask = 0;

			for (size_t j = len; j > 4; j--)
				mask = mask << 8 | (unsigned char)raw[j - 1];
			out_line("NMBL-TARGET-EFIVAR %s=%#llx", names[i], mask);
			continue;
		}
		/* 4 bytes of attributes, then UTF-16LE; ASCII is all we print. */
		for (size_t j = 4; j + 1 < len && v + 1 < sizeof(value); j += 2) {
			if (raw[j] == 0 && raw[j + 1] == 0)
				break;
			value[v++] = raw[j + 1] == 0 && raw[j] >= 0x20 && raw[j] < 0x7f ? raw[j] : '?';
		}
		value[v] = '\0';
		out_line("NMBL-TARGET-EFIVAR %s=%s", names[i], value);
	}
}

/* Write NAME=VALUE (ASCII) as bootctl does: UTF-16LE with its NUL,
 * non-volatile, boot service and runtime access. */
static void set_loader_variable(const char *name, size_t name_len, const char *value)
{
	unsigned char data[4 + 2 * 256] = { 0x07, 0, 0, 0 };
	size_t len = 4;
	char path[256];
	int fd;

	for (const char *c = value; *c && len + 4 <= sizeof(data); c++) {
		data[len++] = (unsigned char)*c;
		data[len++] = 0;
	}
	data[len++] = 0;
	data[len++] = 0;
	snprintf(path, sizeof(path), EFIVARS "/%.*s-" LOADER_GUID, (int)name_len, name);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
		out_line("NMBL-TARGET-WARN write %s: %s", path, strerror(errno));
	} else {
		out_line("NMBL-TARGET-EFIVAR-SET %.*s=%s", (int)name_len, name, value);
	}
	if (fd >= 0)
		close(fd);
}

static void set_requested_variables(void)
{
	static const char key[] = "nmbl_test.efivar=";
	char cmdline[CMDLINE_MAX_LEN];
	char *word, *save = NULL;

	if (read_text(NULL, "/proc/cmdline", cmdline, sizeof(cmdline)) < 0)
		return;
	for (word = strtok_r(cmdline, " \n", &save); word; word = strtok_r(NULL, " \n", &save)) {
		char *eq;

		if (strncmp(word, key, sizeof(key) - 1) != 0)
			continue;
		word += sizeof(key) - 1;
		eq = strchr(word, '=');
		if (eq)
			set_loader_variable(word, (size_t)(eq - word), eq + 1);
	}
}

static void report_up(void)
{
	char cmdline[CMDLINE_MAX_LEN];
	struct utsname u;
	const char *release = "?";

	if (uname(&u) == 0)
		release = u.release;
	if (read_text(NULL, "/proc/cmdline", cmdline, sizeof(cmdline)) < 0)
		strcpy(cmdline, "?");
	out_line("NMBL-TARGET-UP release=%s cmdline=%s", release, cmdline);
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Markers are listed sorted by file name, so a test can compare the line
 * with one fixed string. */
static void report_initrd_markers(void)
{
	char line[LINE_MAX_LEN] = "";
	char *names[MARKERS_MAX];
	const char *dir = MARKER_DIR_RUN;
	size_t count = 0, used = 0, i;
	struct dirent *de;
	DIR *d;

	d = opendir(dir);
	if (!d) {
		dir = MARKER_DIR_INITRD;
		d = opendir(dir);
	}
	if (d) {
		while (count < MARKERS_MAX && (de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			names[count] = strdup(de->d_name);
			if (names[count])
				count++;
		}
		closedir(d);
	}
	qsort(names, count, sizeof(names[0]), compare_names);

	for (i = 0; i < count; i++) {
		char content[MARKER_MAX_LEN];
		int n;

		if (read_text(dir, names[i], content, sizeof(content)) <= 0)
			strcpy(content, "?");
		n = snprintf(line + used, sizeof(line) - used, " %s", content);
		if (n > 0 && (size_t)n < sizeof(line) - used)
			used += n;
		free(names[i]);
	}
	out_line("NMBL-TARGET-INITRD%s", line);
}

static void report_uptime(void)
{
	char uptime[64];

	if (read_text(NULL, "/proc/uptime", uptime, sizeof(uptime)) < 0)
		strcpy(uptime, "?");
	uptime[strcspn(uptime, " ")] = '\0';
	out_line("NMBL-TARGET-UPTIME %s", uptime);
}

/* A kernel's log starts with "Linux version"; a kernel booted by kexec
 * starts a new log, the same kernel switching root keeps its own. */
/* PF_KTHREAD in the flags of /proc/PID/stat. */
#define KERNEL_THREAD 0x00200000UL

static void report_processes(void)
{
	char list[LINE_MAX_LEN - 64] = "";
	size_t len = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	while (d && (de = readdir(d))) {
		char path[sizeof("/proc//stat") + sizeof(de->d_name)], stat[1024], *end;
		unsigned long flags;
		ssize_t n;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9' || atoi(de->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, stat, sizeof(stat) - 1);
		close(fd);
		if (n <= 0)
			continue;
		stat[n] = '\0';
		/* "PID (COMM) STATE PPID PGRP SESSION TTY TPGID FLAGS ..." */
		end = strrchr(stat, ')');
		if (!end || sscanf(end + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1 ||
		    (flags & KERNEL_THREAD))
			continue;
		*end = '\0';
		len += (size_t)snprintf(list + len, sizeof(list) - len, " %s:%s", de->d_name,
					strchr(stat, '(') + 1);
		if (len >= sizeof(list))
			break;
	}
	if (d)
		closedir(d);
	out_line("NMBL-TARGET-PROCS%s", list);
}

static void report_network(void)
{
	char list[LINE_MAX_LEN - 64] = "", line[256];
	struct if_nameindex *names = if_nameindex();
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), routes = -1;
	size_t len = 0;
	FILE *f;

	for (struct if_nameindex *i = names; fd >= 0 && i && i->if_index; i++) {
		struct ifreq ifr = { 0 };

		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->if_name);
		if (strcmp(i->if_name, "lo") == 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 ||
		    !(ifr.ifr_flags & IFF_UP) || len >= sizeof(list))
			continue;
		len += (size_t)snprintf(list + len, sizeof(list) - len, " %s", i->if_name);
		if (ioctl(fd, SIOCGIFADDR, &ifr) == 0 && len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, "=%s",
						inet_ntoa(((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr));
	}
	if (names)
		if_freenameindex(names);
	if (fd >= 0)
		close(fd);
	/* A line a route, after the header. */
	f = fopen("/proc/net/route", "re");
	if (!f) {
		out_line("NMBL-TARGET-NET%s routes=unknown(%s)", list, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f))
		routes++;
	fclose(f);
	out_line("NMBL-TARGET-NET%s routes=%d", list, routes);
}

static void report_block_devices(void)
{
	char list[LINE_MAX_LEN - 64] = "";
	struct dirent **names = NULL;
	size_t len = 0;
	int n = scandir("/sys/block", &names, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		if (names[i]->d_name[0] != '.' && len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, " %s",
						names[i]->d_name);
		free(names[i]);
	}
	free(names);
	out_line("NMBL-TARGET-BLOCK%s", list);
}

/* The kernel's log buffer, NUL-terminated and malloc'ed; NULL when it
 * cannot be read. */
static char *kernel_log(void)
{
	int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *log = size > 0 ? malloc((size_t)size + 1) : NULL;
	int n = log ? klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, size) : -1;

	if (n < 0) {
		free(log);
		return NULL;
	}
	log[n] = '\0';
	return log;
}

static void report_kernel(void)
{
	char boot_id[64];
	int starts = -1, nmbl = -1;
	char *log = kernel_log();

	if (read_text(NULL, "/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id)) < 0)
		strcpy(boot_id, "?");
	boot_id[strcspn(boot_id, "\n")] = '\0';
	if (log) {
		starts = nmbl = 0;
		for (char *p = log; (p = strstr(p, "Linux version ")); p++)
			starts++;
		for (char *p = log; (p = strstr(p, "nmbl: ")); p++)
			nmbl++;
		free(log);
	}
	out_line("NMBL-TARGET-KERNEL boot-id=%s linux-starts=%d nmbl-lines=%d", boot_id,
		 starts, nmbl);
}

/* The value of nmbl.test-root=, or "" */
static void root_test_mode(char *mode, size_t size)
{
	static const char key[] = "nmbl.test-root=";
	char cmdline[CMDLINE_MAX_LEN];
	char *word, *save = NULL;

	mode[0] = '\0';
	if (read_text(NULL, "/proc/cmdline", cmdline, sizeof(cmdline)) < 0)
		return;
	for (word = strtok_r(cmdline, " ", &save); word; word = strtok_r(NULL, " ", &save))
		if (strncmp(word, key, sizeof(key) - 1) == 0)
			snprintf(mode, size, "%s", word + sizeof(key) - 1);
}

/* The options of the last mount on / in /proc/mounts (the real root, not
 * the initramfs's rootfs below it). */
static void root_options(char *options, size_t size)
{
	char dev[256], dir[256], type[64], opts[1024];
	FILE *f = fopen("/proc/mounts", "re");

	snprintf(options, size, "?");
	if (!f)
		return;
	while (fscanf(f, "%255s %255s %63s %1023s %*d %*d", dev, dir, type, opts) == 4)
		if (strcmp(dir, "/") == 0)
			snprintf(options, size, "%s", opts);
	fclose(f);
}

static const char *write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) &&
		  fsync(fd) == 0;

	if (fd >= 0)
		close(fd);
	return ok ? "ok" : strerror(errno);
}

/* Returns only when the mode is not "dirty". */
static void test_root(void)
{
	char mode[32], options[1024], boot_id[64], content[64];

	root_test_mode(mode, sizeof(mode));
	if (!mode[0])
		return;
	root_options(options, sizeof(options));
	out_line("NMBL-TARGET-ROOT options=%s", options);
	if (read_text(NULL, "/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id)) < 0)
		strcpy(boot_id, "?");
	if (strcmp(mode, "dirty") == 0) {
		const char *r = "remount";

		if (mount(NULL, "/", NULL, MS_REMOUNT, NULL) == 0)
			r = write_file("/nmbl-journal", boot_id);
		out_line("NMBL-TARGET-ROOT-DIRTY %s", strcmp(r, "remount") ? r : strerror(errno));
		/* No sync, no unmount: the journal is left to replay. */
		reboot(RB_POWER_OFF);
		return;
	}
	if (read_text(NULL, "/nmbl-journal", content, sizeof(content)) < 0)
		strcpy(content, "missing");
	out_line("NMBL-TARGET-ROOT-FILE %s", content);
	if (mount(NULL, "/", NULL, MS_REMOUNT, NULL) == 0)
		out_line("NMBL-TARGET-ROOT-RW %s", write_file("/nmbl-rw-check", boot_id));
	else
		out_line("NMBL-TARGET-ROOT-RW %s", strerror(errno));
	sync();
	out_line("NMBL-TARGET-ROOT-RO %s", mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0 ?
		 "ok" : strerror(errno));
}

/* Power off is what QEMU turns into an exit; a reboot does the same under
 * -no-reboot.  Not halt: a halted VM runs on forever.  If both fail,
 * returning from PID 1 panics, and the target initramfs makes a panic
 * reboot. */
/* An EFI variable of UINT16s as "0003,0001", "-" when absent. */
static void boot_numbers(const char *name, char *out, size_t size)
{
	unsigned char v[4 + 2 * 64];
	char path[128];
	size_t o = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), EFIVARS "/%s-8be4df61-93ca-11d2-aa0d-00e098032b8c", name);
	snprintf(out, size, "-");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, v, sizeof(v));
	close(fd);
	for (ssize_t i = 4; i + 1 < n && o + 6 < size; i += 2)
		o += (size_t)snprintf(out + o, size - o, "%s%04X", i > 4 ? "," : "",
				      v[i] | v[i + 1] << 8);
}

/* ARGV run with ENVP, its output on the console (QUIET: only its
 * errors); its exit status, or -1 when it did not exit. */
static int run_program(char *const argv[], char *const envp[], bool quiet)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		if (console_fd >= 0) {
			dup2(console_fd, STDOUT_FILENO);
			dup2(console_fd, STDERR_FILENO);
		}
		if (quiet) {
			int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

			if (null >= 0)
				dup2(null, STDOUT_FILENO);
		}
		execve(argv[0], argv, envp);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define SHIM_GUID "605dab50-e046-4300-abb6-3dd810dd8b23"

static int sbat_policy_latest(void)
{
	/* NV, BS, RT; then SBAT_POLICY_LATEST. */
	static const unsigned char v[] = { 7, 0, 0, 0, 1 };
	int fd = open(EFIVARS "/SbatPolicy-" SHIM_GUID, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		      0644);
	int err = 0;

	if (fd < 0 || write(fd, v, sizeof(v)) != (ssize_t)sizeof(v))
		err = errno;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	return err;
}

static void report_trust(void)
{
	char *log = kernel_log(), *line, *save = NULL;
	char level[512];
	ssize_t n = -1;
	int fd;

	if (log) {
		for (line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strstr(line, "X.509"))
				out_line("NMBL-TARGET-CERT %s", line);
		free(log);
	}
	fd = open(EFIVARS "/SbatLevelRT-" SHIM_GUID, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, level, sizeof(level) - 1);
		close(fd);
	}
	if (n < 4) {
		out_line("NMBL-TARGET-SBATLEVEL -");
		return;
	}
	level[n] = '\0';
	save = NULL;
	for (line = strtok_r(level + 4, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		out_line("NMBL-TARGET-SBATLEVEL %s", line);
}

static void run_bootcfg(const char *action)
{
	char verb[64], path[256], order[400], next[16];
	const char *arg = strchr(action, ':');
	size_t len = arg ? (size_t)(arg - action) : strlen(action);
	const char *shim = arg ? strchr(arg, '@') : NULL;
	char *argv[] = { "/usr/bin/nmbl", "--verbose", "bootcfg", verb, arg ? path : NULL,
			 shim ? "--shim" : NULL, shim ? (char *)shim + 1 : NULL, NULL };
	char *envp[] = { NULL };
	int status;

	snprintf(verb, sizeof(verb), "%.*s", (int)len, action);
	if (arg)
		snprintf(path, sizeof(path), "%.*s",
			 (int)(shim ? (size_t)(shim - arg - 1) : strlen(arg + 1)), arg + 1);
	if (strcmp(verb, "sbat-latest") == 0) {
		status = sbat_policy_latest();
	} else if (strcmp(verb, "trust") == 0) {
		report_trust();
		status = 0;
	} else {
		status = run_program(argv, envp, false);
	}
	out_line("NMBL-TARGET-BOOTCFG %s exit=%d", verb, status);
	boot_numbers("BootOrder", order, sizeof(order));
	boot_numbers("BootNext", next, sizeof(next));
	out_line("NMBL-TARGET-BOOTORDER order=%s next=%s", order, next);
}

static void test_bootcfg(void)
{
	static const char key[] = "nmbl.test-bootcfg=";
	char cmdline[CMDLINE_MAX_LEN], *p, *save = NULL, *action;

	if (read_text("/proc", "cmdline", cmdline, sizeof(cmdline)) < 0)
		return;
	p = strstr(cmdline, key);
	if (!p)
		return;
	p += sizeof(key) - 1;
	p[strcspn(p, " ")] = '\0';
	if (mount("/dev/vda1", "/efi", "vfat", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		out_line("NMBL-TARGET-WARN mount /efi: %s", strerror(errno));
	for (action = strtok_r(p, ",", &save); action; action = strtok_r(NULL, ",", &save))
		run_bootcfg(action);
	if (umount("/efi") < 0)
		out_line("NMBL-TARGET-WARN umount /efi: %s", strerror(errno));
}

static bool cmdline_has(const char *word)
{
	char cmdline[CMDLINE_MAX_LEN], padded[CMDLINE_MAX_LEN + 2], w[128];

	if (read_text(NULL, "/proc/cmdline", cmdline, sizeof(cmdline)) < 0)
		return false;
	snprintf(padded, sizeof(padded), " %s ", cmdline);
	snprintf(w, sizeof(w), " %s ", word);
	return strstr(padded, w) != NULL;
}

static void report_pcrs(void)
{
	static const char *const banks[] = { "sha1", "sha256", "sha384", "sha512" };
	char dir[64], name[8], value[160];

	for (size_t b = 0; b < sizeof(banks) / sizeof(banks[0]); b++) {
		snprintf(dir, sizeof(dir), "/sys/class/tpm/tpm0/pcr-%s", banks[b]);
		for (int i = 0; i < 16; i++) {
			snprintf(name, sizeof(name), "%d", i);
			if (read_text(dir, name, value, sizeof(value)) > 0)
				out_line("NMBL-TARGET-PCR %s %d %s", banks[b], i, value);
		}
	}
}

/* PATH whole, in base64 lines: the logs are binary and tens of KiB. */
static void report_file(const char *path)
{
	static const char digits[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned char in[2250];
	char line[3001];
	size_t total = 0, have = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool end = false;

	if (fd < 0) {
		out_line("NMBL-TARGET-FILE-END %s missing", path);
		return;
	}
	while (!end) {
		ssize_t n = read(fd, in + have, sizeof(in) - have);
		size_t o = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			end = true;
		else
			have += (size_t)n;
		if (have < sizeof(in) && !end)
			continue;
		for (size_t i = 0; i < have; i += 3) {
			unsigned v = (unsigned)in[i] << 16;

			if (i + 1 < have)
				v |= (unsigned)in[i + 1] << 8;
			if (i + 2 < have)
				v |= in[i + 2];
			line[o++] = digits[v >> 18 & 63];
			line[o++] = digits[v >> 12 & 63];
			line[o++] = i + 1 < have ? digits[v >> 6 & 63] : '=';
			line[o++] = i + 2 < have ? digits[v & 63] : '=';
		}
		line[o] = '\0';
		if (have)
			out_line("NMBL-TARGET-FILE %s %s", path, line);
		total += have;
		have = 0;
	}
	close(fd);
	out_line("NMBL-TARGET-FILE-END %s %zu", path, total);
}

static void report_tpm(void)
{
	if (!cmdline_has("nmbl.test-tpm"))
		return;
	if (!mounted("/sys/kernel/security") &&
	    mount("securityfs", "/sys/kernel/security", "securityfs", MS_NOSUID | MS_NOEXEC,
		  NULL) < 0 && errno != EBUSY)
		out_line("NMBL-TARGET-WARN mount securityfs: %s", strerror(errno));
	report_pcrs();
	report_file("/run/log/nmbl/tpm2-event-log.bin");
	report_file("/run/log/nmbl/tpm2-measure.log");
	report_file("/run/log/nmbl/ima-binary-runtime-measurements");
	report_file("/run/log/systemd/tpm2-measure.log");
	report_file("/sys/kernel/security/tpm0/binary_bios_measurements");
}

/* The LUKS2 binary header's magic and label (cryptsetup's luks2.h). */
static const char luks_magic[6] = { 'L', 'U', 'K', 'S', (char)0xba, (char)0xbe };
#define LUKS_LABEL_OFFSET 24
#define LUKS_LABEL_LEN 48
/* What the tests format the volume with (test/boot/measured.py): a label
 * naming the PCRs to enroll, and a passphrase for the enrolling. */
#define LUKS_ENROLL_LABEL "nmbl-tpm2-pcrs="
#define LUKS_TEST_PASSPHRASE "nmbl-test-passphrase"
/* Where test/target/mkroot puts them. */
#define CRYPTSETUP "/usr/sbin/cryptsetup"
#define CRYPTENROLL "/usr/bin/systemd-cryptenroll"

/* A second disk holding a LUKS2 volume (the measured-boot tests): as a
 * user would, enroll the TPM (systemd-cryptenroll) when the volume has no
 * token and its label asks for PCRs, then try to unlock it with the token
 * alone, without activating it (cryptsetup --test-passphrase). */
static void test_luks(void)
{
	static const char disk[] = "/dev/vdb", key[] = "/run/nmbl-luks-key";
	char header[LUKS_LABEL_OFFSET + LUKS_LABEL_LEN + 1] = "", pcrs[80], key_file[64];
	char *env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	char *has_token[] = { CRYPTSETUP, "token", "export", "--token-id", "0",
			      (char *)disk, NULL };
	char *unlock[] = { CRYPTSETUP, "open", "--test-passphrase", "--token-only",
			   (char *)disk, NULL };
	const char *label;
	int fd = open(disk, O_RDONLY | O_CLOEXEC);
	bool token;
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, header, sizeof(header) - 1);
	close(fd);
	if (n != (ssize_t)sizeof(header) - 1 || memcmp(header, luks_magic, sizeof(luks_magic)))
		return;
	label = header + LUKS_LABEL_OFFSET;
	token = run_program(has_token, env, true) == 0;
	if (!token && strncmp(label, LUKS_ENROLL_LABEL, strlen(LUKS_ENROLL_LABEL)) == 0) {
		char *enroll[] = { CRYPTENROLL, "--tpm2-device=auto", pcrs, key_file,
				   (char *)disk, NULL };
		const char *err = write_file(key, LUKS_TEST_PASSPHRASE);
		int status;

		snprintf(pcrs, sizeof(pcrs), "--tpm2-pcrs=%s",
			 label + strlen(LUKS_ENROLL_LABEL));
		snprintf(key_file, sizeof(key_file), "--unlock-key-file=%s", key);
		if (strcmp(err, "ok") != 0 || chmod(key, 0600) < 0)
			out_line("NMBL-TARGET-WARN %s: %s", key, err);
		status = run_program(enroll, env, false);
		out_line("NMBL-TARGET-LUKS enroll pcrs=%s exit=%d",
			 label + strlen(LUKS_ENROLL_LABEL), status);
		unlink(key);
		token = status == 0;
	}
	out_line("NMBL-TARGET-LUKS unlock token=%s exit=%d", token ? "yes" : "no",
		 run_program(unlock, env, false));
}

static void power_off(void)
{
	static const int how[] = { RB_POWER_OFF, RB_AUTOBOOT };
	size_t i;

	sync();
	for (i = 0; i < sizeof(how) / sizeof(how[0]); i++) {
		reboot(how[i]);
		out_line("NMBL-TARGET-WARN reboot(%#x): %s", how[i],
			 strerror(errno));
	}
}

int main(void)
{
	bool pid1 = getpid() == 1;

	/* Outside a VM, the host's console is none of our business. */
	if (pid1) {
		open_console();
		mount_api_fs();
		if (console_fd < 0)
			open_console();
	}

	report_up();
	report_initrd_markers();
	report_uptime();
	report_kernel();
	report_processes();
	report_network();
	report_block_devices();
	if (pid1) {
		report_loader_variables();
		set_requested_variables();
		test_root();
		test_bootcfg();
		report_tpm();
		test_luks();
	}

	if (!pid1)
		return EXIT_SUCCESS;
	power_off();
	return EXIT_FAILURE;
}
