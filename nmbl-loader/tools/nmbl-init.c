/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init - process 1 of nmbl's initramfs.
 *
 * Brings up what the menu needs and nothing more: the kernel's file
 * systems, the modules of the disks and keyboards present, the disks'
 * /dev/disk/by-* links, then the menu.  For as long as the menu runs, a
 * child follows the kernel's uevents, so that a keyboard plugged in (or a
 * USB disk found) later gets its driver too.  Before the menu, the
 * programs in /usr/lib/nmbl/pre-menu.d run in order.
 *
 * A new nmbl that fails must leave the machine to the firmware, which
 * then starts the nmbl it booted before: a panic reboots (panic= on the
 * UKI's command line), and a hang before the menu is up is reset by the
 * machine's watchdog, armed here once its driver is loaded and disarmed
 * by the menu once drawn (or at the hand-over, when it is skipped).
 *
 * The menu runs contained (no root, no capabilities, a seccomp filter)
 * and asks this process, its broker, for what needs root (libnmbl's
 * broker.c checks each request).  It runs in PID and IPC namespaces of
 * its own: whatever it starts, even in a session of its own, ends with it
 * (the kernel ends a PID namespace's every process when its first one
 * ends), before anything else happens here, so nothing of a menu taken
 * over by a GRUB bug lives on into the booted system, a kexec, a reboot
 * or the next menu.  Its exit status says what comes next
 * (libnmbl.h's NMBL_EXIT_*), when the broker agrees: 100, the broker
 * mounted the chosen entry's root on /sysroot (a direct boot), so switch
 * root to it and start its init; 101, it loaded the entry's kernel, so
 * kexec; 0, the user asked for a reboot; anything else (an exit status, a
 * signal, a crash, the OOM killer) is a failure of nmbl itself: say so,
 * undo what the broker prepared, and show the menu again.  Once the
 * broker has asked the firmware to start something (chainloader, fwsetup),
 * the machine reboots to it however the menu ended.
 *
 * Under Secure Boot this image is the boot loader the firmware trusts, so
 * nothing a console user types may give more than GRUB would: no shell,
 * whatever happens to the menu.  A shell exists only when nmbl's own
 * (signed) command line has nmbl.shell, which only a debug build sets,
 * and the image carries one.  The console's SysRq keys may sync, remount
 * read-only, reboot and set the log level, never signal a process.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libnmbl.h"
#include "macro.h"

#define MENU "/usr/libexec/nmbl/grub-emu"
#define CONSOLE "/usr/libexec/nmbl/nmbl-console"
#define MENU_CONFIG_DIR "/usr/share/nmbl/grub"
#define PRE_MENU_DIR "/usr/lib/nmbl/pre-menu.d"
#define RUN_DIR "/run/nmbl"
#define DEVICE_MAP RUN_DIR "/device.map"
/* Where GRUB's EFI image would have been started from, for the menu's
 * $cmdpath. */
#define CMDPATH_ENV "NMBL_GRUB_CMDPATH"
#define SHELL "/bin/sh"
/* The distribution's own tools, which assemble arrays and activate
 * volumes for the menu (volumes.c in libnmbl says why), with nmbl's own
 * configuration in the initramfs: read-only, no udev. */
#define MDADM "/usr/sbin/mdadm"
#define LVM "/usr/sbin/lvm"
/* What they leave in /run, which must not go along into the target. */
static const char *const volume_run_dirs[] = { "/run/mdadm", "/run/lvm", "/run/lock/lvm" };
/* Where efivarfs shows the firmware's variables. */
#define EFIVARS "/sys/firmware/efi/efivars"
/* SysRq's log level (2), sync (16), remount read-only (32) and reboot
 * (128): not keyboard control (4: SAK kills the console's processes),
 * dumps (8), signals to processes (64) or renicing (256). */
#define SYSRQ_MASK "178"
/* A menu that fails this soon, this often in a row, waits before it is
 * started again, rather than keep a CPU busy. */
#define MENU_FAST_FAIL_MS 2000
#define MENU_FAST_FAILS 5
#define MENU_RETRY_WAIT_S 5
/* How long the disk the firmware started nmbl from may take to appear:
 * udev's settle timeout, which nmbl's initramfs used before. */
#define ESP_WAIT_SECONDS 30
/* How long nmbl may take from loading its drivers to showing its menu
 * before the watchdog resets the machine, unless nmbl.watchdog= says.
 * The menu is up 1.3 s after the drivers in a VM under TCG (some ten
 * times slower than hardware); the longest wait of a healthy start is
 * for the ESP's disk, ESP_WAIT_SECONDS.  Four times that, and a machine
 * left alone is still back on the previous nmbl within a few minutes. */
#define WATCHDOG_DEFAULT_S 120
/* A network boot (an image built with its network, nmbl-init(8)): the
 * DHCP client, its configuration and where it keeps its leases; the list
 * of cards the menu reads (NMBL_NET_CARDS); the certificates HTTPS
 * servers are checked against. */
#define DHCPCD "/usr/sbin/dhcpcd"
#define DHCPCD_CONF "/etc/nmbl/dhcpcd.conf"
#define DHCPCD_LEASES "/var/lib/dhcpcd"
#define DHCPCD_RUN "/run/dhcpcd"
#define NET_DIR RUN_DIR "/net"
#define NET_CARDS NET_DIR "/cards"
#define NET_CARDS_ENV "NMBL_NET_CARDS"
#define CA_FILE "/usr/share/nmbl/ca-certificates.crt"
/* How long DHCP may take to answer: a switch port's spanning tree
 * (15 s of listening, 15 of learning before it forwards) and then some. */
#define DHCP_SECONDS 45
/* How long a card may take to see its link once up (autonegotiation takes
 * a few seconds on copper). */
#define LINK_SECONDS 10
/* What PXE firmware says it is (RFC 4578's architecture numbers), so that
 * a DHCP server answers nmbl as it answered the firmware. */
#if defined(__x86_64__)
#define PXE_ARCH "00007"
#elif defined(__aarch64__)
#define PXE_ARCH "00011"
#elif defined(__i386__)
#define PXE_ARCH "00006"
#else
#define PXE_ARCH "00000"
#endif
#define PXE_VENDOR_CLASS "PXEClient:Arch:" PXE_ARCH ":UNDI:003016"

/* Set once nmbl's network is up: the broker fetches for the menu. */
static bool network_up;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("nmbl-init: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void mount_api(void)
{
	static const struct {
		const char *type, *path, *options;
		unsigned long flags;
	} mounts[] = {
		{ "proc", "/proc", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC },
		{ "sysfs", "/sys", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC },
		{ "devtmpfs", "/dev", "mode=0755", MS_NOSUID },
		{ "devpts", "/dev/pts", "gid=5,mode=620,ptmxmode=000", MS_NOSUID | MS_NOEXEC },
		{ "tmpfs", "/run", "mode=0755", MS_NOSUID | MS_NODEV },
		/* The firmware's TPM event log, which nmbl's starts from. */
		{ "securityfs", "/sys/kernel/security", NULL, MS_NOSUID | MS_NODEV | MS_NOEXEC },
	};

	for (size_t i = 0; i < ELEMENTSOF(mounts); i++) {
		(void)mkdir(mounts[i].path, 0755);
		if (mount(mounts[i].type, mounts[i].path, mounts[i].type, mounts[i].flags,
			  mounts[i].options) < 0 && errno != EBUSY)
			say("cannot mount %s on %s: %m", mounts[i].type, mounts[i].path);
	}
}

/* The kernel opens /dev/console for process 1 only when the image has
 * the node; devtmpfs has it in any case. */
static void open_console(void)
{
	int fd = open("/dev/console", O_RDWR | O_NOCTTY);

	if (fd < 0)
		return;
	for (int i = 0; i < 3; i++)
		if (fd != i)
			(void)dup2(fd, i);
	if (fd > 2)
		close(fd);
}

/* The kernel's uevents, as udev receives them. */
static int open_uevents(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	int fd, size = 8 << 20;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    NETLINK_KOBJECT_UEVENT);
	if (fd < 0)
		return -errno;
	/* Loading the modules of a whole machine's devices at once queues
	 * hundreds of events before anyone reads them. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

static void link_present_disks(struct nmbl_ctx *ctx)
{
	DIR *d = opendir("/sys/class/block");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			(void)nmbl_link_block_device(ctx, de->d_name);
	closedir(d);
}

/* The disks, readable by the menu's group, as GRUB reads every disk the
 * firmware shows; never writable: what GRUB writes, grubenv, the broker
 * writes.  Again for each disk that appears while the menu runs. */
static void share_disks_with_menu(void)
{
	DIR *d = opendir("/dev");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISBLK(st.st_mode))
			continue;
		if (fchownat(dirfd(d), de->d_name, 0, NMBL_MENU_GID, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(dirfd(d), de->d_name, 0640, 0) < 0)
			say("the menu cannot read /dev/%s: %m", de->d_name);
	}
	closedir(d);
}

/*
 * Act on every uevent queued on FD.  Only the kernel's are taken: a process
 * may send to the group too.  After an overflow, what was lost is found
 * again: modules by a new coldplug, links from the disks now present.  The
 * disks are shared with the menu once all queued are taken: loading a
 * machine's modules queues hundreds of events.
 */
static void drain_uevents(struct nmbl_ctx *ctx, int fd)
{
	char buf[NMBL_UEVENT_MAX];
	bool taken = false;

	for (;;) {
		struct sockaddr_nl from;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr msg = {
			.msg_name = &from, .msg_namelen = sizeof(from),
			.msg_iov = &iov, .msg_iovlen = 1,
		};
		ssize_t n = recvmsg(fd, &msg, 0);
		int r;

		if (n < 0 && errno == ENOBUFS) {
			(void)nmbl_coldplug(ctx);
			link_present_disks(ctx);
			taken = true;
			continue;
		}
		if (n < 0)
			break;
		if (from.nl_pid != 0 || (msg.msg_flags & MSG_TRUNC))
			continue;
		r = nmbl_handle_uevent(ctx, buf, (size_t)n);
		if (r < 0 && r != -EBADMSG)
			say("device event: %s", strerror(-r));
		taken = true;
	}
	if (taken)
		share_disks_with_menu();
}

/* The partition systemd-stub says the firmware started nmbl from, as its
 * /dev/disk/by-partuuid link; NULL when the firmware did not say (or said
 * something that is no partition's UUID, which is worth a line). */
static char *esp_link(struct nmbl_ctx *ctx)
{
	_cleanup_free_ char *uuid = NULL;
	char *link = NULL;
	int r;

	r = nmbl_get_loader_device_partuuid(ctx, &uuid);
	if (r == -EBADMSG)
		say("LoaderDevicePartUUID is no partition UUID; ignored");
	else if (r < 0 && r != -ENOENT)
		say("cannot read LoaderDevicePartUUID: %s", strerror(-r));
	if (r < 0)
		return NULL;
	if (asprintf(&link, "/dev/disk/by-partuuid/%s", uuid) < 0)
		return NULL;
	return link;
}

/* Seconds since the kernel started, as its log counts them. */
static double since_boot(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Until the ESP is there, taking the uevents as they come; the menu
 * reads grub.cfg from it.  Other disks may come later, as on firmware. */
static void wait_for_esp(struct nmbl_ctx *ctx, const char *link, int fd)
{
	long long deadline = now_ms() + ESP_WAIT_SECONDS * 1000LL;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (access(link, F_OK) < 0) {
		long long left = deadline - now_ms();

		if (left <= 0) {
			say("the partition nmbl was started from (%s) did not appear", link);
			return;
		}
		if (poll(&p, 1, (int)left) > 0)
			drain_uevents(ctx, fd);
	}
}

/* Follow the uevents in a child for as long as the menu runs. */
static pid_t follow_uevents(struct nmbl_ctx *ctx, int fd)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, -1) > 0)
			drain_uevents(ctx, fd);
	}
}

