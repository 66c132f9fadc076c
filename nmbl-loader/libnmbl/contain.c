/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * What parses untrusted bytes runs without root's powers.  grub-emu parses
 * what the disks hold with GRUB's own file system drivers, mdadm and LVM's
 * tool parse the disks' metadata, dhcpcd and the fetcher what the network
 * sends: a memory bug in any of them must reach nothing that matters.  So
 * each runs as a user of its own, with only the capabilities its job needs
 * (none for the menu and the fetcher), no way to gain any (no_new_privs),
 * and a seccomp filter that lets through what ordinary programs do with
 * their own files, memory, processes, clocks and sockets, and refuses
 * everything else: with EPERM, by name, every call that would reach past
 * the process even where a kernel bug or a lax permission would let it
 * (loading or booting kernels, rebooting, mounting, modules, keyrings,
 * BPF, tracing other processes, namespaces, in which a user gets
 * capabilities again, io_uring, whose operations seccomp never sees, the
 * clock, the terminal's input queue); with ENOSYS, as a kernel without it
 * would, any call the list does not name, those newer than it among them
 * (open_tree_attr, say, which clones a read-only mount writable).  A call
 * made through another architecture's entry (int 0x80, x32) kills the
 * process, since a filter written for one table of numbers says nothing
 * of another.  What the menu needs root for, it asks nmbl's init for
 * (broker.c).
 */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "nmbl-private.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)
DEFINE_TRIVIAL_CLEANUP_FUNC(FILE *, fclose)

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

/*
 * What ordinary programs do, let through: their own files (by descriptor
 * and by name), memory, threads and children, signals, clocks and timers,
 * waiting on descriptors, sockets (of the families each role may open),
 * System V IPC (in an IPC namespace of the helper's own, nmbl_spawn()).
 * Not listed, refused with ENOSYS: setting extended attributes, memory
 * policies, landlock, name_to_handle, and everything newer than this list.
 * ioctl(), socket(), clone() and mknod() are let through after the checks
 * of their arguments below.
 */
#define ALLOW(name) __NR_##name
static const long allowed[] = {
	/* Files, by descriptor. */
	ALLOW(read), ALLOW(write), ALLOW(readv), ALLOW(writev), ALLOW(pread64),
	ALLOW(pwrite64), ALLOW(preadv), ALLOW(pwritev), ALLOW(preadv2), ALLOW(pwritev2),
	ALLOW(lseek), ALLOW(close), ALLOW(close_range), ALLOW(dup), ALLOW(dup3), ALLOW(fcntl),
	ALLOW(flock), ALLOW(pipe2), ALLOW(fstat), ALLOW(fstatfs), ALLOW(ftruncate),
	ALLOW(fallocate), ALLOW(fsync), ALLOW(fdatasync), ALLOW(sync), ALLOW(syncfs),
	ALLOW(sync_file_range), ALLOW(fadvise64), ALLOW(readahead), ALLOW(sendfile),
	ALLOW(splice), ALLOW(tee), ALLOW(copy_file_range), ALLOW(memfd_create),
	ALLOW(getdents64), ALLOW(fchdir), ALLOW(fchmod), ALLOW(fchown), ALLOW(fgetxattr),
	ALLOW(flistxattr),
	/* Linux's own asynchronous reads and writes of the files a process
	 * opened (LVM reads the disks so): not io_uring, whose operations no
	 * filter sees. */
	ALLOW(io_setup), ALLOW(io_destroy), ALLOW(io_submit), ALLOW(io_cancel),
	ALLOW(io_getevents), ALLOW(io_pgetevents),
	/* Files, by name (relative to a descriptor). */
	ALLOW(openat), ALLOW(openat2), ALLOW(newfstatat), ALLOW(statx), ALLOW(statfs),
	ALLOW(faccessat), ALLOW(faccessat2), ALLOW(readlinkat), ALLOW(getcwd), ALLOW(chdir),
	ALLOW(mkdirat), ALLOW(unlinkat), ALLOW(renameat), ALLOW(renameat2), ALLOW(linkat),
	ALLOW(symlinkat), ALLOW(fchmodat), ALLOW(fchownat), ALLOW(utimensat), ALLOW(truncate),
	ALLOW(umask), ALLOW(getxattr), ALLOW(lgetxattr), ALLOW(listxattr), ALLOW(llistxattr),
	ALLOW(inotify_init1), ALLOW(inotify_add_watch), ALLOW(inotify_rm_watch),
	/* Memory. */
	ALLOW(brk), ALLOW(mmap), ALLOW(munmap), ALLOW(mremap), ALLOW(mprotect), ALLOW(madvise),
	ALLOW(msync), ALLOW(mincore), ALLOW(mlock), ALLOW(mlock2), ALLOW(munlock),
	ALLOW(mlockall), ALLOW(munlockall), ALLOW(membarrier),
	/* Threads, children, the process's own settings. */
	ALLOW(execve), ALLOW(execveat), ALLOW(exit), ALLOW(exit_group), ALLOW(wait4),
	ALLOW(waitid), ALLOW(set_tid_address), ALLOW(set_robust_list), ALLOW(get_robust_list),
	ALLOW(rseq), ALLOW(futex), ALLOW(prctl), ALLOW(seccomp), ALLOW(capget), ALLOW(capset),
	ALLOW(getpid), ALLOW(getppid), ALLOW(gettid), ALLOW(getuid), ALLOW(geteuid),
	ALLOW(getgid), ALLOW(getegid), ALLOW(getresuid), ALLOW(getresgid), ALLOW(getgroups),
	ALLOW(setuid), ALLOW(setgid), ALLOW(setreuid), ALLOW(setregid), ALLOW(setresuid),
	ALLOW(setresgid), ALLOW(setgroups), ALLOW(setfsuid), ALLOW(setfsgid), ALLOW(getpgid),
	ALLOW(getsid), ALLOW(setsid), ALLOW(setpgid), ALLOW(getrlimit), ALLOW(setrlimit),
	ALLOW(prlimit64), ALLOW(getrusage), ALLOW(getpriority), ALLOW(setpriority),
	ALLOW(sched_yield), ALLOW(sched_getaffinity), ALLOW(sched_setaffinity),
	ALLOW(sched_getparam), ALLOW(sched_getscheduler), ALLOW(sched_get_priority_max),
	ALLOW(sched_get_priority_min), ALLOW(ioprio_get), ALLOW(ioprio_set), ALLOW(getcpu),
	ALLOW(sysinfo), ALLOW(uname), ALLOW(getrandom), ALLOW(restart_syscall),
	/* Signals, clocks, timers, waiting. */
	ALLOW(rt_sigaction), ALLOW(rt_sigprocmask), ALLOW(rt_sigreturn), ALLOW(rt_sigsuspend),
	ALLOW(rt_sigpending), ALLOW(rt_sigtimedwait), ALLOW(rt_sigqueueinfo),
	ALLOW(rt_tgsigqueueinfo), ALLOW(sigaltstack), ALLOW(kill), ALLOW(tkill), ALLOW(tgkill),
	ALLOW(pidfd_open), ALLOW(pidfd_send_signal), ALLOW(nanosleep), ALLOW(clock_nanosleep),
	ALLOW(clock_gettime), ALLOW(clock_getres), ALLOW(gettimeofday), ALLOW(times),
	ALLOW(getitimer), ALLOW(setitimer), ALLOW(timer_create), ALLOW(timer_settime),
	ALLOW(timer_gettime), ALLOW(timer_getoverrun), ALLOW(timer_delete),
	ALLOW(timerfd_create), ALLOW(timerfd_settime), ALLOW(timerfd_gettime), ALLOW(eventfd2),
	ALLOW(signalfd4), ALLOW(ppoll), ALLOW(pselect6), ALLOW(epoll_create1), ALLOW(epoll_ctl),
	ALLOW(epoll_pwait), ALLOW(epoll_pwait2),
	/* Sockets. */
	ALLOW(socketpair), ALLOW(bind), ALLOW(connect), ALLOW(listen), ALLOW(accept4),
	ALLOW(getsockname), ALLOW(getpeername), ALLOW(sendto), ALLOW(recvfrom), ALLOW(sendmsg),
	ALLOW(recvmsg), ALLOW(sendmmsg), ALLOW(recvmmsg), ALLOW(setsockopt), ALLOW(getsockopt),
	ALLOW(shutdown),
	/* System V IPC, in the helper's own namespace. */
	ALLOW(semget), ALLOW(semop), ALLOW(semtimedop), ALLOW(semctl), ALLOW(shmget),
	ALLOW(shmat), ALLOW(shmdt), ALLOW(shmctl),
#ifdef __NR_open
	/* The older calls of architectures that have them (x86_64). */
	ALLOW(open), ALLOW(creat), ALLOW(stat), ALLOW(lstat), ALLOW(access), ALLOW(readlink),
	ALLOW(getdents), ALLOW(mkdir), ALLOW(rmdir), ALLOW(unlink), ALLOW(rename), ALLOW(link),
	ALLOW(symlink), ALLOW(chmod), ALLOW(chown), ALLOW(lchown), ALLOW(utime), ALLOW(utimes),
	ALLOW(futimesat), ALLOW(pipe), ALLOW(dup2), ALLOW(poll), ALLOW(select),
	ALLOW(epoll_create), ALLOW(epoll_wait), ALLOW(eventfd), ALLOW(signalfd),
	ALLOW(inotify_init), ALLOW(fork), ALLOW(vfork), ALLOW(pause), ALLOW(alarm), ALLOW(time),
	ALLOW(getpgrp), ALLOW(accept),
#endif
#ifdef __NR_arch_prctl
	ALLOW(arch_prctl),
#endif
#ifdef __NR_fchmodat2
	ALLOW(fchmodat2),
#endif
#ifdef __NR_futex_waitv
	ALLOW(futex_waitv),
#endif
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

/* The filter: at most this many instructions (BPF_MAXINSNS is 4096). */
#define FILTER_MAX 1024

/* What a contained process may do beyond the list: the kinds of socket
 * (address families) it may open, and the block devices whose nodes it
 * may make (by major number; no character device's, ever). */
struct role {
	size_t n_families;
	uint32_t family[5];
	size_t n_majors;
	uint32_t major[2];
};
/* The menu speaks to its broker and nothing else: no network, not even
 * where nmbl was started from the network. */
static const struct role menu_role = { 1, { AF_UNIX }, 0, { 0 } };
/* The helper that fetches for it: over IP (and routing's netlink, which
 * the C library's resolver asks). */
static const struct role fetcher_role = { 4, { AF_UNIX, AF_NETLINK, AF_INET, AF_INET6 }, 0,
					  { 0 } };
/* The DHCP client: IP, and its raw Ethernet socket (AF_PACKET). */
static const struct role dhcp_role = { 5, { AF_UNIX, AF_NETLINK, AF_INET, AF_INET6, AF_PACKET },
				       0, { 0 } };
/* A disk tool: local sockets, device events' netlink, and the nodes of md
 * arrays (mdadm opens an array through a node it makes) and of
 * device-mapper's volumes (LVM makes /dev/mapper's): tool_role(). */
#define MD_MAJOR 9

/* mknod() or mknodat(), call NR with its mode and device as arguments
 * MODE_ARG and DEV_ARG: a file, FIFO or socket let through, a block
 * device's node only of ROLE's majors, a character device's never. */
static size_t build_mknod(struct sock_filter *f, long nr, unsigned mode_arg, unsigned dev_arg,
			  const struct role *role)
{
	const uint8_t m = (uint8_t)role->n_majors;
	size_t n = 0;

	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)(8 + m));
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(mode_arg));
	f[n++] = STMT(BPF_ALU | BPF_AND | BPF_K, S_IFMT);
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, S_IFCHR, (uint8_t)(3 + m), 0);
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, S_IFBLK, 0, (uint8_t)(3 + m));
	/* The device number as the kernel takes it (new_decode_dev()). */
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(dev_arg));
	f[n++] = STMT(BPF_ALU | BPF_AND | BPF_K, 0xfff00);
	for (uint8_t i = 0; i < m; i++)
		f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, role->major[i] << 8, (uint8_t)(m - i), 0);
	f[n++] = RET_ERRNO(EPERM);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	return n;
}

