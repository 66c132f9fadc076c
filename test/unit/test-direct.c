/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

/* The corpus kernel says "6.1.0-test (nmbl) #1 SMP", its UKI too. */
#define PROC_VERSION "Linux version 6.1.0-test (nmbl) (gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP\n"
#define RUNNING "BOOT_IMAGE=/vmlinuz root=UUID=7a46e7a1 ro console=tty0 console=ttyS0,115200 quiet nmbl.boot=direct\n"
#define KERNEL CORPUS "/kernel.efi"

static struct nmbl_ctx *ctx;
static unsigned char ext4_sb[2048];

static void link_dev(const char *link, const char *target)
{
	fixture_text("/dev/.keep", "");
	mkdir(fixture_path("/dev/disk"), 0755);
	{
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s", fixture_path(link));
		*strrchr(dir, '/') = '\0';
		mkdir(dir, 0755);
	}
	unlink(fixture_path(link));
	CHECK_INT(symlink(target, fixture_path(link)), 0);
}

/* A machine running the corpus kernel from an ext4 root on /dev/vda3,
 * known to udev by UUID, label, partition UUID and label. */
static void machine(void)
{
	ext4_sb[1080] = 0x53;
	ext4_sb[1081] = 0xef;
	fixture_text("/proc/version", PROC_VERSION);
	fixture_text("/proc/cmdline", RUNNING);
	fixture_text("/proc/sys/kernel/printk", "4\t4\t1\t7\n");
	fixture_text("/sys/class/block/vda3/partition", "3\n");
	fixture_write("/dev/vda3", ext4_sb, sizeof(ext4_sb));
	link_dev("/dev/disk/by-uuid/7a46e7a1", "../../vda3");
	link_dev("/dev/disk/by-label/my\\x20root", "../../vda3");
	link_dev("/dev/disk/by-partuuid/e5b0e5b0-0003", "../../vda3");
	link_dev("/dev/disk/by-partlabel/root", "../../vda3");
	fixture_text("/sysroot/sbin/.keep", "");
	fixture_text("/sysroot/lib/systemd/systemd", "#!\n");
	chmod(fixture_path("/sysroot/lib/systemd/systemd"), 0755);
	unlink(fixture_path("/sysroot/sbin/init"));
	CHECK_INT(symlink("/lib/systemd/systemd", fixture_path("/sysroot/sbin/init")), 0);
	remove(fixture_path("/proc/1/comm"));
	fake.kexec_errno = 0;
	CHECK_INT(nmbl_check(ctx, KERNEL, RUNNING), 0);
	fake.calls[0] = '\0';
	fake.mount_errno = 0;
	fake.systemctl_errno = 0;
}

/* The method chosen for KERNEL with CMDLINE, and the reason in REASON. */
static int choose(const char *kernel, const char *cmdline, char *reason, size_t size)
{
	enum nmbl_boot_method method = NMBL_BOOT_KEXEC;
	char *why = NULL;
	int r;

	r = nmbl_choose_boot(ctx, kernel, cmdline, &method, &why);
	if (r < 0)
		return r;
	snprintf(reason, size, "%s", why ? why : "");
	free(why);
	return method;
}

/* PATH below the fixture root: SIZE bytes, sparse. */
static char *sparse(const char *path, off_t size)
{
	char *full;

	fixture_write(path, "", 0);
	full = strdup(fixture_path(path));
	CHECK(full && truncate(full, size) == 0);
	return full;
}

static void put(const char *path, off_t off, const void *data, size_t len)
{
	int fd = open(fixture_path(path), O_RDWR | O_CLOEXEC);

	CHECK(fd >= 0 && pwrite(fd, data, len, off) == (ssize_t)len);
	if (fd >= 0)
		close(fd);
}

/* A swap made by mkswap. */
static void make_swap(const char *path)
{
	char *full = sparse(path, 1 << 20);

	fixture_run("mkswap -q %s >/dev/null 2>&1", full);
	free(full);
}

/* What the kernel writes over a swap's signature when it hibernates into
 * it, or the signature again. */
static void hibernate(const char *path, bool hibernated)
{
	put(path, 4096 - 10, hibernated ? "S1SUSPEND" : "SWAPSPACE2", hibernated ? 9 : 10);
}

static void test_cmdline_is_split_as_the_kernel_splits_it(void)
{
	struct nmbl_cmdline *c = NULL;
	char *v = NULL;
	const char *line = "  root=LABEL=\"my root\" \"quoted key=x\"\tro  rootflags=subvol=root ro=\"\"";

	CHECK_INT(nmbl_cmdline_parse(line, strlen(line), &c), 0);
	CHECK_INT(c->n, 5);
	CHECK_STR(c->params[0].word, "root=LABEL=\"my root\"");
	CHECK_STR(c->params[0].key, "root");
	CHECK_STR(c->params[1].key, "quoted key");
	CHECK_STR(c->params[2].word, "ro");
	CHECK_STR(nmbl_cmdline_find(c, "ro")->word, "ro=\"\"");
	nmbl_cmdline_free(c);

	CHECK_INT(nmbl_cmdline_get_value(line, "root", &v), 0);
	CHECK_STR(v, "LABEL=my root");
	free(v);
	CHECK_INT(nmbl_cmdline_get_value(line, "rootflags", &v), 0);
	CHECK_STR(v, "subvol=root");
	free(v);
	CHECK_INT(nmbl_cmdline_get_value(line, "rw", &v), -ENOENT);
	/* An open quote runs to the end, as in the kernel. */
	CHECK_INT(nmbl_cmdline_parse("a=\"b c", 6, &c), 0);
	CHECK_INT(c->n, 1);
	nmbl_cmdline_free(c);
	CHECK_INT(nmbl_cmdline_parse("", 0, &c), 0);
	CHECK_INT(c->n, 0);
	nmbl_cmdline_free(c);
}

