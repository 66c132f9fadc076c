/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * The menu without root's powers.  grub-emu parses what the disks hold
 * with GRUB's own file system drivers: a memory bug in any of them must
 * reach nothing that matters.  So the menu runs as its own user, with no
 * capabilities (a uid other than 0 drops them all at exec), no way to
 * gain any (no_new_privs), and a seccomp filter that refuses, with EPERM,
 * every call that would reach past the user's files even where a kernel
 * bug or a lax permission would let it: loading or booting kernels,
 * rebooting, mounting, modules, keyrings, BPF, tracing other processes,
 * namespaces (in which a user gets capabilities again), io_uring (whose
 * operations seccomp never sees), the clock, the terminal's input queue.
 * A call made through another architecture's entry (int 0x80, x32) kills
 * the process, since a filter written for one table of numbers says
 * nothing of another.  What the menu needs root for, it asks nmbl's init
 * for (broker.c).
 */
#include <grp.h>
#include <linux/capability.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "nmbl-private.h"

#if defined(__x86_64__)
#define NMBL_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NMBL_AUDIT_ARCH AUDIT_ARCH_AARCH64
#elif defined(__riscv) && __riscv_xlen == 64
#define NMBL_AUDIT_ARCH AUDIT_ARCH_RISCV64
#else
#error "nmbl's seccomp filter does not know this architecture's system calls"
#endif

#define DENY(name) { #name, __NR_##name }

static const struct denied {
	const char *name;
	long nr;
} denied[] = {
	/* Booting and the machine's state. */
	DENY(kexec_file_load),
#ifdef __NR_kexec_load
	DENY(kexec_load),
#endif
	DENY(reboot),
	DENY(swapon),
	DENY(swapoff),
	DENY(settimeofday),
	DENY(clock_settime),
	DENY(clock_adjtime),
	DENY(adjtimex),
	DENY(sethostname),
	DENY(setdomainname),
	DENY(acct),
	DENY(syslog),
	/* File systems. */
	DENY(mount),
	DENY(umount2),
	DENY(pivot_root),
	DENY(chroot),
	DENY(fsopen),
	DENY(fsconfig),
	DENY(fsmount),
	DENY(fspick),
	DENY(move_mount),
	DENY(open_tree),
	DENY(mount_setattr),
	DENY(open_by_handle_at),
	DENY(name_to_handle_at),
	DENY(quotactl),
	DENY(fanotify_init),
	/* The kernel itself. */
	DENY(init_module),
	DENY(finit_module),
	DENY(delete_module),
	DENY(bpf),
	DENY(perf_event_open),
	DENY(userfaultfd),
	DENY(keyctl),
	DENY(add_key),
	DENY(request_key),
	DENY(personality),
	DENY(io_uring_setup),
	DENY(io_uring_enter),
	DENY(io_uring_register),
#ifdef __NR_iopl
	DENY(iopl),
	DENY(ioperm),
#endif
	/* Other processes. */
	DENY(ptrace),
	DENY(process_vm_readv),
	DENY(process_vm_writev),
	DENY(pidfd_getfd),
	DENY(kcmp),
	DENY(unshare),
	DENY(setns),
};

/* Namespaces are refused in clone() too (its flags are its first argument
 * on every architecture nmbl builds for); clone3() hides its flags in
 * memory a filter cannot read, so it is refused as unknown (ENOSYS),
 * which makes the C library fall back to clone(). */
#define NAMESPACE_FLAGS                                                                  \
	(CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS |      \
	 CLONE_NEWIPC | CLONE_NEWCGROUP | 0x00000080 /* CLONE_NEWTIME */)

#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))
#define STMT(code, k) ((struct sock_filter)BPF_STMT(code, k))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP(code, k, jt, jf))
#define RET_ERRNO(e) STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))

/* The filter: at most this many instructions (well within BPF_MAXINSNS). */
#define FILTER_MAX 160

/* The kinds of socket (address families) a contained program may open. */
struct sockets {
	size_t n;
	uint32_t family[5];
};
/* The menu speaks to its broker and nothing else: no network, not even
 * where nmbl was started from the network. */
static const struct sockets menu_sockets = { 1, { AF_UNIX } };
/* The helper that fetches for it: over IP (and routing's netlink, which
 * the C library's resolver asks). */
static const struct sockets fetcher_sockets = { 4, { AF_UNIX, AF_NETLINK, AF_INET, AF_INET6 } };
/* A disk tool: local sockets, device events' netlink. */
static const struct sockets tool_sockets = { 2, { AF_UNIX, AF_NETLINK } };
/* The DHCP client: IP, and its raw Ethernet socket (AF_PACKET). */
static const struct sockets dhcp_sockets = { 5, { AF_UNIX, AF_NETLINK, AF_INET, AF_INET6,
						  AF_PACKET } };