static size_t build_filter(struct sock_filter *f, const struct role *role)
{
	const size_t k = role->n_families;
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

	/* socket(): the families in ROLE, none other. */
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, (uint8_t)(k + 3));
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	for (size_t i = 0; i < k; i++)
		f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, role->family[i], (uint8_t)(k - i), 0);
	f[n++] = RET_ERRNO(EPERM);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0));
	f[n++] = JUMP(BPF_JMP | BPF_JSET | BPF_K, NAMESPACE_FLAGS, 0, 1);
	f[n++] = RET_ERRNO(EPERM);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

	/* Typing into the terminal's input (TIOCSTI), and the Linux
	 * console's own requests (TIOCLINUX): the command is 32 bits. */
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 5);
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1));
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 1, 0);
	f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 0, 1);
	f[n++] = RET_ERRNO(EPERM);
	f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

	n += build_mknod(f + n, __NR_mknodat, 2, 3, role);
	/* Each build_mknod() reloaded the argument: the number again. */
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#ifdef __NR_mknod
	n += build_mknod(f + n, __NR_mknod, 1, 2, role);
	f[n++] = STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#endif
	for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
		f[n++] = JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)allowed[i], 0, 1);
		f[n++] = STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	f[n++] = RET_ERRNO(ENOSYS);
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