/* nmbl-init offers a shell for "nmbl.shell" or "nmbl.shell=1" only: the
 * parameter as written tells those from "nmbl.shell=" and quoted forms,
 * whose values are the same. */
static void test_param_as_written(void)
{
	static const struct {
		const char *line, *param;
	} cases[] = {
		{ "quiet nmbl.shell", "nmbl.shell" },
		{ "nmbl.shell=1 quiet", "nmbl.shell=1" },
		{ "nmbl.shell=", "nmbl.shell=" },
		{ "nmbl.shell=\"1\"", "nmbl.shell=\"1\"" },
		{ "\"nmbl.shell\"", "\"nmbl.shell\"" },
		{ "nmbl.shell=1 nmbl.shell=0", "nmbl.shell=0" },
	};
	char *v = NULL;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		CHECK_INT(nmbl_cmdline_get_param(cases[i].line, "nmbl.shell", &v), 0);
		CHECK_STR(v, cases[i].param);
		free(v);
		v = NULL;
	}
	CHECK_INT(nmbl_cmdline_get_value("nmbl.shell=", "nmbl.shell", &v), 0);
	CHECK_STR(v, "");
	free(v);
	v = (char *)1;
	CHECK_INT(nmbl_cmdline_get_param("nmbl.shells quiet", "nmbl.shell", &v), -ENOENT);
	CHECK_INT(nmbl_cmdline_get_param(NULL, "nmbl.shell", &v), -EINVAL);
	CHECK_INT(nmbl_cmdline_get_param("x", NULL, &v), -EINVAL);
	CHECK(v == (char *)1);
}

/* A line over 64 KiB is refused, whether given or read. */
static void test_cmdline_limit(void)
{
	char *line = malloc(NMBL_CMDLINE_MAX + 2), *v = (char *)1;

	memset(line, 'a', NMBL_CMDLINE_MAX + 1);
	line[NMBL_CMDLINE_MAX + 1] = '\0';
	CHECK_INT(nmbl_cmdline_get_value(line, "a", &v), -E2BIG);
	CHECK_INT(nmbl_cmdline_get_param(line, "a", &v), -E2BIG);
	CHECK_INT(nmbl_cmdline_remove(line, "a", &v), -E2BIG);
	CHECK(v == (char *)1);
	fixture_write("/proc/cmdline", line, NMBL_CMDLINE_MAX + 1);
	CHECK_INT(nmbl_get_kernel_cmdline(ctx, &v), -EFBIG);
	CHECK(v == (char *)1);
	fixture_text("/proc/cmdline", RUNNING);
	line[NMBL_CMDLINE_MAX] = '\0';
	CHECK_INT(nmbl_cmdline_remove(line, "b", &v), 0);
	CHECK_INT(strlen(v), NMBL_CMDLINE_MAX);
	free(v);
	CHECK_INT(nmbl_cmdline_remove(NULL, "b", &v), -EINVAL);
	free(line);
}

/* What the entry asks to mount, decided from its line alone. */
static void test_root_mount_is_decided_from_the_line(void)
{
	const char *line = "root=UUID=7a46e7a1 rw rootfstype=auto quiet loglevel=7 "
			   "rootflags=noatime,subvol=@,ro,nodev ro panic=0x10 init=/bin/sh";
	struct nmbl_cmdline *c = NULL;
	struct nmbl_root_mount m = { 0 };

	CHECK_INT(nmbl_cmdline_parse(line, strlen(line), &c), 0);
	CHECK_INT(nmbl_root_mount_parse(c, &m), 0);
	CHECK_STR(m.spec, "UUID=7a46e7a1");
	CHECK(m.fstype == NULL);
	CHECK_INT(m.flags, MS_RDONLY | MS_NOATIME | MS_NODEV);
	CHECK_STR(m.data, "subvol=@");
	CHECK_STR(m.init, "/bin/sh");
	CHECK_INT(nmbl_cmdline_loglevel(c), 7);
	CHECK_INT(nmbl_cmdline_panic_timeout(c), 16);
	nmbl_root_mount_clear(&m);
	nmbl_cmdline_free(c);

	CHECK_INT(nmbl_cmdline_parse("ro quiet", 8, &c), 0);
	CHECK_INT(nmbl_root_mount_parse(c, &m), -EINVAL);
	CHECK(m.spec == NULL);
	CHECK_INT(nmbl_cmdline_loglevel(c), 4);
	CHECK_INT(nmbl_cmdline_panic_timeout(c), 0);
	nmbl_cmdline_free(c);
}

/* nmbl load --reuse-cmdline: the running kernel's line, quoted words kept
 * whole, less BOOT_IMAGE=. */
