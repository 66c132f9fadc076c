/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * An initramfs image read as the kernel reads one (init/initramfs.c), so
 * that a distribution's initrd can be unpacked on the running kernel and
 * give the same files the kernel would have made of it: "newc" cpio
 * archives one after the other, zero bytes between them, any of them
 * compressed, and a compressed stream may hold several archives.  An
 * uncompressed archive starts on a 4-byte boundary of the image.
 *
 * The decompressors are the compression libraries themselves (zlib,
 * liblzma, libzstd, libbz2, liblz4, liblzo2): each says exactly how much
 * input its stream took (lzop's and lz4's framing is read here),
 * which is where the next archive starts; an archive library that reads
 * ahead cannot say that.  The cpio format here is only its 110-byte
 * header and two paddings.  No I/O: the entries go to a callback.
 */
#include <bzlib.h>
#include <errno.h>
#include <lz4.h>
#include <lzma.h>
#include <lzo/lzo1x.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "nmbl-private.h"

#define CPIO_HEADER_SIZE 110

static size_t align4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

static int hex8(const uint8_t *p, uint32_t *ret)
{
	uint32_t v = 0;

	for (int i = 0; i < 8; i++) {
		int d;

		if (p[i] >= '0' && p[i] <= '9')
			d = p[i] - '0';
		else if (p[i] >= 'a' && p[i] <= 'f')
			d = p[i] - 'a' + 10;
		else if (p[i] >= 'A' && p[i] <= 'F')
			d = p[i] - 'A' + 10;
		else
			return -EBADMSG;
		v = v << 4 | (uint32_t)d;
	}
	*ret = v;
	return 0;
}

/* One cpio archive at BUF: each entry to FN, up to and with its trailer;
 * *RET_USED the bytes it took, its paddings included. */
static int walk_archive(const uint8_t *buf, size_t len, nmbl_cpio_entry_fn fn, void *userdata,
			size_t *ret_used)
{
	size_t off = 0;

	for (;;) {
		struct nmbl_cpio_entry e = { 0 };
		uint32_t f[13];
		size_t name_end, data_end;
		int r;

		if (len - off < CPIO_HEADER_SIZE)
			return -EBADMSG;
		if (memcmp(buf + off, "070701", 6) != 0 && memcmp(buf + off, "070702", 6) != 0)
			return -EBADMSG;
		for (size_t i = 0; i < ELEMENTSOF(f); i++) {
			r = hex8(buf + off + 6 + 8 * i, &f[i]);
			if (r < 0)
				return r;
		}
		e.ino = f[0];
		e.mode = f[1];
		e.uid = f[2];
		e.gid = f[3];
		e.nlink = f[4];
		e.mtime = f[5];
		e.size = f[6];
		e.dev_major = f[7];
		e.dev_minor = f[8];
		e.rdev_major = f[9];
		e.rdev_minor = f[10];
		/* f[11]: the name's size with its NUL; f[12]: a checksum
		 * ("070702"), which the kernel does not check either. */
		if (f[11] == 0 || f[11] > len - off - CPIO_HEADER_SIZE)
			return -EBADMSG;
		e.name = (const char *)buf + off + CPIO_HEADER_SIZE;
		if (e.name[f[11] - 1] != '\0' || strlen(e.name) != f[11] - 1)
			return -EBADMSG;
		name_end = align4(off + CPIO_HEADER_SIZE + f[11]);
		if (name_end > len)
			return -EBADMSG;
		if (strcmp(e.name, NMBL_CPIO_TRAILER) == 0) {
			/* Where the kernel forgets the archive's hard links. */
			r = fn(&(struct nmbl_cpio_entry){ .name = e.name }, userdata);
			if (r < 0)
				return r;
			*ret_used = name_end;
			return 0;
		}
		if (e.size > len - name_end)
			return -EBADMSG;
		e.data = buf + name_end;
		data_end = name_end + e.size;
		r = fn(&e, userdata);
		if (r < 0)
			return r;
		/* The last entry's data may end the buffer without padding. */
		off = align4(data_end) <= len ? align4(data_end) : len;
	}
}

