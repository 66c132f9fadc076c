/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Module loading against a modules tree made from the real kernel's
 * modules (KERNEL_MODULES, copied and indexed with depmod), with the
 * insertion faked: what would be loaded, in which order.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static const char *const modules[] = {
	"fs/ext4/ext4.ko", "fs/jbd2/jbd2.ko", "fs/mbcache.ko", "lib/crc16.ko",
	"crypto/crc32c_generic.ko", "arch/x86/crypto/crc32c-intel.ko", "drivers/block/virtio_blk.ko",
	"drivers/virtio/virtio.ko", "drivers/virtio/virtio_ring.ko",
	"fs/fat/fat.ko", "fs/fat/vfat.ko", "fs/nls/nls_cp437.ko", "fs/nls/nls_ascii.ko",
	"fs/nls/nls_utf8.ko", "drivers/block/loop.ko",
};

static struct nmbl_ctx *ctx;

static void make_tree(void)
{
	struct utsname u;
	char cmd[8192];
	int n;

	uname(&u);
	n = snprintf(cmd, sizeof(cmd), "set -e; d='%s/lib/modules/%s/kernel'; ",
		     fixture_root(), u.release);
	for (size_t i = 0; i < ELEMENTSOF(modules); i++)
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n,
			      "mkdir -p \"$d/$(dirname %s)\"; cp '%s/%s' \"$d/%s\"; ",
			      modules[i], KERNEL_MODULES, modules[i], modules[i]);
	/* Compressed as distributions ship them (nmbl's own image: zstd;
	 * Fedora: xz), and one damaged once indexed: its last bytes cut off. */
	n += snprintf(cmd + n, sizeof(cmd) - (size_t)n,
		      "zstd -q --rm \"$d/fs/fat/vfat.ko\"; xz --check=crc32 \"$d/fs/nls/nls_utf8.ko\"; "
		      "zstd -q --rm \"$d/drivers/block/loop.ko\"; ");
	snprintf(cmd + n, sizeof(cmd) - (size_t)n,
		 "cd \"$d/..\"; touch modules.order modules.builtin modules.builtin.modinfo; "
		 "PATH=$PATH:/usr/sbin:/sbin depmod -b '%s' '%s'; "
		 "truncate -s -16 \"$d/drivers/block/loop.ko.zst\"", fixture_root(), u.release);
	if (system(cmd) != 0) {
		fprintf(stderr, "cannot make the modules tree: %s\n", cmd);
		exit(2);
	}
}

static const char *pos(const char *name)
{
	return strstr(fake.calls, name);
}

static void test_alias_loads_dependencies_first(void)
{
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "fs-ext4"), 0);
	CHECK(pos("insmod crc32c_generic.ko;") && pos("insmod jbd2.ko;") &&
	      pos("insmod mbcache.ko;") && pos("insmod crc16.ko;"));
	/* ext4 comes last: after its soft and hard dependencies. */
	CHECK(pos("insmod ext4.ko;") && strlen(pos("insmod ext4.ko;")) == strlen("insmod ext4.ko;"));
	CHECK(pos("insmod crc32c_generic.ko;") < pos("insmod ext4.ko;"));
}

/* ext4's soft dependency crypto-crc32c names crc32c-intel and
 * crc32c_generic: on a CPU without SSE4.2 (QEMU's qemu64) the first fails
 * with ENODEV, and the second must still load, as modprobe would load it. */
static void test_candidate_that_cannot_load_gives_way_to_the_next(void)
{
	fake.calls[0] = '\0';
	fake.finit_fail_module = "crc32c-intel.ko";
	fake.finit_fail_errno = -ENODEV;
	CHECK_INT(nmbl_load_module(ctx, "fs-ext4"), 0);
	CHECK(pos("insmod crc32c-intel.ko;") && pos("insmod crc32c_generic.ko;"));
	CHECK(pos("insmod crc32c_generic.ko;") < pos("insmod ext4.ko;"));
	/* Asked for by its alias, the same. */
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "crypto-crc32c"), 0);
	CHECK(pos("insmod crc32c_generic.ko;"));
	/* When no candidate loads, the answer is a failure: both were tried. */
	fake.finit_errno = -EPERM;
	fake.calls[0] = '\0';
	CHECK(nmbl_load_module(ctx, "crypto-crc32c") < 0);
	CHECK(pos("insmod crc32c-intel.ko;") && pos("insmod crc32c_generic.ko;"));
	/* A hard dependency that fails still stops its module. */
	fake.finit_fail_module = "jbd2.ko";
	fake.finit_fail_errno = -ENOEXEC;
	fake.finit_errno = 0;
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "ext4"), -ENOEXEC);
	CHECK(!pos("insmod ext4.ko;"));
	fake.finit_fail_module = NULL;
	fake.finit_fail_errno = 0;
}