static void mount_firmware_fs(struct nmbl_ctx *ctx)
{
	struct stat st;

	/* The menu needs the firmware's variables (grubenv is not enough for
	 * fwsetup and the Secure Boot state), libnmbl the lockdown state. */
	if (stat("/sys/firmware/efi", &st) == 0) {
		(void)nmbl_load_module(ctx, "fs-efivarfs");
		if (mount("efivarfs", EFIVARS, "efivarfs",
			  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 && errno != EBUSY)
			say("cannot mount efivarfs: %m");
	}
	if (mount("securityfs", "/sys/kernel/security", "securityfs",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 && errno != EBUSY)
		say("cannot mount securityfs: %m");
}

static void restrict_sysrq(void)
{
	int fd = open("/proc/sys/kernel/sysrq", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, SYSRQ_MASK, strlen(SYSRQ_MASK)) < 0)
		say("cannot restrict the SysRq keys: %m");
	if (fd >= 0)
		close(fd);
}

/* The value of KEY on the command line /proc/cmdline shows, or (AS_WRITTEN)
 * the parameter as written there, malloc'ed; NULL when absent or
 * unreadable. */
static char *kernel_param(struct nmbl_ctx *ctx, const char *key, bool as_written)
{
	_cleanup_free_ char *cmdline = NULL;
	char *value;
	int r;

	if (nmbl_get_kernel_cmdline(ctx, &cmdline) < 0)
		return NULL;
	r = as_written ? nmbl_cmdline_get_param(cmdline, key, &value)
		       : nmbl_cmdline_get_value(cmdline, key, &value);
	return r < 0 ? NULL : value;
}

/* nmbl.shell or nmbl.shell=1, exactly as written, on nmbl's own command
 * line: what a debug build's UKI carries.  Anything else ("nmbl.shell=",
 * a quoted form) opens no shell.  Read once, at the start: a direct boot
 * binds the entry's line over /proc/cmdline, which must never grant it. */
static bool shell_allowed(struct nmbl_ctx *ctx)
{
	_cleanup_free_ char *param = kernel_param(ctx, "nmbl.shell", true);

	return param && (strcmp(param, "nmbl.shell") == 0 || strcmp(param, "nmbl.shell=1") == 0);
}

/* NAME=SECONDS on nmbl's command line, DEFAULT_S when it is not there or
 * no number (which is said); *RET_EXPLICIT whether it is there. */
static unsigned seconds_param(struct nmbl_ctx *ctx, const char *name, unsigned default_s,
			      bool *ret_explicit)
{
	_cleanup_free_ char *value = kernel_param(ctx, name, false);
	unsigned long seconds;
	char *end;

	*ret_explicit = value != NULL;
	if (!value)
		return default_s;
	errno = 0;
	seconds = strtoul(value, &end, 10);
	if (errno || end == value || *end || value[0] == '-' || seconds > INT_MAX) {
		say("%s=%s is no number of seconds: %u it is", name, value, default_s);
		return default_s;
	}
	return (unsigned)seconds;
}

/* Against a hang from here until the menu is up: every program started
 * from now on gets the watchdog's descriptor, named in NMBL_WATCHDOG_FD,
 * and the menu disarms it.  No watchdog is no error. */
static void arm_watchdog(struct nmbl_ctx *ctx)
{
	_cleanup_free_ char *identity = NULL;
	bool explicit;
	unsigned seconds = seconds_param(ctx, "nmbl.watchdog", WATCHDOG_DEFAULT_S, &explicit);
	char fd_text[16];
	int fd, r;

	if (!seconds)
		return;
	r = nmbl_watchdog_arm(ctx, seconds, &fd, &identity);
	if (r == -ENOENT) {
		if (explicit)
			say("nmbl.watchdog=%u, but this machine has no watchdog", seconds);
		return;
	}
	if (r == -EBUSY) {
		say("the watchdog is not used: once started, it could not be stopped (nowayout)");
		return;
	}
	if (r < 0) {
		say("the watchdog is not used: cannot set a timeout of %u s: %s", seconds,
		    strerror(-r));
		return;
	}
	snprintf(fd_text, sizeof(fd_text), "%d", fd);
	if (fcntl(fd, F_SETFD, 0) < 0 || setenv(NMBL_WATCHDOG_FD, fd_text, 1) < 0)
		say("the menu cannot stop the watchdog (%m): it resets the machine in %u s",
		    seconds);
	else
		say("watchdog armed (%s): the machine resets in %u s unless the menu comes up",
		    *identity ? identity : "unnamed", seconds);
}

static void disarm_watchdog(void)
{
	int r = nmbl_watchdog_disarm();

	if (r < 0)
		say("the watchdog cannot be stopped (%s): it will reset the machine",
		    strerror(-r));
}

/* Run ARGV and wait for it, reaping whatever else ends meanwhile (process 1
 * adopts orphans), its standard output on OUT_FD when that is not -1,
 * contained by CONTAIN when that is not NULL, and ended after SECONDS
 * when that is not 0 (-ETIMEDOUT).  Its exit status, 128 + signal, or
 * -errno. */
static int spawn_until(char *const argv[], int out_fd, int err_fd, int (*contain)(void),
		       unsigned seconds)
{
	pid_t pid = fork();
	bool ended = false;
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int r = contain ? contain() : 0;

		if (r < 0) {
			fprintf(stderr, "nmbl-init: cannot contain %s: %s\n", argv[0], strerror(-r));
			_exit(127);
		}
		if (out_fd >= 0)
			(void)dup2(out_fd, STDOUT_FILENO);
		if (err_fd >= 0)
			(void)dup2(err_fd, STDERR_FILENO);
		(void)signal(SIGCHLD, SIG_DFL);
		execv(argv[0], argv);
		fprintf(stderr, "nmbl-init: cannot run %s: %m\n", argv[0]);
		_exit(127);
	}
	/* Its end, or its deadline (a kernel without pidfds: no deadline). */
	if (seconds) {
		long long deadline = now_ms() + seconds * 1000LL;
		struct pollfd p = { .fd = (int)syscall(SYS_pidfd_open, pid, 0), .events = POLLIN };

		while (p.fd >= 0) {
			long long left = deadline - now_ms();
			int n = left > 0 ? poll(&p, 1, (int)left) : 0;

			if (n == 0) {
				(void)kill(pid, SIGKILL);
				ended = true;
			}
			if (n >= 0 || errno != EINTR)
				break;
		}
		if (p.fd >= 0)
			close(p.fd);
	}
	for (;;) {
		pid_t w = wait(&status);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == pid)
			break;
	}
	if (ended)
		return -ETIMEDOUT;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int spawn(char *const argv[], int out_fd, int err_fd, int (*contain)(void))
{
	return spawn_until(argv, out_fd, err_fd, contain, 0);
}