/* Archives and zero bytes filling BUF, as a compressed stream gives them. */
static int walk_stream(const uint8_t *buf, size_t len, nmbl_cpio_entry_fn fn, void *userdata)
{
	size_t off = 0;

	while (off < len) {
		size_t used;
		int r;

		if (buf[off] == '\0') {
			off++;
			continue;
		}
		if (buf[off] != '0')
			return -EBADMSG; /* the kernel: "junk within compressed archive" */
		r = walk_archive(buf + off, len - off, fn, userdata, &used);
		if (r < 0)
			return r;
		off += used;
	}
	return 0;
}

static int bzip2_step(void *stream, uint8_t *out, size_t room, size_t *ret_written, bool *ret_end)
{
	bz_stream *s = stream;
	int b;

	s->next_out = (char *)out;
	s->avail_out = nmbl_room32(room);
	b = BZ2_bzDecompress(s);
	*ret_written = (size_t)((uint8_t *)s->next_out - out);
	*ret_end = b == BZ_STREAM_END;
	if (b == BZ_MEM_ERROR)
		return -ENOMEM;
	if (b != BZ_OK && b != BZ_STREAM_END)
		return -EBADMSG;
	if (b == BZ_OK && s->avail_in == 0 && s->avail_out > 0)
		return -EBADMSG; /* cut short */
	return 0;
}

static int bunzip2(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *size,
		   size_t *used)
{
	bz_stream s = { 0 };
	int r;

	if (BZ2_bzDecompressInit(&s, 0, 0) != BZ_OK)
		return -ENOMEM;
	s.next_in = (char *)in;
	s.avail_in = nmbl_room32(len);
	r = nmbl_decode(bzip2_step, &s, max, out, size);
	*used = (size_t)s.total_in_hi32 << 32 | s.total_in_lo32;
	BZ2_bzDecompressEnd(&s);
	return r;
}

/* lz4's legacy frames, which "lz4 -l" writes and the kernel reads: the
 * magic number, then blocks of at most 8 MiB, each after its compressed
 * size; another magic number may come between.  The format marks no end:
 * the stream ends with the image, or at a size of zero (padding). */
#define LZ4_LEGACY_MAGIC 0x184c2102u
#define LZ4_LEGACY_BLOCK (8u << 20)

static int unlz4(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *size,
		 size_t *used)
{
	size_t off = 4, cap = 0, room;

	while (len - off >= 4) {
		uint32_t block = nmbl_le32(in + off);
		int n, r;

		if (block == LZ4_LEGACY_MAGIC) {
			off += 4;
			continue;
		}
		if (block == 0)
			break;
		off += 4;
		if (block > (uint32_t)LZ4_compressBound(LZ4_LEGACY_BLOCK) || block > len - off)
			return -EBADMSG;
		/* Room for a whole block, or for what is left below MAX. */
		room = max - *size < LZ4_LEGACY_BLOCK ? max - *size : LZ4_LEGACY_BLOCK;
		if (room == 0)
			return -EFBIG;
		while (cap - *size < room) {
			r = nmbl_grow(out, &cap, cap, max);
			if (r < 0)
				return r;
		}
		n = LZ4_decompress_safe((const char *)in + off, (char *)*out + *size, (int)block,
					(int)room);
		if (n < 0)
			return room < LZ4_LEGACY_BLOCK ? -EFBIG : -EBADMSG;
		*size += (size_t)n;
		off += block;
	}
	*used = off;
	return 0;
}

/*
 * lzop's format as the kernel reads it (lib/decompress_unlzo.c): a header
 * (its magic; versions and method; the level from version 0x0940 on; flags,
 * and a filter's word when they say so; mode and time, the time's high
 * half from 0x0940 on; a name; a checksum), then blocks: the size
 * decompressed (0 ends the stream, at most 256 KiB), the size compressed
 * (equal when stored), one checksum word, the bytes.  Checksums are not
 * checked, as the kernel does not.
 */
#define LZOP_MAGIC_SIZE 9
#define LZOP_HAS_FILTER 0x800u
#define LZOP_BLOCK (256u << 10)

static const uint8_t lzop_magic[LZOP_MAGIC_SIZE] = { 0x89, 'L', 'Z', 'O', 0x00, '\r', '\n', 0x1a,
						     '\n' };