static void test_running_cmdline_without_boot_image(void)
{
	char *line = NULL, *v = NULL;

	fixture_text("/proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz root=LABEL=\"my root\"  "
				      "\"BOOT_IMAGE=x\" quiet BOOT_IMAGE=y\n");
	CHECK_INT(nmbl_get_kernel_cmdline(ctx, &line), 0);
	CHECK_STR(line, "BOOT_IMAGE=(hd0,gpt2)/vmlinuz root=LABEL=\"my root\"  "
			"\"BOOT_IMAGE=x\" quiet BOOT_IMAGE=y");
	CHECK_INT(nmbl_cmdline_remove(line, "BOOT_IMAGE", &v), 0);
	CHECK_STR(v, "root=LABEL=\"my root\" quiet");
	free(v);
	CHECK_INT(nmbl_cmdline_remove(line, "root", &v), 0);
	CHECK_STR(v, "BOOT_IMAGE=(hd0,gpt2)/vmlinuz \"BOOT_IMAGE=x\" quiet BOOT_IMAGE=y");
	free(v);
	free(line);
	CHECK_INT(nmbl_cmdline_remove("BOOT_IMAGE=a", "BOOT_IMAGE", &v), 0);
	CHECK_STR(v, "");
	free(v);
	CHECK_INT(nmbl_get_kernel_cmdline(NULL, &line), -EINVAL);
	fixture_text("/proc/cmdline", RUNNING);
}