static size_t build_filter(struct sock_filter *f, const struct sockets *sockets)
{
	const size_t k = sockets->n;
	size_t n = 0;

	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, NMBL_AUDIT_ARCH, 1, 0);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#ifdef __x86_64__
	/* x32's numbers, the same table with a bit set. */
	f[n++] = JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
#endif
	for (size_t i = 0; i < ELEMENTSOF(denied); i++) {
		f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)denied[i].nr, 0, 1);
		f[n++] = RET_ERRNO(EPERM);
	}
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1);
	f[n++] = RET_ERRNO(ENOSYS);

	/* socket(): the families in SOCKETS, none other. */
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, (uint8_t)(k + 3));
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	for (size_t i = 0; i < k; i++)
		f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, sockets->family[i], (uint8_t)(k - i), 0);
	f[n++] = RET_ERRNO(EPERM);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	f[n++] = JUMP(BPF_JMP | BPF_JSET | BPF_K, NAMESPACE_FLAGS, 0, 1);
	f[n++] = RET_ERRNO(EPERM);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

	/* Typing into the terminal's input (TIOCSTI), and the Linux
	 * console's own requests (TIOCLINUX): the command is 32 bits. */
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 4);
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0);
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1);
	f[n++] = RET_ERRNO(EPERM);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	return n;
}

/* Every capability out of the bounding set but KEEP's N, and none
 * ambient: not even a set-uid program could give one back. */
static int drop_capabilities(const unsigned *keep, size_t n)
{
	for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++) {
		bool kept = false;

		for (size_t i = 0; i < n; i++)
			kept = kept || keep[i] == cap;
		if (!kept && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return -errno;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}

/* The filter on every thread, for good: no new privileges first. */
static int install_filter(const struct sockets *sockets)
{
	struct sock_filter filter[FILTER_MAX];
	struct sock_fprog prog = { .filter = filter };

	_Static_assert(2 * ELEMENTSOF(denied) + 24 + 4 + ELEMENTSOF(sockets->family) <= FILTER_MAX,
		       "filter");
	prog.len = (unsigned short)build_filter(filter, sockets);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		return errno ? -errno : -EPERM;
	return 0;
}

static int contain_as_menu(const struct sockets *sockets)
{
	gid_t gid = NMBL_MENU_GID;
	int r = drop_capabilities(NULL, 0);

	if (r < 0)
		return r;
	if (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(NMBL_MENU_UID, NMBL_MENU_UID, NMBL_MENU_UID) < 0)
		return -errno;
	/* Not root any more, for good: a uid of 0 again would give back what
	 * setresuid() took. */
	if (setuid(0) == 0 || getuid() != NMBL_MENU_UID || geteuid() != NMBL_MENU_UID)
		return -EPERM;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;
	return install_filter(sockets);
}

NMBL_EXPORT int nmbl_contain_menu(void)
{
	return contain_as_menu(&menu_sockets);
}

NMBL_EXPORT int nmbl_contain_fetcher(void)
{
	return contain_as_menu(&fetcher_sockets);
}

/* What a disk tool keeps of root's powers: setting up md arrays and
 * device-mapper volumes (CAP_SYS_ADMIN), making their nodes in /dev and
 * giving them their group (CAP_MKNOD, CAP_CHOWN), and locking its memory
 * while a volume is suspended, as LVM does (CAP_IPC_LOCK). */
static const unsigned tool_caps[] = { CAP_SYS_ADMIN, CAP_MKNOD, CAP_CHOWN, CAP_IPC_LOCK };

/* What root may write that would make the kernel run a program of its
 * choosing outside the filter (the module loader's path, the uevent
 * helper) or reach further (SysRq, module parameters): read-only in the
 * tool's namespace.  /sys/block, where md is set up, stays writable. */
static const char *const tool_read_only[] = {
	"/proc/sys", "/proc/sysrq-trigger", "/sys/kernel", "/sys/module", "/sys/firmware",
};

static int bind_read_only(const char *path)
{
	if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		return -errno;
	return 0;
}

/* The firmware's variables out of reach: a mount namespace without them,
 * which the filter keeps so (no mount, no namespace). */
static int hide_firmware_variables(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	if (umount2(NMBL_EFIVARS, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return -errno;
	return 0;
}

NMBL_EXPORT int nmbl_contain_tool(void)
{
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	int r;

	r = hide_firmware_variables();
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(tool_read_only); i++) {
		r = bind_read_only(tool_read_only[i]);
		if (r < 0)
			return r;
	}
	r = drop_capabilities(tool_caps, ELEMENTSOF(tool_caps));
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(tool_caps); i++) {
		data[CAP_TO_INDEX(tool_caps[i])].effective |= CAP_TO_MASK(tool_caps[i]);
		data[CAP_TO_INDEX(tool_caps[i])].permitted |= CAP_TO_MASK(tool_caps[i]);
	}
	if (syscall(__NR_capset, &head, data) < 0)
		return -errno;
	return install_filter(&tool_sockets);
}

/* What the DHCP client keeps: bringing a card up, giving it its address
 * and routes, and its network settings (CAP_NET_ADMIN), its raw sockets
 * (CAP_NET_RAW), the DHCP client's port for renewals
 * (CAP_NET_BIND_SERVICE). */
static const unsigned dhcp_caps[] = { CAP_NET_ADMIN, CAP_NET_RAW, CAP_NET_BIND_SERVICE };

NMBL_EXPORT int nmbl_contain_dhcp(void)
{
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { { 0 } };
	gid_t gid = NMBL_NET_GID;
	int r;

	r = hide_firmware_variables();
	if (r < 0)
		return r;
	r = drop_capabilities(dhcp_caps, ELEMENTSOF(dhcp_caps));
	if (r < 0)
		return r;
	/* Not root: no file of root's to write (the image's programs, the
	 * kernel's settings but the network's), no disk to open.  The
	 * capabilities kept through the change of user, and through exec as
	 * ambient ones. */
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return -errno;
	if (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(NMBL_NET_UID, NMBL_NET_UID, NMBL_NET_UID) < 0)
		return -errno;
	for (size_t i = 0; i < ELEMENTSOF(dhcp_caps); i++) {
		data[CAP_TO_INDEX(dhcp_caps[i])].effective |= CAP_TO_MASK(dhcp_caps[i]);
		data[CAP_TO_INDEX(dhcp_caps[i])].permitted |= CAP_TO_MASK(dhcp_caps[i]);
		data[CAP_TO_INDEX(dhcp_caps[i])].inheritable |= CAP_TO_MASK(dhcp_caps[i]);
	}
	if (syscall(__NR_capset, &head, data) < 0)
		return -errno;
	for (size_t i = 0; i < ELEMENTSOF(dhcp_caps); i++)
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, dhcp_caps[i], 0, 0) < 0)
			return -errno;
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		return -errno;
	if (setuid(0) == 0 || getuid() != NMBL_NET_UID || geteuid() != NMBL_NET_UID)
		return -EPERM;
	return install_filter(&dhcp_sockets);
}

