/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: The contained menu and its broker.
 */
#include "init.h"
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/statfs.h>

#define MENU "/usr/libexec/nmbl/grub-emu"
#define CONSOLE "/usr/libexec/nmbl/nmbl-console"
#define MENU_CONFIG_DIR "/usr/share/nmbl/grub"
#define DEVICE_MAP RUN_DIR "/device.map"
#define CA_FILE "/usr/share/nmbl/ca-certificates.crt"

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

/*
 * ARGV started by nmbl_spawn(): the first process of new PID, IPC and
 * network namespaces (the menu has no network: what it reads from one,
 * the broker fetches for it); when it ends, the kernel kills every other
 * process in the namespace, and its parent sees it end only once they all
 * have.  It gets the console, and the broker's socket SOCK as descriptor
 * 3, which NMBL_BROKER_FD_ENV names; not the watchdog (the broker stops
 * it).  *RET_PIDFD a descriptor that polls readable once it all ended (-1
 * where the kernel has none).
 */
static pid_t start_menu(char *const argv[], int sock, int *ret_pidfd)
{
	struct nmbl_spawn_options o = {
		.fd = { STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO },
		.pass_fd = sock,
		.env = NMBL_BROKER_FD_ENV "=3",
	};

	return nmbl_spawn(argv, &o, ret_pidfd);
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
static int run_contained(struct nmbl_ctx *ctx, char *const argv[], bool network,
			 struct nmbl_broker **ret_broker)
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
	if (r >= 0 && network) {
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
int run_menu(struct nmbl_ctx *ctx, bool network, struct nmbl_broker **ret_broker)
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
	return run_contained(ctx, argv, network, ret_broker);
}