static int run(char *const argv[], int out_fd)
{
	return spawn(argv, out_fd, -1, NULL);
}

/* A distribution's tool that reads what the disks hold, as a disk that
 * took it over would have it: contained (nmbl_contain_tool()). */
static int run_tool(char *const argv[], int out_fd)
{
	return spawn(argv, out_fd, -1, nmbl_contain_tool);
}

/* The card BOOT names, once its driver has made it (uevents on FD),
 * malloc'ed; NULL after ESP_WAIT_SECONDS. */
static char *wait_for_card(struct nmbl_ctx *ctx, int fd, const struct nmbl_network_boot *boot)
{
	long long deadline = now_ms() + ESP_WAIT_SECONDS * 1000LL;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char *ifname = NULL;

	while (nmbl_find_network_interface(ctx, boot->mac, &ifname) < 0) {
		long long left = deadline - now_ms();

		if (left <= 0 || fd < 0)
			return NULL;
		if (poll(&p, 1, (int)left) > 0)
			drain_uevents(ctx, fd);
	}
	return ifname;
}

/* IFNAME up (its driver starts it; the link comes by itself). */
static int card_up(const char *ifname)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r = 0;

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)) {
		r = -errno;
		say("cannot bring %s up: %s", ifname, strerror(-r));
	}
	close(fd);
	return r;
}

static bool has_link(const char *ifname)
{
	char path[128], carrier[4] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/carrier", ifname);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(carrier, sizeof(carrier), f))
		carrier[0] = '\0';
	fclose(f);
	return carrier[0] == '1';
}

/* What is left to try when a card failed: the machine's other cards, or
 * nothing. */
static const char *then_what(bool others)
{
	return others ? ": trying the other cards" : ": the menu starts without network";
}