static const struct {
	int family;
	const char *name;
} probe_sockets[] = {
	{ AF_INET, "socket(AF_INET)" },
	{ AF_INET6, "socket(AF_INET6)" },
	{ AF_PACKET, "socket(AF_PACKET)" },
};

NMBL_EXPORT int nmbl_contain_probe(void (*report)(void *data, const char *call, int err),
				   void *data)
{
	if (!report)
		return -EINVAL;
	/* Arguments that do nothing even where a call is let through, root
	 * or not: every one -1, an invalid descriptor, pointer, length and
	 * set of flags (personality(-1) only asks). */
	for (size_t i = 0; i < ELEMENTSOF(denied); i++) {
		long r = syscall(denied[i].nr, -1L, -1L, -1L, -1L, -1L, -1L);

		report(data, denied[i].name, r < 0 ? errno : 0);
	}
	/* CLONE_NEWNS with CLONE_FS is a combination clone() refuses. */
	report(data, "clone(CLONE_NEWUSER)",
	       syscall(__NR_clone, (long)(CLONE_NEWUSER | CLONE_NEWNS | CLONE_FS), 0L, 0L, 0L,
		       0L) < 0
		       ? errno
		       : 0);
	report(data, "ioctl(TIOCSTI)", ioctl(-1, TIOCSTI, "") < 0 ? errno : 0);
	/* The network, and Ethernet itself. */
	for (size_t i = 0; i < ELEMENTSOF(probe_sockets); i++) {
		int fd = socket(probe_sockets[i].family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		report(data, probe_sockets[i].name, fd < 0 ? errno : 0);
		if (fd >= 0)
			close(fd);
	}
	return (int)(ELEMENTSOF(denied) + 2 + ELEMENTSOF(probe_sockets));
}