/* An ESP: vfat, and the character sets the kernel mounts it with, which it
 * would otherwise ask a modprobe the initramfs does not have for. */
static void test_vfat_loads_its_character_sets(void)
{
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_fs_module(ctx, "vfat"), 0);
	CHECK(pos("insmod fat.ko;") && pos("insmod vfat.ko;"));
	CHECK(pos("insmod nls_cp437.ko;") && pos("insmod nls_ascii.ko;") &&
	      pos("insmod nls_utf8.ko;"));
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_fs_module(ctx, "ext4"), 0);
	CHECK(!pos("nls_"));
}

/* A compressed module is inserted decompressed (the fake takes only an
 * ELF file); a damaged one is not inserted at all. */
static void test_compressed_modules(void)
{
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "fs-vfat"), 0);
	CHECK(pos("insmod vfat.ko;"));
	CHECK_INT(nmbl_load_module(ctx, "nls_utf8"), 0);
	CHECK(pos("insmod nls_utf8.ko;"));
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "loop"), -EBADMSG);
	CHECK_STR(fake.calls, "");
}

static void test_loaded_modules_are_skipped(void)
{
	fixture_text("/sys/module/jbd2/initstate", "live\n");
	fixture_text("/sys/module/crc16/parameters/none", "");
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "ext4"), 0);
	CHECK(!pos("jbd2.ko") && !pos("crc16.ko"));
	CHECK(pos("insmod ext4.ko;"));
	/* An insertion that fails is reported. */
	fake.finit_errno = -EPERM;
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "virtio_blk"), -EPERM);
	fake.finit_errno = -EEXIST;
	CHECK_INT(nmbl_load_module(ctx, "virtio_blk"), 0);
	fake.finit_errno = 0;
}

static void test_unknown_and_blacklisted(void)
{
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_load_module(ctx, "fs-nosuchfs"), -ENOENT);
	CHECK_INT(nmbl_load_module(ctx, ""), -EINVAL);
	/* A context reads modprobe.d once, at its first module. */
	fixture_text("/etc/modprobe.d/test.conf", "blacklist virtio_blk\n");
	nmbl_unref(ctx);
	CHECK_INT(nmbl_new(fixture_root(), &ctx), 0);
	CHECK_INT(nmbl_load_module(ctx, "virtio:d00000002v00001AF4"), 0);
	CHECK_STR(fake.calls, "");
	remove(fixture_path("/etc/modprobe.d/test.conf"));
	nmbl_unref(ctx);
	CHECK_INT(nmbl_new(fixture_root(), &ctx), 0);
}

static void test_coldplug_loads_device_drivers(void)
{
	fixture_text("/sys/bus/virtio/devices/virtio0/modalias", "virtio:d00000002v00001AF4\n");
	fixture_text("/sys/bus/virtio/devices/virtio1/modalias", "virtio:d00000010v00001AF4\n");
	fixture_text("/sys/bus/pci/devices/0000:00:01.0/modalias", "pci:v00001234d00001111sv00001AF4sd00001100bc03sc00i00\n");
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_coldplug(ctx), 1);
	CHECK(pos("insmod virtio.ko;") && pos("insmod virtio_ring.ko;"));
	CHECK(pos("insmod virtio_ring.ko;") < pos("insmod virtio_blk.ko;"));
}

#define UEVENT(...) __VA_ARGS__, sizeof(__VA_ARGS__)

static void test_uevent_parse(void)
{
	static const char ok[] = "add@/devices/pci0000:00/virtio3/block/vda\0ACTION=add\0"
				 "DEVPATH=/devices/pci0000:00/virtio3/block/vda\0SUBSYSTEM=block\0"
				 "DEVNAME=vda\0DEVTYPE=disk\0SEQNUM=1200";
	struct nmbl_uevent ev;

	CHECK_INT(nmbl_uevent_parse(ok, sizeof(ok), &ev), 0);
	CHECK_STR(ev.action, "add");
	CHECK_STR(ev.subsystem, "block");
	CHECK_STR(ev.devname, "vda");
	CHECK(ev.modalias == NULL);
	/* Not NUL-terminated, no header, no ACTION, empty. */
	CHECK_INT(nmbl_uevent_parse(ok, sizeof(ok) - 1, &ev), -EBADMSG);
	CHECK_INT(nmbl_uevent_parse(UEVENT("ACTION=add\0SUBSYSTEM=block"), &ev), -EBADMSG);
	CHECK_INT(nmbl_uevent_parse(UEVENT("add@/devices/x\0SUBSYSTEM=block"), &ev), -EBADMSG);
	CHECK_INT(nmbl_uevent_parse("", 0, &ev), -EBADMSG);
	/* What udev's own daemon sends to its listeners is no kernel uevent. */
	CHECK_INT(nmbl_uevent_parse(UEVENT("libudev\0\xfe\xed\xca\xfe"), &ev), -EBADMSG);
}