/* IFNAME up, and its link: -ENOLINK after LINK_SECONDS without one (no
 * cable, a switch port that is down), with a sentence. */
static int link_up(const char *ifname, bool others)
{
	long long deadline = now_ms() + LINK_SECONDS * 1000LL;
	int r = card_up(ifname);

	if (r < 0)
		return r;
	while (!has_link(ifname)) {
		if (now_ms() > deadline) {
			say("no link on %s within %d s (no cable, or the switch's port is down)%s",
			    ifname, LINK_SECONDS, then_what(others));
			return -ENOLINK;
		}
		usleep(50 * 1000);
	}
	return 0;
}

/* Where dhcpcd keeps its lease and its run-time files (its pid file, its
 * control socket): its user's (nmbl_contain_dhcp()). */
static int dhcp_dirs(void)
{
	static const char *const dirs[] = { DHCPCD_LEASES, DHCPCD_RUN };

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		if (mkdir(dirs[i], 0750) < 0 && errno != EEXIST)
			return -errno;
		if (chown(dirs[i], NMBL_NET_UID, NMBL_NET_GID) < 0 || chmod(dirs[i], 0750) < 0)
			return -errno;
	}
	return 0;
}

/* DHCP on IFNAME (dhcpcd, over IPv4), at most SECONDS: 0 when it
 * answered (dhcpcd keeps the answer); otherwise what dhcpcd said, and a
 * sentence.  dhcpcd, which parses what the network sends, runs contained
 * (nmbl_contain_dhcp()); in the foreground its own --timeout does not
 * apply, so it is ended after SECONDS. */
static int ask_dhcp(const char *ifname, unsigned seconds, bool others)
{
	char *argv[] = { DHCPCD, "--config", DHCPCD_CONF, "--oneshot", "--nobackground",
			 "--quiet", "--nolink", "--vendorclassid=" PXE_VENDOR_CLASS, "-4",
			 "--waitip=4", (char *)ifname, NULL };
	FILE *said;
	int r;

	r = dhcp_dirs();
	if (r < 0) {
		say("cannot make dhcpcd's directories: %s", strerror(-r));
		return r;
	}
	/* What dhcpcd says is said when it failed (its complaints of what
	 * the image lacks on purpose otherwise). */
	r = memfd_create("dhcpcd-said", MFD_CLOEXEC);
	said = r >= 0 ? fdopen(r, "w+") : NULL;
	if (!said && r >= 0)
		close(r);
	r = spawn_until(argv, -1, said ? fileno(said) : -1, nmbl_contain_dhcp, seconds);
	if (r == -ETIMEDOUT) {
		say("no DHCP answer on %s within %u s%s", ifname, seconds, then_what(others));
	} else if (r != 0) {
		char line[256];

		if (said) {
			rewind(said);
			for (int n = 0; n < 8 && fgets(line, sizeof(line), said); n++)
				say("dhcpcd: %s", strtok(line, "\n") ? line : "");
		}
		say("no DHCP answer on %s (dhcpcd %s %d)%s", ifname, r < 0 ? "error" : "status", r,
		    then_what(others));
	}
	if (said)
		fclose(said);
	return r;
}

/* The other cards (CARDS[FIRST..N-1]) up, then DHCP on those with a link,
 * in turn, until one answers: its index, or N. */
static size_t try_other_cards(const struct nmbl_network_card *cards, size_t first, size_t n,
			      unsigned seconds)
{
	long long deadline = now_ms() + LINK_SECONDS * 1000LL;
	bool all;

	for (size_t i = first; i < n; i++)
		(void)card_up(cards[i].ifname);
	do {
		all = true;
		for (size_t i = first; i < n; i++)
			all = all && has_link(cards[i].ifname);
		if (!all)
			usleep(50 * 1000);
	} while (!all && now_ms() < deadline);
	for (size_t i = first; i < n; i++) {
		if (!has_link(cards[i].ifname)) {
			say("no link on %s either", cards[i].ifname);
			continue;
		}
		if (ask_dhcp(cards[i].ifname, seconds, i + 1 < n) == 0)
			return i;
	}
	return n;
}

/* The menu's list of cards, CARDS[0..N-1] (the one the firmware booted
 * from first, when BOOT_FIRST: efinet0, with its VLAN and URL), and
 * what DHCP gave CARDS[ANSWERED] (none when ANSWERED is N), in a file the
 * menu reads.  0, or -errno. */
