/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Module loading against a modules tree made from the real kernel's
 * modules (KERNEL_MODULES, copied and indexed with depmod), with the
 * insertion faked: what would be loaded, in which order.
 */
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

#include "fake-sys.h"
#include "nmbl-private.h"
#include "unit.h"

static const char *const modules[] = {
	"fs/ext4/ext4.ko", "fs/jbd2/jbd2.ko", "fs/mbcache.ko", "lib/crc16.ko",
	"crypto/crc32c_generic.ko", "drivers/block/virtio_blk.ko",
	"drivers/virtio/virtio.ko", "drivers/virtio/virtio_ring.ko",
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
	for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++)
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n,
			      "mkdir -p \"$d/$(dirname %s)\"; cp '%s/%s' \"$d/%s\"; ",
			      modules[i], KERNEL_MODULES, modules[i], modules[i]);
	snprintf(cmd + n, sizeof(cmd) - (size_t)n,
		 "cd \"$d/..\"; touch modules.order modules.builtin modules.builtin.modinfo; "
		 "PATH=$PATH:/usr/sbin:/sbin depmod -b '%s' '%s'", fixture_root(), u.release);
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
	fixture_text("/etc/modprobe.d/test.conf", "blacklist virtio_blk\n");
	CHECK_INT(nmbl_load_module(ctx, "virtio:d00000002v00001AF4"), 0);
	CHECK_STR(fake.calls, "");
	remove(fixture_path("/etc/modprobe.d/test.conf"));
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
		test_loaded_modules_are_skipped,
		test_unknown_and_blacklisted,
		test_coldplug_loads_device_drivers,
		test_mount_loads_the_file_system_first,
		NULL,
	};

	make_tree();
	return unit_main_ctx(tests, &ctx);
}
