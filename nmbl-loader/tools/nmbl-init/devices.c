/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: The kernel's file systems, the console, and the devices: their drivers
 * (uevents, as udev would), their /dev/disk links, the disks shared with the
 * menu, the ESP the firmware started nmbl from.
 */
#include "init.h"
#include <linux/magic.h>
#include <linux/netlink.h>
#include <sys/mount.h>
#include <sys/socket.h>

/* SysRq's log level (2), sync (16), remount read-only (32) and reboot
 * (128): not keyboard control (4: SAK kills the console's processes),
 * dumps (8), signals to processes (64) or renicing (256). */
#define SYSRQ_MASK "178"

void mount_api(void)
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
void open_console(void)
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

void restrict_sysrq(void)
{
	int fd = open("/proc/sys/kernel/sysrq", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, SYSRQ_MASK, strlen(SYSRQ_MASK)) < 0)
		say("cannot restrict the SysRq keys: %m");
	if (fd >= 0)
		close(fd);
}

/* The kernel's uevents, as udev receives them. */
int open_uevents(void)
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

void link_present_disks(struct nmbl_ctx *ctx)
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
void share_disks_with_menu(void)
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
void drain_uevents(struct nmbl_ctx *ctx, int fd)
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
char *esp_link(struct nmbl_ctx *ctx)
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

/* Until the ESP is there, taking the uevents as they come; the menu
 * reads grub.cfg from it.  Other disks may come later, as on firmware. */
void wait_for_esp(struct nmbl_ctx *ctx, const char *link, int fd)
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
pid_t follow_uevents(struct nmbl_ctx *ctx, int fd)
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

void mount_firmware_fs(struct nmbl_ctx *ctx)
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