static int write_cards(const struct nmbl_network_card *cards, size_t n, size_t answered,
		       const struct nmbl_network_boot *boot, bool boot_first)
{
	char lease[128], ack[128] = "-";
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	FILE *in, *out;
	int r = 0;

	(void)mkdir(RUN_DIR, 0755);
	if (mkdir(NET_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (answered < n) {
		snprintf(lease, sizeof(lease), DHCPCD_LEASES "/%s.lease", cards[answered].ifname);
		snprintf(ack, sizeof(ack), NET_DIR "/%s.dhcp", cards[answered].ifname);
		in = fopen(lease, "re");
		if (!in)
			return -errno;
		data = malloc(4096);
		len = data ? fread(data, 1, 4096, in) : 0;
		fclose(in);
		out = len ? fopen(ack, "we") : NULL;
		if (!out || fwrite(data, 1, len, out) != len)
			r = -EIO;
		if (out && fclose(out) != 0)
			r = -EIO;
		if (r < 0)
			return r;
	}
	out = fopen(NET_CARDS, "we");
	if (!out)
		return -errno;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *m = cards[i].mac;

		fprintf(out, "%02x:%02x:%02x:%02x:%02x:%02x %s ", m[0], m[1], m[2], m[3], m[4],
			m[5], i == answered ? ack : "-");
		if (i == 0 && boot_first && boot->vlan >= 0)
			fprintf(out, "%d ", boot->vlan);
		else
			fputs("- ", out);
		fprintf(out, "%s\n", i == 0 && boot_first && boot->uri ? boot->uri : "-");
	}
	if (fclose(out) != 0)
		return -EIO;
	return r;
}

/*
 * nmbl was started from the network: the card it came from up, DHCP
 * asked (dhcpcd, which keeps the answer); when that card has no link or
 * no answer, the machine's other cards, in turn; and the menu told of
 * them all.  The menu comes in any case; without a network it finds no
 * grub.cfg there and says so.
 */
static void start_network(struct nmbl_ctx *ctx, int fd, const struct nmbl_network_boot *boot)
{
	_cleanup_free_ struct nmbl_network_card *cards = NULL;
	_cleanup_free_ char *boot_if = NULL;
	size_t n = 0, answered;
	bool boot_first = false, explicit;
	unsigned seconds = seconds_param(ctx, "nmbl.dhcp-timeout", DHCP_SECONDS, &explicit);
	int r;

	if (access(DHCPCD, X_OK) < 0) {
		say("started from the network, but this image has no network (an image for "
		    "network boots has)");
		return;
	}
	if (!seconds)
		seconds = 1;
	/* What the firmware did that nmbl does not do yet: said, and DHCP
	 * asked over IPv4, untagged, all the same. */
	if (boot->ip_version == 6)
		say("the firmware booted over IPv6, which nmbl's network does not do yet: "
		    "asking DHCP over IPv4");
	if (boot->vlan >= 0)
		say("the firmware booted on VLAN %d, which nmbl does not set up yet: asking DHCP "
		    "untagged", boot->vlan);
	boot_if = wait_for_card(ctx, fd, boot);
	if (!boot_if)
		say("started from the network card %02x:%02x:%02x:%02x:%02x:%02x, which Linux "
		    "does not show (no driver for it in this image?)", boot->mac[0], boot->mac[1],
		    boot->mac[2], boot->mac[3], boot->mac[4], boot->mac[5]);
	r = nmbl_list_network_cards(ctx, &cards, &n);
	if (r < 0)
		say("cannot list the network cards: %s", strerror(-r));
	/* The card the firmware booted from first: GRUB's efinet0. */
	for (size_t i = 0; boot_if && i < n && !boot_first; i++) {
		if (strcmp(cards[i].ifname, boot_if) == 0) {
			struct nmbl_network_card card = cards[i];

			memmove(&cards[1], &cards[0], i * sizeof(*cards));
			cards[0] = card;
			boot_first = true;
		}
	}
	answered = n;
	if (boot_first && link_up(boot_if, n > 1) == 0 &&
	    ask_dhcp(boot_if, seconds, n > 1) == 0)
		answered = 0;
	if (answered == n && n > (size_t)boot_first)
		answered = try_other_cards(cards, boot_first, n, seconds);
	if (answered == n) {
		if (n > 1)
			say("no card got a DHCP answer: the menu starts without network");
		return;
	}
	r = write_cards(cards, n, answered, boot, boot_first);
	if (r < 0) {
		say("cannot give the menu what DHCP answered: %s", strerror(-r));
		return;
	}
	setenv(NET_CARDS_ENV, NET_CARDS, 1);
	network_up = true;
	say("network: %s is up (DHCP), at %.3f s", cards[answered].ifname, since_boot());
}

/* What nmbl status says, each line as "nmbl: LINE". */
static void print_status(void)
{
	char *argv[] = { "/usr/bin/nmbl", "status", NULL };
	char line[512];
	int fds[2];
	FILE *f;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	f = fdopen(fds[0], "re");
	if (!f) {
		close(fds[0]);
		close(fds[1]);
		return;
	}
	/* The pipe holds far more than the status's few lines. */
	(void)run(argv, fds[1]);
	close(fds[1]);
	while (fgets(line, sizeof(line), f))
		printf("nmbl: %s", line);
	fflush(stdout);
	fclose(f);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static void run_pre_menu(void)
{
	struct dirent **list;
	int n = scandir(PRE_MENU_DIR, &list, NULL, by_name);

	for (int i = 0; i < n; i++) {
		char path[512];
		char *argv[] = { path, NULL };
		int r;

		snprintf(path, sizeof(path), PRE_MENU_DIR "/%s", list[i]->d_name);
		if (list[i]->d_name[0] != '.' && access(path, X_OK) == 0) {
			r = run(argv, -1);
			if (r != 0)
				say("%s failed (%d)", path, r);
		}
		free(list[i]);
	}
	if (n >= 0)
		free(list);
}

/* Unlink everything on the initramfs (rootfs cannot be unmounted, so its
 * memory is freed this way), not crossing into other file systems. */
static void remove_tree(int dfd, dev_t rootdev)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;
		bool dir;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != rootdev)
			continue;
		dir = S_ISDIR(st.st_mode);
		if (dir) {
			int sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0)
				remove_tree(sub, rootdev);
		}
		(void)unlinkat(dfd, de->d_name, dir ? AT_REMOVEDIR : 0);
	}
	closedir(d);
}

/* LVM's tool says, on the console, of every descriptor it inherits
 * (nmbl-init's own, kept on purpose): not of these. */
#define LVM_QUIET_ENV "LVM_SUPPRESS_FD_WARNINGS"

/* LVM's tool ARGV, its exit status or -errno. */
static int run_lvm(char *const argv[], int out_fd)
{
	int r;

	if (setenv(LVM_QUIET_ENV, "1", 1) < 0)
		return -errno;
	r = run_tool(argv, out_fd);
	(void)unsetenv(LVM_QUIET_ENV);
	return r;
}

/* The volume groups LVM finds, as one --config list of their names
 * ("\"a\",\"b\""); empty when it finds none. */
static int volume_groups(char *buf, size_t size)
{
	char *argv[] = { LVM, "vgs", "--noheadings", "-o", "vg_name", NULL };
	char line[256];
	size_t len = 0;
	int fds[2], r;
	FILE *f;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	f = fdopen(fds[0], "re");
	if (!f) {
		r = -errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	/* A pipe holds a few hundred names. */
	r = run_lvm(argv, fds[1]);
	close(fds[1]);
	buf[0] = '\0';
	while (r == 0 && fgets(line, sizeof(line), f)) {
		char *name = line + strspn(line, " \t");

		name[strcspn(name, " \t\n")] = '\0';
		/* LVM's own rule for names: nothing to quote. */
		if (!*name || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
					   "0123456789+_.-") != strlen(name))
			continue;
		if (len + strlen(name) + 4 >= size) {
			r = -E2BIG;
			break;
		}
		len += (size_t)snprintf(buf + len, size - len, "%s\"%s\"", len ? "," : "", name);
	}
	fclose(f);
	return r;
}

/*
 * What GRUB reads by assembling it itself — a /boot on an md RAID or in
 * an LVM volume — nmbl reads through the kernel: assemble the arrays and
 * activate the volumes the disks hold, read-only, as nothing else in
 * nmbl's initramfs would.  Only when a disk holds their members (libblkid
 * finds their superblocks): other machines run neither tool.  Arrays
 * first: a volume group may be on one.  A failure is said and leaves the
 * menu without those volumes, as GRUB without its modules.
 */