/* KEEP's N permitted and effective, and (INHERITABLE) inheritable: for
 * ambient ones, which outlive exec for a user other than root. */
static int set_capabilities(const unsigned *keep, size_t n, bool inheritable)
{
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { { 0 } };

	for (size_t i = 0; i < n; i++) {
		data[CAP_TO_INDEX(keep[i])].effective |= CAP_TO_MASK(keep[i]);
		data[CAP_TO_INDEX(keep[i])].permitted |= CAP_TO_MASK(keep[i]);
		if (inheritable)
			data[CAP_TO_INDEX(keep[i])].inheritable |= CAP_TO_MASK(keep[i]);
	}
	return syscall(__NR_capset, &head, data) < 0 ? -errno : 0;
}

/*
 * User and group UID, not root, keeping of root's capabilities only KEEP's
 * N: in the bounding set, and permitted, effective, inheritable and
 * ambient, so that they outlive the change of user and exec.  Not root
 * again, for good: a uid of 0 would give back what the change took.
 */
static int become(uid_t uid, const unsigned *keep, size_t n)
{
	gid_t gid = (gid_t)uid;
	int r = drop_capabilities(keep, n);

	if (r < 0)
		return r;
	if (n && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return -errno;
	if (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		return -errno;
	r = n ? set_capabilities(keep, n, true) : 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, keep[i], 0, 0) < 0)
			return -errno;
	if (n && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		return -errno;
	if (setuid(0) == 0 || getuid() != uid || geteuid() != uid)
		return -EPERM;
	/* No core dump, no ptrace or /proc/PID/mem of the process by the
	 * user until it executes its program (which sets it again: the
	 * programs nmbl starts set it themselves, where they can). */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

/* ROLE's filter on every thread, for good: no new privileges first. */
static int install_filter(const struct role *role)
{
	struct sock_filter filter[FILTER_MAX];
	struct sock_fprog prog = { .filter = filter };

	_Static_assert(2 * (ELEMENTSOF(denied) + ELEMENTSOF(allowed)) + 2 * 11 + 30 +
				       ELEMENTSOF(role->family) + 2 * ELEMENTSOF(role->major) <=
			       FILTER_MAX,
		       "filter");
	prog.len = (unsigned short)build_filter(filter, role);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		return errno ? -errno : -EPERM;
	return 0;
}

NMBL_EXPORT int nmbl_contain_menu(void)
{
	int r = become(NMBL_MENU_UID, NULL, 0);

	return r < 0 ? r : install_filter(&menu_role);
}

/* The fetcher's user is not the menu's: its group does not read the
 * disks, and the menu cannot reach into the process that has the
 * network. */
NMBL_EXPORT int nmbl_contain_fetcher(void)
{
	int r = become(NMBL_FETCH_UID, NULL, 0);

	return r < 0 ? r : install_filter(&fetcher_role);
}

/* What root may write that would make the kernel run a program of its
 * choosing outside the filter (the module loader's path, the uevent
 * helper) or reach further (SysRq, module parameters): read-only in the
 * tool's namespace.  /sys/block, where md is set up, stays writable. */
static const char *const tool_read_only[] = {
	"/proc/sys", "/proc/sysrq-trigger", "/sys/kernel", "/sys/module", "/sys/firmware",
};
/* But for where mdadm asks md for a new array by name. */
#define MD_NEW_ARRAY "/sys/module/md_mod/parameters/new_array"
/* How deep below /dev devices are hidden: /dev/bus/usb/BUS/DEVICE is the
 * deepest a kernel makes. */
#define HIDE_DEPTH 4
/* The character devices a tool may open: what every program may. */
static const char *const tool_char_devices[] = { "null", "zero", "full", "random", "urandom",
						 "mapper" };

/* PATH bound on itself (BIND: with what is mounted below it, MS_REC), then
 * with FLAGS (MS_RDONLY or none), no set-uid programs and no devices;
 * nothing where PATH is not. */
static int bind_self(const char *path, unsigned long bind, unsigned long flags)
{
	if (mount(path, path, NULL, MS_BIND | bind, NULL) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | flags | MS_NOSUID | MS_NODEV, NULL) < 0)
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

/* Every character device in /dev, in its folders too, but those any
 * program may open, /dev/null instead: the console, where a passphrase is
 * typed, the terminals, the TPM, the kernel's log, the watchdog, the
 * keyboards, USB devices (/dev/bus/usb, through which a disk on USB could
 * be written raw).  Root as the tool is, it would open them all. */
static int hide_char_devices(const char *dir, int depth)
{
	_cleanup_(closedirp) DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		bool kept = false;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		for (size_t i = 0; depth == 0 && i < ELEMENTSOF(tool_char_devices); i++)
			kept = kept || strcmp(de->d_name, tool_char_devices[i]) == 0;
		if (kept || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (S_ISDIR(st.st_mode) && depth < HIDE_DEPTH) {
			int r = hide_char_devices(path, depth + 1);

			if (r < 0)
				return r;
		} else if (S_ISCHR(st.st_mode) &&
			   mount("/dev/null", path, NULL, MS_BIND, NULL) < 0) {
			return -errno;
		}
	}
	return 0;
}

/* device-mapper's block major, which is the kernel's choice: from
 * /proc/devices once its module is loaded; 0 when it is not. */
static uint32_t dm_major(void)
{
	_cleanup_(fclosep) FILE *f = fopen("/proc/devices", "re");
	char line[128];
	bool block = false;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned major;
		char name[64];

		if (strncmp(line, "Block devices:", 14) == 0)
			block = true;
		else if (block && sscanf(line, "%u %63s", &major, name) == 2 &&
			 strcmp(name, "device-mapper") == 0)
			return major;
	}
	return 0;
}

/*
 * What a disk tool keeps of root's powers: setting up md arrays and
 * device-mapper volumes (CAP_SYS_ADMIN), making their nodes in /dev and
 * giving them their group (CAP_MKNOD, CAP_CHOWN), and locking its memory
 * while a volume is suspended, as LVM does (CAP_IPC_LOCK).
 */
static const unsigned tool_caps[] = { CAP_SYS_ADMIN, CAP_MKNOD, CAP_CHOWN, CAP_IPC_LOCK };

/*
 * A tool on a root it cannot write.  It stays uid 0, the one thing of
 * root's it keeps beside its capabilities: mdadm assembles nothing for any
 * other user ("must be super-user"), and md's sysfs files are root's.  So
 * in its mount namespace the image's file system (its programs,
 * /sbin/modprobe's place) is read-only, the kernel's settings too, and the
 * devices it has no business with (the console, the TPM, the kernel's
 * log) are /dev/null.  /dev, /run and a /tmp of its own stay writable:
 * mdadm makes an array's node in one of them; the filter lets it make no
 * node but an array's or a volume's.
 */
NMBL_EXPORT int nmbl_contain_tool(void)
{
	struct role role = { 2, { AF_UNIX, AF_NETLINK }, 1, { MD_MAJOR } };
	int r;

	role.major[1] = dm_major();
	role.n_majors += role.major[1] != 0;
	r = hide_firmware_variables();
	if (r < 0)
		return r;
	for (size_t i = 0; i < ELEMENTSOF(tool_read_only); i++) {
		r = bind_self(tool_read_only[i], MS_REC, MS_RDONLY);
		if (r < 0)
			return r;
	}
	r = bind_self(MD_NEW_ARRAY, 0, 0);
	if (r >= 0)
		r = hide_char_devices("/dev", 0);
	if (r < 0)
		return r;
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID, "mode=1777,size=1m") < 0 && errno != ENOENT)
		return -errno;
	if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
		return -errno;
	r = drop_capabilities(tool_caps, ELEMENTSOF(tool_caps));
	if (r >= 0)
		r = set_capabilities(tool_caps, ELEMENTSOF(tool_caps), false);
	return r < 0 ? r : install_filter(&role);
}