/* A device the kernel adds gets its module; one it removes does not. */
static void test_uevent_add_loads_the_module(void)
{
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_handle_uevent(ctx, UEVENT("remove@/devices/virtio1\0ACTION=remove\0"
						  "SUBSYSTEM=virtio\0MODALIAS=virtio:d00000002v00001AF4")), 0);
	CHECK_STR(fake.calls, "");
	CHECK_INT(nmbl_handle_uevent(ctx, UEVENT("add@/devices/virtio1\0ACTION=add\0"
						  "SUBSYSTEM=virtio\0MODALIAS=virtio:d00000002v00001AF4")), 0);
	CHECK(pos("insmod virtio_blk.ko;"));
	/* No module for a device is no failure. */
	CHECK_INT(nmbl_handle_uevent(ctx, UEVENT("add@/devices/x\0ACTION=add\0"
						  "MODALIAS=pci:v0000FFFFd0000FFFF")), 0);
	CHECK_INT(nmbl_handle_uevent(ctx, UEVENT("nonsense")), -EBADMSG);
}

static bool link_is(const char *link, const char *target)
{
	char buf[256];
	ssize_t n = readlink(fixture_path(link), buf, sizeof(buf) - 1);

	if (n < 0)
		return false;
	buf[n] = '\0';
	return strcmp(buf, target) == 0;
}

/* An added block device gets udev's /dev/disk/by-* links, spelled as
 * udev spells them: root= finds it without udev. */
static void test_block_device_gets_udev_links(void)
{
	char cmd[1024];

	mkdir(fixture_path("/dev"), 0755);
	snprintf(cmd, sizeof(cmd),
		 "PATH=$PATH:/usr/sbin:/sbin mke2fs -q -F -t ext4 -L 'my root' "
		 "-U 7a46e7a1-5e7b-4a4c-9b8a-0123456789ab '%s' 2M >/dev/null",
		 fixture_path("/dev/vdq2"));
	if (system(cmd) != 0) {
		fprintf(stderr, "cannot make a file system: %s\n", cmd);
		exit(2);
	}
	CHECK_INT(nmbl_handle_uevent(ctx, UEVENT("add@/devices/virtio4/block/vdq/vdq2\0ACTION=add\0"
						  "SUBSYSTEM=block\0DEVNAME=vdq2\0DEVTYPE=partition")),
		  0);
	CHECK(link_is("/dev/disk/by-uuid/7a46e7a1-5e7b-4a4c-9b8a-0123456789ab", "../../vdq2"));
	CHECK(link_is("/dev/disk/by-label/my\\x20root", "../../vdq2"));
	/* A device with nothing libblkid knows gets none; a name with a
	 * slash is no device of /dev. */
	fixture_text("/dev/vdq3", "");
	CHECK_INT(nmbl_link_block_device(ctx, "vdq3"), 0);
	CHECK_INT(nmbl_link_block_device(ctx, "../vdq2"), -EINVAL);
	CHECK_INT(nmbl_link_block_device(ctx, "vdq9"), -ENOENT);
}

/* A partition is mounted once its file system's module is in, loaded
 * here rather than by the kernel starting modprobe. */
static void test_mount_loads_the_file_system_first(void)
{
	unsigned char sb[2048] = { 0 };
	char *mp = NULL;

	sb[1080] = 0x53;
	sb[1081] = 0xef;
	fixture_text("/sys/class/block/vdb/vdb2/start", "2048\n");
	fixture_write("/dev/vdb2", sb, sizeof(sb));
	remove(fixture_path("/sys/module/jbd2/initstate"));
	fake.calls[0] = '\0';
	CHECK_INT(nmbl_mount_partition(ctx, "/dev/vdb", 2048, &mp), 0);
	CHECK(pos("insmod ext4.ko;") && pos("mount /dev/vdb2 "));
	CHECK(pos("insmod ext4.ko;") < pos("mount /dev/vdb2 "));
	free(mp);
	CHECK_INT(nmbl_umount_all(ctx), 0);
}

int main(void)
{
	static void (*const tests[])(void) = {
		test_alias_loads_dependencies_first,
		test_candidate_that_cannot_load_gives_way_to_the_next,
		test_vfat_loads_its_character_sets,
		test_compressed_modules,
		test_loaded_modules_are_skipped,
		test_unknown_and_blacklisted,
		test_coldplug_loads_device_drivers,
		test_uevent_parse,
		test_uevent_add_loads_the_module,
		test_block_device_gets_udev_links,
		test_mount_loads_the_file_system_first,
		NULL,
	};

	make_tree();
	return unit_main_ctx(tests, &ctx);
}