static void set_up_volumes(struct nmbl_ctx *ctx)
{
	unsigned kinds = 0;
	int r = nmbl_find_volume_members(ctx, &kinds);

	if (r < 0) {
		say("cannot look for RAID and LVM members: %s", strerror(-r));
		return;
	}
	/* An image a machine without mdadm built for itself has none. */
	if ((kinds & NMBL_VOLUMES_MD) && access(MDADM, X_OK) == 0) {
		char *argv[] = { MDADM, "--assemble", "--scan", "--readonly", "--run", NULL };

		/* The kernel would ask modprobe, which nmbl's initramfs has not.
		 * RAID 1 only: /boot is on no other level. */
		r = nmbl_load_module(ctx, "raid1");
		if (r < 0)
			say("cannot load md RAID 1's modules: %s", strerror(-r));
		/* mdadm fails when every array is already running (a menu
		 * started again): what runs is what counts. */
		(void)run_tool(argv, -1);
		r = nmbl_find_volume_members(ctx, &kinds);
		if (r < 0)
			kinds = 0;
	}
	/* Only an image built for it has LVM's tool (nmbl-init(8)). */
	if ((kinds & NMBL_VOLUMES_LVM) && access(LVM, X_OK) == 0) {
		char vgs[1024], config[sizeof(vgs) + 64];
		char *argv[] = { LVM, "vgchange", "--activate", "y", "--config", config, NULL };

		r = nmbl_load_module(ctx, "dm_mod");
		if (r < 0)
			say("cannot load device-mapper: %s", strerror(-r));
		r = volume_groups(vgs, sizeof(vgs));
		if (r != 0 || !vgs[0]) {
			if (r != 0)
				say("cannot list LVM's volume groups (%s %d)", r < 0 ? "error" : "status",
				    r);
			return;
		}
		/* Every volume read-only, whatever its metadata says. */
		snprintf(config, sizeof(config), "activation/read_only_volume_list=[%s]", vgs);
		r = run_lvm(argv, -1);
		if (r != 0)
			say("cannot activate LVM's volumes for the menu (%s %d)",
			    r < 0 ? "error" : "status", r);
	}
}

/*
 * Before a hand-over of any kind, the volumes go, as the firmware would
 * have left the disks: the entry's initrd or system assembles and
 * activates them itself, under its own names and rules.  What the tools
 * kept in /run goes too.
 */
static void stop_volumes(void)
{
	char *lvm_argv[] = { LVM, "vgchange", "--activate", "n", NULL };
	char *md_argv[] = { MDADM, "--stop", "--scan", NULL };
	struct stat st;
	int r;

	if (stat("/dev/mapper/control", &st) == 0 && access(LVM, X_OK) == 0) {
		r = run_lvm(lvm_argv, -1);
		if (r != 0)
			say("cannot deactivate LVM's volumes (%s %d)", r < 0 ? "error" : "status", r);
	}
	if (access("/proc/mdstat", F_OK) == 0 && access(MDADM, X_OK) == 0) {
		r = run_tool(md_argv, -1);
		if (r != 0)
			say("cannot stop the md arrays (%s %d)", r < 0 ? "error" : "status", r);
	}
	for (size_t i = 0; i < ELEMENTSOF(volume_run_dirs); i++) {
		int fd = open(volume_run_dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0)
			continue;
		if (fstat(fd, &st) == 0)
			remove_tree(fd, st.st_dev);
		else
			close(fd);
		(void)rmdir(volume_run_dirs[i]);
	}
}

/* grub-emu reaches the disks through a device map, the way GRUB's EFI image
 * reaches them through the firmware: every disk Linux sees is (hdN), in
 * the kernel's order; the md arrays and LVM volumes nmbl set up are there
 * under GRUB's names for them, not as disks.  Returns the number of DISK
 * ("/dev/vda") in it, -1 when it has none such, or -errno. */
static int write_device_map(struct nmbl_ctx *ctx, const char *disk)
{
	static const char *const skip[] = { "loop", "ram", "zram", "sr", "fd", "nbd", "dm-",
					    "md" };
	struct dirent **list;
	FILE *f;
	int n, hd = 0, found = -1;

	/* The menu reads the map; libnmbl may have made the directory first
	 * (its mounts are below it, and stay closed to the menu). */
	if ((mkdir(RUN_DIR, 0755) < 0 && errno != EEXIST) || chmod(RUN_DIR, 0755) < 0)
		return -errno;
	f = fopen(DEVICE_MAP, "we");
	if (!f)
		return -errno;
	n = scandir("/sys/block", &list, NULL, versionsort);
	for (int i = 0; i < n; i++) {
		const char *name = list[i]->d_name;
		char dev[sizeof("/dev/") + sizeof(list[i]->d_name)];
		bool ok = name[0] != '.';
		struct stat st;

		for (size_t s = 0; ok && s < ELEMENTSOF(skip); s++)
			ok = strncmp(name, skip[s], strlen(skip[s])) != 0;
		snprintf(dev, sizeof(dev), "/dev/%s", name);
		if (ok && stat(dev, &st) == 0 && S_ISBLK(st.st_mode)) {
			if (disk && strcmp(dev, disk) == 0)
				found = hd;
			fprintf(f, "(hd%d) %s\n", hd++, dev);
		}
		free(list[i]);
	}
	if (n >= 0)
		free(list);
	/* Then the arrays and volumes, under GRUB's names for them. */
	n = nmbl_write_volume_map(ctx, f);
	if (n < 0)
		say("cannot name the RAID arrays and LVM volumes for the menu: %s", strerror(-n));
	return fclose(f) < 0 ? -errno : found;
}

/* Where the distributions' GRUB starts on EFI: its own directory on the
 * ESP, holding the stub grub.cfg that grub-install or the package wrote. */
static const char *const esp_grub_dirs[] = {
	"/EFI/fedora", "/EFI/redhat", "/EFI/centos", "/EFI/rocky", "/EFI/almalinux",
	"/EFI/debian", "/EFI/ubuntu", "/EFI/opensuse",
};

/* Whether the menu is to lock GRUB down, as GRUB's EFI image does under
 * Secure Boot.  Fails closed: GRUB stays unlocked only when the machine did
 * not boot with EFI (Linux has no /sys/firmware/efi) or its firmware says
 * that Secure Boot is off.  Firmware without Secure Boot says so by having
 * no SecureBoot variable (libnmbl's -ENOENT), but only where its variables
 * can be read at all: efivarfs mounted. */
static bool menu_locked_down(struct nmbl_ctx *ctx)
{
	struct statfs fs;
	int r = nmbl_get_secure_boot(ctx);

	if (r != -ENOENT)
		return r != 0;
	if (access("/sys/firmware/efi", F_OK) != 0)
		return false;
	return statfs(EFIVARS, &fs) != 0 || fs.f_type != EFIVARFS_MAGIC;
}

/* In the menu's process, before it becomes the menu: the broker's socket
 * its own, the watchdog's descriptor not (the broker stops it). */
static void menu_child_fds(int sock)
{
	const char *wd = getenv(NMBL_WATCHDOG_FD);
	char text[16];

	if (wd) {
		close(atoi(wd));
		unsetenv(NMBL_WATCHDOG_FD);
	}
	snprintf(text, sizeof(text), "%d", sock);
	if (fcntl(sock, F_SETFD, 0) < 0 || setenv(NMBL_BROKER_FD_ENV, text, 1) < 0)
		_exit(127);
}