static void test_running_kernel_with_userspace_changes_boots_directly(void)
{
	char why[512];

	machine();
	/* BOOT_IMAGE, root, rw, rd.*, systemd.*, rhgb, selinux-free: userspace
	 * reads these; quiet and debug only set the console log level. */
	CHECK_INT(choose(KERNEL, "BOOT_IMAGE=/boot/vmlinuz-6.1 root=PARTUUID=e5b0e5b0-0003 rw "
			 "console=tty0 console=ttyS0,115200 rd.shell=0 systemd.unit=rescue.target "
			 "rhgb debug", why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_STR(why, "");
}

static void test_kernel_parameters_must_be_the_running_ones(void)
{
	char why[512];

	machine();
	CHECK_INT(choose(KERNEL, "root=UUID=7a46e7a1 console=tty0 console=ttyS0,115200 mitigations=off",
			 why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "its kernel parameter 'mitigations=off' is not the running kernel's");
	CHECK_INT(choose(KERNEL, "root=UUID=7a46e7a1 console=ttyS0,115200", why, sizeof(why)),
		  NMBL_BOOT_KEXEC);
	CHECK_STR(why, "the running kernel's parameter 'console=tty0' is not among its own");
	CHECK_INT(choose(KERNEL, "root=UUID=7a46e7a1 console=ttyS0,115200 console=tty0", why,
			 sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "its kernel parameters are in another order");
	/* selinux= is read by the kernel too: not something to switch into. */
	CHECK_INT(choose(KERNEL, "root=UUID=7a46e7a1 console=tty0 console=ttyS0,115200 selinux=0",
			 why, sizeof(why)), NMBL_BOOT_KEXEC);
}

static void test_another_kernel_or_a_uki_is_kexeced(void)
{
	const char *entry = "root=UUID=7a46e7a1 console=tty0 console=ttyS0,115200";
	char why[512];

	machine();
	fixture_text("/proc/version", "Linux version 6.1.0-test (nmbl) (gcc) #2 SMP\n");
	CHECK_INT(choose(KERNEL, entry, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "it is not the running kernel (it is 6.1.0-test)");
	machine();
	CHECK_INT(choose(CORPUS "/uki.efi", entry, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "a UKI brings its own initrd and command line");
	CHECK_INT(choose(CORPUS "/efi-program.efi", entry, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "it is not the running kernel (it is unknown)");
	fixture_text("/proc/cmdline", "console=tty0 console=ttyS0,115200 nmbl.boot=kexec\n");
	CHECK_INT(choose(KERNEL, entry, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "nmbl.boot=kexec asks for kexec always");
}

static void test_what_its_own_initrd_sets_up_needs_that_initrd(void)
{
	const char *k = "console=tty0 console=ttyS0,115200";
	unsigned char luks[4096] = "LUKS\xba\xbe", md[256] = { 0 };
	char *a, *b;
	char why[512], line[512];

	machine();
	snprintf(line, sizeof(line), "root=/dev/mapper/fedora-root rd.lvm.lv=fedora/root %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "its root needs LVM, which its own initrd sets up (rd.lvm.lv=); it names no initrd");

	/* Not there, and a disk holds LUKS: maybe it is inside. */
	snprintf(line, sizeof(line), "root=UUID=0ff %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	fixture_text("/sys/class/block/vdb/size", "8\n");
	fixture_write("/dev/vdb", luks, sizeof(luks));
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "root=UUID=0ff is not there, and a disk holds LUKS, which its own initrd may set up; it names no initrd");
	remove(fixture_path("/dev/vdb"));

	fixture_text("/sys/class/block/dm-0/dm/name", "root\n");
	fixture_text("/dev/dm-0", "");
	link_dev("/dev/disk/by-uuid/d0", "../../dm-0");
	snprintf(line, sizeof(line), "root=UUID=d0 %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "root=UUID=d0 is a device-mapper or RAID device its own initrd sets up; it names no initrd");

	/* md 1.0 keeps its superblock at the end of the device. */
	fixture_text("/sys/class/block/vde/size", "4096\n");
	free(sparse("/dev/vde", 2 << 20));
	memcpy(md, "\xfc\x4e\x2b\xa9\x01", 5); /* magic, major_version 1 */
	md[144] = ((2 << 20) - 8192) / 512 % 256;   /* super_offset (sectors) */
	md[145] = ((2 << 20) - 8192) / 512 / 256;
	put("/dev/vde", (2 << 20) - 8192, md, sizeof(md));
	snprintf(line, sizeof(line), "root=UUID=0ff %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "root=UUID=0ff is not there, and a disk holds RAID (md), which its own initrd may set up; it names no initrd");
	remove(fixture_path("/dev/vde"));

	/* There, but LUKS: no file system nmbl could mount. */
	fixture_write("/dev/vdf", luks, sizeof(luks));
	link_dev("/dev/disk/by-uuid/c1", "../../vdf");
	snprintf(line, sizeof(line), "root=UUID=c1 %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "root=UUID=c1 holds LUKS, which its own initrd sets up; it names no initrd");
	remove(fixture_path("/dev/vdf"));

	/* One of two devices of a btrfs. */
	a = sparse("/dev/vdc1", 128 << 20);
	b = sparse("/dev/vdc2", 128 << 20);
	fixture_run("mkfs.btrfs -q -f -d single -m single %s %s >/dev/null", a, b);
	free(a), free(b);
	link_dev("/dev/disk/by-label/multi", "../../vdc1");
	snprintf(line, sizeof(line), "root=LABEL=multi %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "root=LABEL=multi is a btrfs of several devices, which its own initrd assembles; it names no initrd");

	make_swap("/dev/vda2");
	hibernate("/dev/vda2", true);
	snprintf(line, sizeof(line), "root=UUID=7a46e7a1 resume=/dev/vda2 %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "resume=/dev/vda2 holds a hibernated system, which its own initrd resumes");
	hibernate("/dev/vda2", false);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);

	snprintf(line, sizeof(line), "root=nfs:10.0.0.1:/root %s", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "root=nfs:10.0.0.1:/root is no local block device nmbl mounts itself");
	CHECK_INT(choose(KERNEL, k, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "it names no root= for nmbl to mount");
}

/*
 * Debian's initrd keeps RESUME= to itself, systemd 255 and later note the
 * place in an EFI variable: any swap that holds a hibernated system, and
 * that variable, make the entry's own initrd boot it, which resumes the
 * system; unless the entry says noresume.
 */
/* The entry's initrd, measured and held as GRUB's initrd command has it:
 * a gzip'ed cpio of a tree with /init and the modules of RELEASE, laid
 * out as initramfs-tools lays it out (ITOOLS) or as dracut does. */
static void entry_initrd_with(const char *release, const char *more)
{
	fixture_run("cd %s && rm -rf initrd && mkdir -p initrd/lib/modules/%s initrd/proc initrd/conf "
		    "initrd/etc && "
		    "printf '#!/bin/sh\\n' >initrd/init && chmod 755 initrd/init && "
		    "%s (cd initrd && find . | sort | cpio -o -H newc --quiet) | gzip >initrd.img",
		    fixture_root(), release, more);
	CHECK_INT(nmbl_measure_initrd(ctx, fixture_path("/initrd.img"), "/initrd.img"), 0);
}

static void entry_initrd(const char *release, bool itools)
{
	entry_initrd_with(release, itools ? "mkdir initrd/scripts && touch initrd/scripts/functions "
					    "initrd/conf/initramfs.conf &&" :
					    "");
}

static void test_a_stack_boots_through_the_entry_initrd(void)
{
	const char *line = "BOOT_IMAGE=/vmlinuz root=/dev/mapper/vg-root ro rd.lvm.lv=vg/root "
			   "console=tty0 console=ttyS0,115200 quiet";
	char why[512], text[1024];
	bool initrd = false;

	/* dracut's: proc mounted in its root, the entry's line on it. */
	machine();
	fixture_run("rm -rf %s", fixture_path("/sysroot"));
	entry_initrd("6.1.0-test", false);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_STR(why, "");
	CHECK_STR(ctx->handover, "its root needs LVM, which its own initrd sets up (rd.lvm.lv=)");
	CHECK_INT(nmbl_check(ctx, KERNEL, line), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, line), 0);
	CHECK_STR(fake.calls, "mount rootfs /sysroot tmpfs mode=0755;"
			      "mount proc /sysroot/proc proc -;"
			      "mount /nmbl-cmdline /sysroot/proc/cmdline - -;"
			      "mount - /sysroot/proc/cmdline - -;"
			      "kexec_file_load;");
	CHECK_STR(nmbl_switch_root_init(ctx, &initrd), "/init");
	CHECK_INT(initrd, true);
	/* Secure Boot unknown here, as if on: dracut's emergency hook
	 * restarts the machine, no shell. */
	CHECK(nmbl_read_small(ctx, "/sysroot/etc/cmdline.d/zz-nmbl.conf", text, sizeof(text)) > 0);
	CHECK_STR(text, "rd.shell=0 rd.emergency=reboot");
	CHECK_INT(access(fixture_path("/sysroot/lib/modules/6.1.0-test"), F_OK), 0);
	/* Nothing held any more, nothing of the menu's state left. */
	CHECK_INT((int)ctx->n_initrds, 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root_undo(ctx), 0);
	CHECK_STR(fake.calls, "umount -R /sysroot;");

	/* initramfs-tools': its /init mounts proc itself, then sources
	 * conf/conf.d/, where the line is bound. */
	machine();
	fixture_run("rm -rf %s", fixture_path("/sysroot"));
	entry_initrd("6.1.0-test", true);
	/* No stack on any disk: nmbl mounts it, or says it is not there. */
	CHECK_INT(choose(KERNEL, "root=/dev/mapper/vg-root ro console=tty0 console=ttyS0,115200",
			 why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK(ctx->handover == NULL);
	fixture_text("/sys/class/block/vdb/size", "8\n");
	fixture_write("/dev/vdb", "LUKS\xba\xbe\0\1", 8);
	CHECK(truncate(fixture_path("/dev/vdb"), 1 << 20) == 0);
	CHECK_INT(choose(KERNEL, "root=/dev/mapper/vg-root ro console=tty0 console=ttyS0,115200",
			 why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_INT(nmbl_check(ctx, KERNEL, line), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/mapper/vg-root ro console=tty0 console=ttyS0,115200"),
		  0);
	CHECK_STR(fake.calls, "mount rootfs /sysroot tmpfs mode=0755;kexec_file_load;");
	CHECK(nmbl_read_small(ctx, "/sysroot/conf/nmbl-cmdline", text, sizeof(text)) > 0);
	CHECK_STR(text, "root=/dev/mapper/vg-root ro console=tty0 console=ttyS0,115200");
	CHECK(nmbl_read_small(ctx, "/sysroot/conf/conf.d/zz-nmbl", text, sizeof(text)) > 0);
	CHECK(strstr(text, "mount -n -o bind /conf/nmbl-cmdline /proc/cmdline &&\n"
			   "\tmount -n -o remount,bind,ro /proc/cmdline\n"));
	/* Secure Boot unknown here: as if on, its panic() opens no shell. */
	CHECK(strstr(text, "\npanic=10"));
	remove(fixture_path("/dev/vdb"));
	(void)nmbl_switch_root_undo(ctx);
}

/* An initrd made for another kernel (or none of nmbl's reading) is the
 * entry's kernel's to boot; one that is not an initrd, nobody's. */
static void test_an_initrd_for_another_kernel_is_refused(void)
{
	const char *line = "root=/dev/mapper/vg-root rd.luks.uuid=0ff console=tty0 console=ttyS0,115200";
	char why[512];

	machine();
	fixture_run("rm -rf %s", fixture_path("/sysroot"));
	entry_initrd("6.1.0-other", false);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_INT(nmbl_check(ctx, KERNEL, line), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, line), -ENOPKG);
	CHECK_STR(fake.calls, "mount rootfs /sysroot tmpfs mode=0755;umount -R /sysroot;");
	/* Still held, for the kexec that boots it. */
	CHECK_INT((int)ctx->n_initrds, 1);

	machine();
	fixture_text("/initrd.img", "not an initrd\n");
	CHECK_INT(nmbl_measure_initrd(ctx, fixture_path("/initrd.img"), "/initrd.img"), 0);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_INT(nmbl_check(ctx, KERNEL, line), 0);
	CHECK_INT(nmbl_switch_root(ctx, line), -EBADMSG);
	CHECK_INT(nmbl_switch_root_init(ctx, NULL) == NULL, 1);
}

/*
 * An initrd whose /proc is a symbolic link to a directory outside it:
 * before, mount(2) followed the link, and proc, with the entry's line
 * bound over its cmdline, was mounted on that directory of nmbl's own.
 * Now /proc is opened in the initrd's tree without following a link, and
 * a link is refused before anything is mounted there.
 */
static void test_proc_is_never_mounted_through_a_link(void)
{
	const char *line = "root=/dev/mapper/vg-root rd.lvm.lv=vg/root console=tty0 console=ttyS0,115200";
	char why[512], more[4096];

	machine();
	fixture_run("cd %s && rm -rf sysroot outside && mkdir outside", fixture_root());
	snprintf(more, sizeof(more), "rmdir initrd/proc && ln -s %s initrd/proc &&",
		 fixture_path("/outside"));
	entry_initrd_with("6.1.0-test", more);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_INT(nmbl_check(ctx, KERNEL, line), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, line), -ENOTDIR);
	CHECK_STR(fake.calls, "mount rootfs /sysroot tmpfs mode=0755;umount -R /sysroot;");
	CHECK(strstr(fake.calls, "/outside") == NULL);
	CHECK(nmbl_switch_root_init(ctx, NULL) == NULL);
	/* A file there is no directory either. */
	machine();
	fixture_run("rm -rf %s", fixture_path("/sysroot"));
	entry_initrd_with("6.1.0-test", "rmdir initrd/proc && touch initrd/proc &&");
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_INT(nmbl_check(ctx, KERNEL, line), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, line), -ENOTDIR);
	CHECK_STR(fake.calls, "mount rootfs /sysroot tmpfs mode=0755;umount -R /sysroot;");
}

/*
 * An initrd that cannot be read, as a disk's bad block or a USB stick
 * pulled out makes one: /proc/self/mem, which reads as EIO from its start.
 * Before, a hand-over mapped each initrd, and a read error was SIGBUS in
 * process 1, a kernel panic (this file, which says it has no size, was
 * skipped).  Now each is read, and the error is the menu's again: -EIO,
 * nothing left mounted.  A directory or a FIFO is no initrd, and a FIFO
 * does not block.
 */
static void test_an_initrd_that_cannot_be_read_is_an_error(void)
{
	const char *line = "root=/dev/mapper/vg-root rd.lvm.lv=vg/root console=tty0 console=ttyS0,115200";
	char why[512];

	machine();
	fixture_run("rm -rf %s", fixture_path("/sysroot"));
	entry_initrd("6.1.0-test", false);
	CHECK_INT(nmbl_measure_initrd(ctx, "/proc/self/mem", "/mem.img"), 0);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_INT(nmbl_check(ctx, KERNEL, line), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, line), -EIO);
	CHECK_STR(fake.calls, "mount rootfs /sysroot tmpfs mode=0755;umount -R /sysroot;");
	CHECK(nmbl_switch_root_init(ctx, NULL) == NULL);

	machine();
	unlink(fixture_path("/fifo"));
	CHECK_INT(mkfifo(fixture_path("/fifo"), 0600), 0);
	CHECK_INT(nmbl_measure_initrd(ctx, fixture_path("/fifo"), "/fifo"), -EINVAL);
	CHECK_INT(nmbl_measure_initrd(ctx, fixture_path("/sysroot"), "/sysroot"), -EISDIR);
	CHECK_INT((int)ctx->n_initrds, 0);
	unlink(fixture_path("/fifo"));
}

static void test_hibernated_system_is_resumed_by_its_own_initrd(void)
{
	static const char var[] = NMBL_EFIVARS "HibernateLocation-" NMBL_SYSTEMD_GUID;
	static const char location[] = "\x07\0\0\0{\"uuid\":\"0ff\",\"offset\":0}";
	const char *k = "root=UUID=7a46e7a1 console=tty0 console=ttyS0,115200";
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	char why[512], line[512], swap[4096];
	int fd;

	machine();
	fixture_text("/sys/class/block/vda4/partition", "4\n");
	make_swap("/dev/vda4");
	CHECK_INT(choose(KERNEL, k, why, sizeof(why)), NMBL_BOOT_DIRECT);
	hibernate("/dev/vda4", true);
	CHECK_INT(choose(KERNEL, k, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "/dev/vda4 holds a hibernated system, which its own initrd resumes");
	snprintf(line, sizeof(line), "%s noresume", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);

	/* A swap file in the root file system, resume_offset= pages in. */
	fd = open(fixture_path("/dev/vda4"), O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && pread(fd, swap, sizeof(swap), 0) == (ssize_t)sizeof(swap));
	close(fd);
	hibernate("/dev/vda4", false);
	put("/dev/vda3", (off_t)(16 * page), swap, sizeof(swap));
	CHECK_INT(truncate(fixture_path("/dev/vda3"), (off_t)(16 * page + (1 << 20))), 0);
	snprintf(line, sizeof(line), "%s resume=UUID=7a46e7a1", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	snprintf(line, sizeof(line), "%s resume=UUID=7a46e7a1 resume_offset=16", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "resume=UUID=7a46e7a1 holds a hibernated system, which its own initrd resumes");

	/* systemd's record of where it hibernated. */
	machine();
	fixture_write(var, location, sizeof(location) - 1);
	CHECK_INT(choose(KERNEL, k, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "systemd's HibernateLocation EFI variable names a hibernated system, which its own initrd resumes");
	snprintf(line, sizeof(line), "%s noresume", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	remove(fixture_path(var));

	/* resume= names what is not there, and a disk holds LUKS. */
	fixture_text("/sys/class/block/vdb/size", "8\n");
	fixture_write("/dev/vdb", "LUKS\xba\xbe\0\1", 8);
	CHECK(truncate(fixture_path("/dev/vdb"), 1 << 20) == 0);
	snprintf(line, sizeof(line), "%s resume=/dev/mapper/swap", k);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_KEXEC);
	CHECK_STR(why, "resume=/dev/mapper/swap is not there, and a disk holds LUKS, which its own initrd may set up; it names no initrd");
	remove(fixture_path("/dev/vdb"));
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
}

static void test_switch_root_mounts_the_entry_root(void)
{
	const char *line = "BOOT_IMAGE=/vmlinuz root=LABEL=\"my root\" rootflags=subvol=root,noatime rw "
			   "console=tty0 console=ttyS0,115200 rhgb";
	char cmdline[512];

	machine();
	CHECK_INT(nmbl_switch_root(ctx, line), 0);
	CHECK_STR(fake.calls, "mount /dev/vda3 /sysroot ext4 subvol=root;"
			      "mount /nmbl-cmdline /proc/cmdline - -;"
			      "mount - /proc/cmdline - -;"
			      "kexec_file_load;");
	CHECK_INT(fake.mount_flags, MS_BIND | MS_REMOUNT | MS_RDONLY);
	/* The file under the bind mount is gone from the initramfs. */
	CHECK(access(fixture_path("/nmbl-cmdline"), F_OK) < 0);
	/* No quiet in the entry: the kernel's own default level. */
	CHECK_INT(nmbl_read_small(ctx, "/proc/sys/kernel/printk", cmdline, sizeof(cmdline)), 1);
	CHECK_STR(cmdline, "7");
}

/* nmbl's own panic= (its UKI reboots when it panics) is not the entry's:
 * no reason to kexec, and the entry gets the timeout its own line asks
 * for, or the kernel's default.  nmbl's watchdog does not go along. */
static void test_switch_root_leaves_nmbl_panic_and_watchdog_behind(void)
{
	const char *entry = "BOOT_IMAGE=/vmlinuz root=UUID=7a46e7a1 ro console=tty0 "
			    "console=ttyS0,115200 quiet";
	char line[512], why[256], value[32];
	int fd;

	machine();
	snprintf(line, sizeof(line), "%s panic=30", entry);
	fixture_text("/proc/cmdline", line);
	fixture_text("/proc/sys/kernel/panic", "30\n");
	CHECK_INT(choose(KERNEL, entry, why, sizeof(why)), NMBL_BOOT_DIRECT);
	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	snprintf(value, sizeof(value), "%d", fd);
	CHECK_INT(setenv(NMBL_WATCHDOG_FD, value, 1), 0);
	CHECK_INT(nmbl_switch_root(ctx, entry), 0);
	CHECK(strstr(fake.calls, "watchdog_stop;"));
	CHECK(!getenv(NMBL_WATCHDOG_FD));
	CHECK_INT(nmbl_read_small(ctx, "/proc/sys/kernel/panic", value, sizeof(value)), 1);
	CHECK_STR(value, "0");

	machine();
	fixture_text("/proc/cmdline", line);
	snprintf(line, sizeof(line), "%s panic=-1", entry);
	CHECK_INT(choose(KERNEL, line, why, sizeof(why)), NMBL_BOOT_DIRECT);
	CHECK_INT(nmbl_switch_root(ctx, line), 0);
	CHECK_INT(nmbl_read_small(ctx, "/proc/sys/kernel/panic", value, sizeof(value)), 2);
	CHECK_STR(value, "-1");
	CHECK(!strstr(fake.calls, "watchdog_stop;"));
}

static void test_switch_root_flags_and_names(void)
{
	machine();
	CHECK_INT(nmbl_switch_root(ctx, "root=PARTUUID=E5B0E5B0-0003 rootfstype=ext4 rootflags=noatime,nodev quiet"), 0);
	CHECK(strstr(fake.calls, "mount /dev/vda3 /sysroot ext4 -;"));
	machine();
	CHECK_INT(nmbl_switch_root(ctx, "root=PARTLABEL=root rw ro"), 0);
	CHECK(strncmp(fake.calls, "mount /dev/vda3 /sysroot ext4 -;", 32) == 0);
}

static void test_switch_root_refuses_what_it_cannot_boot(void)
{
	machine();
	CHECK_INT(nmbl_switch_root(ctx, "root=UUID=0ff ro"), -ENXIO);
	CHECK_STR(fake.calls, "");
	/* An init that is not there: the root is unmounted again. */
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 init=/bin/none"), -ENOMEDIUM);
	CHECK_STR(fake.calls, "mount /dev/vda3 /sysroot ext4 -;umount /sysroot;");
	fake.calls[0] = '\0';
	fake.mount_errno = -EINVAL;
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 rootfstype=xfs"), -EINVAL);
	CHECK_STR(fake.calls, "mount /dev/vda3 /sysroot xfs -;");
	/* Only a kernel the running kernel accepted. */
	machine();
	fake.kexec_errno = -EKEYREJECTED;
	CHECK_INT(nmbl_check(ctx, KERNEL, RUNNING), -EKEYREJECTED);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3"), -ENOENT);
	CHECK_STR(fake.calls, "");
	machine();
	CHECK_INT(nmbl_unload(ctx), 0);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3"), -ENOENT);
	CHECK_STR(fake.calls, "");
}

/* The root's device still mounted (by nmbl, read-only and without journal
 * replay, or by anyone): a new mount would share that superblock and its
 * options, so the root is not mounted at all.  nmbl's own mounts go first. */
static void test_switch_root_never_shares_a_mount(void)
{
	const char *order = "umount /run/nmbl/mnt/vda3;mount /dev/vda3 /sysroot ext4 -;";
	char *mp = NULL;

	/* nmbl's own mount of it is undone before the root is mounted. */
	machine();
	fixture_text("/sys/class/block/vda/vda3/start", "4096\n");
	fixture_text("/proc/filesystems", "\text4\n");
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vda", 4096, &mp), 0);
	free(mp);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 rootfstype=ext4"), 0);
	CHECK(strncmp(fake.calls, order, strlen(order)) == 0);

	machine();
	unlink(fixture_path("/dev/vda3"));
	CHECK_INT(mknod(fixture_path("/dev/vda3"), S_IFBLK | 0600, makedev(253, 3)), 0);
	fixture_text("/proc/self/mountinfo",
		     "22 1 0:5 / /dev rw - devtmpfs devtmpfs rw\n"
		     "30 1 253:3 / /run/nmbl/mnt/vda3 ro - ext4 /dev/vda3 ro,norecovery\n");
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 rootfstype=ext4"), -EBUSY);
	CHECK_STR(fake.calls, "");
	/* btrfs shows an anonymous device number: the source tells. */
	fixture_text("/proc/self/mountinfo",
		     "30 1 0:44 / /run/nmbl/mnt/vda3 ro - btrfs /dev/vda3 ro,rescue=nologreplay\n");
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 rootfstype=btrfs"), -EBUSY);
	CHECK_STR(fake.calls, "");
	/* Mounted nowhere: mounted. */
	fixture_text("/proc/self/mountinfo", "22 1 0:5 / /dev rw - devtmpfs devtmpfs rw\n");
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 rootfstype=ext4"), 0);
	CHECK(strncmp(fake.calls, order + strlen("umount /run/nmbl/mnt/vda3;"),
		      strlen(order) - strlen("umount /run/nmbl/mnt/vda3;")) == 0);
	/* Without a way to tell, no mount. */
	unlink(fixture_path("/dev/vda3"));
	machine();
	unlink(fixture_path("/dev/vda3"));
	CHECK_INT(mknod(fixture_path("/dev/vda3"), S_IFBLK | 0600, makedev(253, 3)), 0);
	remove(fixture_path("/proc/self/mountinfo"));
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 rootfstype=ext4"), -ENOENT);
	CHECK_STR(fake.calls, "");
	unlink(fixture_path("/dev/vda3"));
}

/* Accepted by the kernel, but another kernel than the running one. */
/* The file chosen, checked and booted is one file, opened once: a file
 * put in its place afterwards is not what the kernel checks. */
static void test_kernel_is_opened_once(void)
{
	char kernel[4096], other[4096], reason[256];
	FILE *in = fopen(KERNEL, "rb");
	static unsigned char buf[1 << 16];
	size_t n;

	machine();
	CHECK(in != NULL);
	n = in ? fread(buf, 1, sizeof(buf), in) : 0;
	if (in)
		fclose(in);
	fixture_write("/boot/vmlinuz-chosen", buf, n);
	fixture_text("/boot/vmlinuz-other", "MZ, but another file");
	snprintf(kernel, sizeof(kernel), "%s", fixture_path("/boot/vmlinuz-chosen"));
	snprintf(other, sizeof(other), "%s", fixture_path("/boot/vmlinuz-other"));
	CHECK_INT(choose(kernel, RUNNING, reason, sizeof(reason)), NMBL_BOOT_DIRECT);
	CHECK_INT(rename(other, kernel), 0);
	CHECK_INT(nmbl_check(ctx, kernel, RUNNING), 0);
	CHECK(fake.kexec_kernel_len > 2 && memcmp(fake.kexec_kernel, buf, 64) == 0);
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3"), 0);
	/* Taken once: a second check opens the file anew. */
	CHECK_INT(nmbl_check(ctx, kernel, RUNNING), -ENOEXEC);
}

static void test_switch_root_needs_the_running_kernel_checked(void)
{
	machine();
	fixture_text("/proc/version", "Linux version 6.1.0-other (nmbl) (gcc) #2 SMP\n");
	CHECK_INT(nmbl_check(ctx, KERNEL, RUNNING), 0);
	fixture_text("/proc/version", PROC_VERSION);
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3"), -ENOENT);
	CHECK_STR(fake.calls, "");
}

static void test_switch_root_through_systemd(void)
{
	machine();
	fixture_text("/proc/1/comm", "systemd\n");
	fake.systemctl_errno = -EIO;
	CHECK_INT(nmbl_switch_root(ctx, "root=/dev/vda3 quiet"), -EIO);
	CHECK(strstr(fake.calls, "systemctl_switch-root /sysroot;"));
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_cmdline_is_split_as_the_kernel_splits_it,
		test_param_as_written,
		test_cmdline_limit,
		test_running_cmdline_without_boot_image,
		test_root_mount_is_decided_from_the_line,
		test_running_kernel_with_userspace_changes_boots_directly,
		test_kernel_parameters_must_be_the_running_ones,
		test_another_kernel_or_a_uki_is_kexeced,
		test_what_its_own_initrd_sets_up_needs_that_initrd,
		test_a_stack_boots_through_the_entry_initrd,
		test_an_initrd_for_another_kernel_is_refused,
		test_proc_is_never_mounted_through_a_link,
		test_an_initrd_that_cannot_be_read_is_an_error,
		test_hibernated_system_is_resumed_by_its_own_initrd,
		test_switch_root_mounts_the_entry_root,
		test_switch_root_leaves_nmbl_panic_and_watchdog_behind,
		test_switch_root_flags_and_names,
		test_switch_root_refuses_what_it_cannot_boot,
		test_switch_root_never_shares_a_mount,
		test_switch_root_needs_the_running_kernel_checked,
		test_kernel_is_opened_once,
		test_switch_root_through_systemd,
		NULL,
	};

	return unit_main_ctx(tests, &ctx);
}
