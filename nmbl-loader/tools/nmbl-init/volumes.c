/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-init: md arrays and LVM volumes, for a /boot on them.
 */
#include "init.h"

/* The distribution's own tools, which assemble arrays and activate
 * volumes for the menu (volumes.c in libnmbl says why), with nmbl's own
 * configuration in the initramfs: read-only, no udev. */
#define MDADM "/usr/sbin/mdadm"
#define LVM "/usr/sbin/lvm"
/* What they leave in /run, which must not go along into the target. */
static const char *const volume_run_dirs[] = { "/run/mdadm", "/run/lvm", "/run/lock/lvm" };
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
void set_up_volumes(struct nmbl_ctx *ctx)
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
void stop_volumes(void)
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