/*
 * ARGV started as the first process of new PID, IPC and network
 * namespaces (the menu has no network: what it reads from one, the broker
 * fetches for it, network_up): when it
 * ends, the kernel kills every other process in the namespace, and its
 * parent sees it end only once they all have.  *RET_PIDFD a descriptor
 * that polls readable then (-1 where the kernel has none).  In the child,
 * returns only on failure.
 */
static pid_t start_menu(char *const argv[], int sock, int *ret_pidfd)
{
	/* clone(2) as fork(2) does it, but for the namespaces: the child
	 * only sets up its descriptors and executes the menu, so the C
	 * library's notion of its thread needs no care. */
	pid_t pid = (pid_t)syscall(SYS_clone,
				   (unsigned long)(CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | SIGCHLD),
				   NULL, NULL, NULL, NULL);

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		menu_child_fds(sock);
		(void)signal(SIGCHLD, SIG_DFL);
		execv(argv[0], argv);
		fprintf(stderr, "nmbl-init: cannot run %s: %m\n", argv[0]);
		_exit(127);
	}
	*ret_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	return pid;
}

/* Answer the broker's requests until the menu's first process has ended,
 * and with it the whole menu, or every process of the menu has closed its
 * side: 0, or -errno when the socket fails. */
static int serve_menu(struct nmbl_broker *broker, int sock, int pidfd)
{
	struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };

	for (;;) {
		int r;

		if (poll(p, pidfd >= 0 ? 2 : 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pidfd >= 0 && p[1].revents)
			return 0;
		if (!p[0].revents)
			continue;
		r = nmbl_broker_serve(broker);
		if (r <= 0)
			return r;
	}
}

/* Run the contained menu ARGV, answering its requests until it ends: its
 * exit status (or 128 + signal, or -errno), and in *RET_BROKER what was
 * prepared when the status says to boot it and the broker agrees, or when
 * the broker asked the firmware to start something at the reboot
 * (NMBL_EXIT_REBOOT then). */
static int run_contained(struct nmbl_ctx *ctx, char *const argv[], struct nmbl_broker **ret_broker)
{
	struct nmbl_broker *broker = NULL;
	enum nmbl_broker_outcome outcome;
	int sv[2], status, r, pidfd = -1;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = start_menu(argv, sv[1], &pidfd);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return pid;
	}
	r = nmbl_broker_new(ctx, sv[0], &broker);
	if (r >= 0 && network_up) {
		struct nmbl_fetch_options net = {
			.max_size = NMBL_FETCH_MAX_DEFAULT,
			.timeout_s = NMBL_FETCH_TIMEOUT_DEFAULT,
			.stall_s = NMBL_FETCH_STALL_DEFAULT,
			.ca_file = CA_FILE,
			.contain = true,
		};

		r = nmbl_broker_set_network(broker, &net);
	}
	if (r >= 0)
		r = serve_menu(broker, sv[0], pidfd);
	if (r < 0)
		say("the boot menu's requests: %s", strerror(-r));
	close(sv[0]);
	if (pidfd >= 0)
		close(pidfd);
	for (;;) {
		pid_t w = wait(&status);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			nmbl_broker_free(broker);
			return -errno;
		}
		if (w == pid)
			break;
	}
	/* From here on, no process of the menu is left. */
	r = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	outcome = nmbl_broker_get_outcome(broker);
	if ((r == NMBL_EXIT_KEXEC && outcome == NMBL_BROKER_KEXEC) ||
	    (r == NMBL_EXIT_SWITCH_ROOT && outcome == NMBL_BROKER_DIRECT)) {
		int k = nmbl_broker_keep(broker);

		if (k < 0)
			say("cannot record the boot entry for the booted system: %s",
			    nmbl_strerror(k));
		*ret_broker = broker;
		return r;
	}
	/* BootNext or OsIndications is set: the firmware starts what was
	 * asked at the next start, which no new menu may ask for again. */
	if (outcome == NMBL_BROKER_REBOOT) {
		if (r != NMBL_EXIT_REBOOT)
			say("the boot menu ended (status %d) after the firmware was asked to start "
			    "a program; rebooting to it", r);
		(void)nmbl_broker_keep(broker);
		*ret_broker = broker;
		return NMBL_EXIT_REBOOT;
	}
	if (r == NMBL_EXIT_KEXEC || r == NMBL_EXIT_SWITCH_ROOT) {
		say("the boot menu ended to boot, but nothing was prepared to boot");
		r = -EPROTO;
	}
	/* Whatever it prepared is undone: the kernel loaded, the mounts. */
	nmbl_broker_free(broker);
	return r;
}

/*
 * The menu starts where GRUB's EFI image would: on the ESP the firmware
 * started nmbl from, in the distribution's directory, whose grub.cfg (the
 * stub) GRUB's normal mode reads first, with $cmdpath naming that
 * directory.  Then what GRUB measures is what nmbl's grub-emu measures.
 * Without such a directory, nmbl's own first configuration looks for a
 * grub.cfg on every file system.  The menu runs contained
 * (nmbl_contain_menu()), and this process is its broker.
 */
static int run_menu(struct nmbl_ctx *ctx, struct nmbl_broker **ret_broker)
{
	char root[64] = "--root=host", dir[64] = "--directory=" MENU_CONFIG_DIR, cmdpath[128];
	char *argv[] = { CONSOLE, "--contained", MENU, "--kexec", "--device-map=" DEVICE_MAP,
			 root, dir, NULL, NULL };
	_cleanup_free_ char *disk = NULL, *part = NULL;
	const char *grub_dir = NULL;
	int r, hd;

	r = nmbl_find_esp_grub_dir(ctx, esp_grub_dirs, ELEMENTSOF(esp_grub_dirs), &disk, &part,
				   &grub_dir);
	if (r < 0 && r != -ENOENT)
		say("cannot look for GRUB's directory on the ESP: %s", strerror(-r));
	set_up_volumes(ctx);
	hd = write_device_map(ctx, disk);
	if (hd < -1)
		say("cannot write %s: %s", DEVICE_MAP, strerror(-hd));
	if (r == 0 && hd >= 0) {
		snprintf(root, sizeof(root), "--root=hd%d,%s", hd, part);
		snprintf(dir, sizeof(dir), "--directory=%s", grub_dir);
		snprintf(cmdpath, sizeof(cmdpath), "(hd%d,%s)%s", hd, part, grub_dir);
		setenv(CMDPATH_ENV, cmdpath, 1);
	} else {
		unsetenv(CMDPATH_ENV);
	}
	if (menu_locked_down(ctx))
		argv[ELEMENTSOF(argv) - 2] = "--lockdown";
	share_disks_with_menu();
	return run_contained(ctx, argv, ret_broker);
}

/* Only a debug build's signed command line has a shell offered
 * (ALLOWED, as it said at the start). */