/* What the DHCP client keeps: bringing a card up, giving it its address
 * and routes, and its network settings (CAP_NET_ADMIN), its raw sockets
 * (CAP_NET_RAW), the DHCP client's port for renewals
 * (CAP_NET_BIND_SERVICE).  Not root: no file of root's to write (the
 * image's programs, the kernel's settings but the network's), no disk to
 * open. */
static const unsigned dhcp_caps[] = { CAP_NET_ADMIN, CAP_NET_RAW, CAP_NET_BIND_SERVICE };

NMBL_EXPORT int nmbl_contain_dhcp(void)
{
	int r = hide_firmware_variables();

	if (r >= 0)
		r = become(NMBL_NET_UID, dhcp_caps, ELEMENTSOF(dhcp_caps));
	return r < 0 ? r : install_filter(&dhcp_role);
}

#define NMBL_NR_OPEN_TREE_ATTR 467

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
	/* A character device's node, where no directory is (so that nothing
	 * is made where the call goes through): refused before the path is
	 * looked at. */
	report(data, "mknod(S_IFCHR)",
	       mknodat(AT_FDCWD, "/nonexistent/mem", S_IFCHR | 0600, makedev(1, 1)) < 0 ? errno : 0);
	/* A call newer than the filter's list (Linux 6.15, the same number on
	 * every architecture), which clones a mount with new attributes:
	 * refused as unknown. */
	report(data, "open_tree_attr",
	       syscall(NMBL_NR_OPEN_TREE_ATTR, -1L, -1L, -1L, -1L, -1L, -1L) < 0 ? errno : 0);
	return (int)(ELEMENTSOF(denied) + 4 + ELEMENTSOF(probe_sockets));
}
