/* SPDX-License-Identifier: GPL-3.0-or-later */
#include <string.h>

#include "nmbl-private.h"

/* In terms of the kernel being booted: what nmbl_load() and the calls
 * before it return. */
NMBL_EXPORT const char *nmbl_strerror(int err)
{
	switch (-err) {
	case ENOENT:
		return "the file does not exist";
	case ENODATA:
		return "the kernel is not signed, and Secure Boot (lockdown) "
		       "boots only signed kernels";
	case ENOKEY:
		return "the kernel is signed by a key this machine does not "
		       "trust (not in the firmware's db, in MOK or built into "
		       "the running kernel)";
	case EKEYREJECTED:
		return "the kernel's signature does not match its contents: "
		       "the file was changed or damaged after it was signed";
	case EBADMSG:
		return "the kernel's signature is malformed";
	case ELIBBAD:
		/* What the kernel's PE parser says of a file cut short. */
		return "the kernel image is malformed or truncated";
	case ENOPKG:
		return "the kernel's signature uses an algorithm the running "
		       "kernel does not support";
	case ENOEXEC:
		return "the file is not a Linux kernel that can be booted "
		       "(wrong format, or truncated)";
	case EPERM:
		return "the running kernel's lockdown forbids booting this "
		       "kernel without a valid signature";
	case ENOSYS:
		return "the running kernel has no kexec_file_load (it was "
		       "built without CONFIG_KEXEC_FILE)";
	case EISDIR:
		return "the path is a directory, not a file";
	case EFBIG:
		return "the file is too large (nmbl holds at most 1 GiB of a kernel "
		       "or an initrd, or half of the memory when that is less)";
	case E2BIG:
		return "the command line is longer than the kernel accepts";
	case ENXIO:
		return "no such disk or partition is known to Linux";
	case ENOMEDIUM:
		return "the file system holds no init to start (/sbin/init, "
		       "or the program init= names)";
	case ENODEV:
		return "Linux cannot mount that file system";
	case EIO:
		return "the disk could not be read (a bad block, or a disk that "
		       "went away)";
	case EBUSY:
		return "the device is still mounted, and a second mount would "
		       "share that mount's options";
	case EXDEV:
		return "the path leads out of the partition it names";
	case EBADE:
		return "the TPM did not take the measurement (it failed or went away), "
		       "and nothing boots unmeasured";
	case EUNATCH:
		return "the firmware has a TPM that Linux cannot reach (no driver for it), "
		       "and nothing boots unmeasured";
	case EPROTONOSUPPORT:
		return "the TPM has a PCR bank of an algorithm nmbl cannot compute, "
		       "and nothing boots unmeasured";
	default:
		return strerror(-err);
	}
}