static void debug_shell(bool allowed)
{
	char *argv[] = { SHELL, NULL };

	if (!allowed || access(SHELL, X_OK) < 0)
		return;
	disarm_watchdog();
	say("nmbl.shell: a shell on the console; leave it to get the menu back");
	(void)run(argv, -1);
}

/*
 * Returns only on failure.  The target's root is on NMBL_SYSROOT: the
 * kernel's file systems move there, with what nmbl mounted on them (the
 * entry's line on /proc/cmdline).  An entry's initrd there mounts its own,
 * as on the kernel's rootfs: nmbl's go instead (/proc too: the initrd's
 * tree may have its own proc mounted, with the line on it).
 */
static void switch_root(struct nmbl_ctx *ctx)
{
	static const char *const moves[] = { "/dev", "/proc", "/sys", "/run" };
	bool initrd = false;
	const char *init = nmbl_switch_root_init(ctx, &initrd);
	struct stat root;
	int fd;

	if (!init || stat("/", &root) < 0)
		return;
	/* Nothing of nmbl goes along into the target's /run. */
	fd = open(RUN_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		struct stat run;

		if (fstat(fd, &run) == 0) {
			remove_tree(fd, run.st_dev);
			(void)rmdir(RUN_DIR);
		} else {
			close(fd);
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(moves); i++) {
		char to[64];

		snprintf(to, sizeof(to), NMBL_SYSROOT "%s", moves[i]);
		if (!initrd && mount(moves[i], to, NULL, MS_MOVE, NULL) == 0)
			continue;
		if (!initrd)
			say("cannot move %s to %s: %m", moves[i], to);
		(void)umount2(moves[i], MNT_DETACH);
	}
	if (chdir(NMBL_SYSROOT) < 0)
		return;
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		remove_tree(fd, root.st_dev);
	if (mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 || chdir("/") < 0) {
		say("cannot switch root to " NMBL_SYSROOT ": %m");
		return;
	}
	/* The environment the kernel gave, without what nmbl set for the
	 * menu. */
	(void)unsetenv(CMDPATH_ENV);
	(void)unsetenv(NET_CARDS_ENV);
	execl(init, init, (char *)NULL);
	say("cannot start %s: %m", init);
}

int main(int argc, char **argv)
{
	struct nmbl_ctx *ctx = NULL;
	struct nmbl_network_boot *net = NULL;
	char *link;
	double modules_at, esp_at;
	pid_t follower;
	bool shell;
	int fd, r;

	(void)argc;
	(void)argv;
	if (getpid() != 1) {
		fputs("nmbl-init: only the initramfs's process 1 runs this\n", stderr);
		return 2;
	}
	mount_api();
	open_console();
	restrict_sysrq();
	r = nmbl_new("/", &ctx);
	if (r < 0) {
		say("cannot start: %s", strerror(-r));
		for (;;)
			pause();
	}
	shell = shell_allowed(ctx);

	fd = open_uevents();
	if (fd < 0)
		say("no device events (%s): devices added later get no driver", strerror(-fd));
	link_present_disks(ctx);
	r = nmbl_coldplug(ctx);
	if (r < 0)
		say("loading the modules of the devices present: %s", strerror(-r));
	modules_at = since_boot();
	/* As soon as its driver is there. */
	arm_watchdog(ctx);
	mount_firmware_fs(ctx);
	/* Started from a disk's partition, or else perhaps from the network,
	 * where there is no ESP to wait for. */
	link = esp_link(ctx);
	if (!link && nmbl_get_network_boot(ctx, &net) < 0)
		net = NULL;
	if (fd >= 0 && link) {
		wait_for_esp(ctx, link, fd);
		/* What came while the ESP's disk was found: keyboards, more disks. */
		drain_uevents(ctx, fd);
	}
	free(link);
	if (net)
		start_network(ctx, fd, net);
	net = nmbl_network_boot_free(net);
	follower = fd >= 0 ? follow_uevents(ctx, fd) : -1;
	esp_at = since_boot();

	/* Where the time went (the benchmark reads it). */
	say("startup: modules loaded at %.3f s, %s at %.3f s", modules_at,
	    network_up ? "the network" : "the ESP's disk", esp_at);
	print_status();
	run_pre_menu();
	/* nmbl is the boot loader: it measures what it boots. */
	nmbl_set_measure(ctx, true);
	for (int fast_fails = 0;;) {
		long long started = now_ms();
		struct nmbl_broker *broker = NULL;

		r = run_menu(ctx, &broker);
		if (broker) {
			if (follower > 0) {
				kill(follower, SIGKILL);
				(void)waitpid(follower, NULL, 0);
				follower = -1;
			}
			nmbl_broker_free(broker);
		}
		/* The kernel to kexec is in the kernel's memory by now: the
		 * mounts that held its files go first, or the volumes under
		 * them could not. */
		if (r == NMBL_EXIT_KEXEC)
			(void)nmbl_umount_all(ctx);
		if (r == NMBL_EXIT_KEXEC || r == NMBL_EXIT_SWITCH_ROOT)
			stop_volumes();
		if (r == NMBL_EXIT_KEXEC) {
			r = nmbl_exec(ctx);
			say("cannot start the kernel: %s; the boot menu comes back",
			    nmbl_strerror(r));
			(void)nmbl_unload(ctx);
			(void)nmbl_umount_all(ctx);
			follower = fd >= 0 ? follow_uevents(ctx, fd) : -1;
			continue;
		} else if (r == NMBL_EXIT_SWITCH_ROOT) {
			/* The target inherits neither the watchdog nor its
			 * descriptor. */
			disarm_watchdog();
			switch_root(ctx);
			say("switching root failed; rebooting");
			debug_shell(shell);
			sync();
			(void)reboot(RB_AUTOBOOT);
		} else if (r == NMBL_EXIT_REBOOT) {
			say("the boot menu ended; rebooting");
			sync();
			(void)reboot(RB_AUTOBOOT);
		}
		if (r > 128 && r < 128 + NSIG)
			say("the boot menu was ended by signal %d (%s); it comes back",
			    r - 128, strsignal(r - 128));
		else
			say("the boot menu failed (%s %d); it comes back",
			    r < 0 ? "error" : "status", r);
		/* The follower may have been killed too (by the OOM killer, say):
		 * devices added from now on still get their drivers. */
		if (follower <= 0 || waitpid(follower, NULL, WNOHANG) == follower ||
		    (kill(follower, 0) < 0 && errno == ESRCH))
			follower = fd >= 0 ? follow_uevents(ctx, fd) : -1;
		debug_shell(shell);
		fast_fails = now_ms() - started < MENU_FAST_FAIL_MS ? fast_fails + 1 : 0;
		if (fast_fails >= MENU_FAST_FAILS) {
			say("the boot menu keeps failing; trying again in %d seconds",
			    MENU_RETRY_WAIT_S);
			sleep(MENU_RETRY_WAIT_S);
			fast_fails = 0;
		}
	}
}