static int lzop_header(const uint8_t *in, size_t len, size_t *used)
{
	size_t off = LZOP_MAGIC_SIZE;
	uint16_t version;

	if (len < off + 7 + 4 || memcmp(in, lzop_magic, off) != 0)
		return -EBADMSG;
	version = nmbl_be16(in + off);
	off += 7 + (version >= 0x0940);
	if (len - off < 4)
		return -EBADMSG;
	off += nmbl_be32(in + off) & LZOP_HAS_FILTER ? 8 : 4;
	off += 8 + (version >= 0x0940 ? 4 : 0);
	if (off >= len || len - off - 1 < (size_t)in[off] + 4)
		return -EBADMSG;
	*used = off + 1 + in[off] + 4;
	return 0;
}

static int unlzop(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *size,
		  size_t *used)
{
	size_t off, cap = 0;
	int r;

	r = lzop_header(in, len, &off);
	if (r < 0)
		return r;
	if (lzo_init() != LZO_E_OK)
		return -ENOMEM;
	for (;;) {
		uint32_t dst, src;
		lzo_uint n;

		if (len - off < 4)
			return -EBADMSG;
		dst = nmbl_be32(in + off);
		off += 4;
		if (dst == 0)
			break;
		if (dst > LZOP_BLOCK || len - off < 8)
			return -EBADMSG;
		src = nmbl_be32(in + off);
		off += 8;
		if (src == 0 || src > dst || src > len - off)
			return -EBADMSG;
		if (dst > max - *size)
			return -EFBIG;
		while (cap - *size < dst) {
			r = nmbl_grow(out, &cap, cap, max);
			if (r < 0)
				return r;
		}
		n = dst;
		if (src == dst)
			memcpy(*out + *size, in + off, dst);
		else if (lzo1x_decompress_safe(in + off, src, *out + *size, &n, NULL) != LZO_E_OK ||
			 n != dst)
			return -EBADMSG;
		*size += dst;
		off += src;
	}
	*used = off;
	return 0;
}

int nmbl_initramfs_walk(const void *image, size_t len, size_t max_unpacked,
				    nmbl_cpio_entry_fn fn, void *userdata)
{
	const uint8_t *buf = image;
	size_t off = 0, unpacked = 0;

	if (!image && len)
		return -EINVAL;
	if (!fn)
		return -EINVAL;
	while (off < len) {
		_cleanup_free_ uint8_t *out = NULL;
		size_t size = 0, used = 0;
		enum nmbl_compression c;
		int r;

		if (buf[off] == '\0') {
			off++;
			continue;
		}
		if (buf[off] == '0' && (off & 3) == 0) {
			r = walk_archive(buf + off, len - off, fn, userdata, &used);
			if (r < 0)
				return r;
			off += used;
			continue;
		}
		c = nmbl_compression_of(buf + off, len - off);
		switch (c) {
		case NMBL_GZIP:
			r = nmbl_gunzip(buf + off, len - off, max_unpacked - unpacked, &out, &size, &used);
			break;
		case NMBL_XZ:
		case NMBL_LZMA:
			r = nmbl_unxz(buf + off, len - off, c == NMBL_LZMA, max_unpacked - unpacked, &out, &size,
				 &used);
			break;
		case NMBL_ZSTD:
			r = nmbl_unzstd(buf + off, len - off, max_unpacked - unpacked, &out, &size, &used);
			break;
		case NMBL_BZIP2:
			r = bunzip2(buf + off, len - off, max_unpacked - unpacked, &out, &size, &used);
			break;
		case NMBL_LZ4:
			r = unlz4(buf + off, len - off, max_unpacked - unpacked, &out, &size, &used);
			break;
		case NMBL_LZOP:
			r = unlzop(buf + off, len - off, max_unpacked - unpacked, &out, &size, &used);
			break;
		default:
			return -EBADMSG; /* the kernel: "invalid magic at start of compressed archive" */
		}
		if (r < 0)
			return r;
		unpacked += size;
		r = walk_stream(out, size, fn, userdata);
		if (r < 0)
			return r;
		off += used;
	}
	return 0;
}
