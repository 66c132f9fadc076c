/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * Whole compressed streams decompressed in memory through the compression
 * libraries (zlib, liblzma, libzstd), each within a limit: the gzip, xz
 * and zstd that both the initramfs reader (initramfs.c, which adds bzip2,
 * lz4 and lzop) and the module loader (compressed modules) take.  Apart
 * from the initramfs reader, so that what loads a module does not link
 * the rarer libraries.
 */
#include <errno.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "nmbl-private.h"

int nmbl_grow(uint8_t **out, size_t *cap, size_t size, size_t max)
{
	size_t want;
	uint8_t *p;

	if (size < *cap)
		return 0;
	if (*cap >= max)
		return -EFBIG;
	want = *cap ? *cap * 2 : 1 << 20;
	if (want > max)
		want = max;
	p = realloc(*out, want);
	if (!p)
		return -ENOMEM;
	*out = p;
	*cap = want;
	return 0;
}

int nmbl_decode(nmbl_decode_step_fn step, void *stream, size_t max, uint8_t **out, size_t *size)
{
	size_t cap = 0;

	for (bool end = false; !end;) {
		size_t written;
		int r;

		r = nmbl_grow(out, &cap, *size, max);
		if (r < 0)
			return r;
		r = step(stream, *out + *size, cap - *size, &written, &end);
		*size += written;
		if (r < 0)
			return r;
	}
	return 0;
}

unsigned nmbl_room32(size_t room)
{
	return room > UINT32_MAX ? UINT32_MAX : (unsigned)room;
}

static int gzip_step(void *stream, uint8_t *out, size_t room, size_t *ret_written, bool *ret_end)
{
	z_stream *s = stream;
	int z;

	s->next_out = out;
	s->avail_out = nmbl_room32(room);
	z = inflate(s, Z_NO_FLUSH);
	*ret_written = (size_t)(s->next_out - out);
	*ret_end = z == Z_STREAM_END;
	if (z == Z_MEM_ERROR)
		return -ENOMEM;
	/* Out of input with room left: the stream was cut short. */
	if (z != Z_OK && z != Z_STREAM_END && !(z == Z_BUF_ERROR && s->avail_out == 0))
		return -EBADMSG;
	return 0;
}

int nmbl_gunzip(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *size,
		  size_t *used)
{
	z_stream s = { 0 };
	int r;

	/* A gzip member (15 bits of window, 16: its header and trailer). */
	if (inflateInit2(&s, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	s.next_in = (Bytef *)in;
	s.avail_in = nmbl_room32(len);
	r = nmbl_decode(gzip_step, &s, max, out, size);
	*used = s.total_in;
	inflateEnd(&s);
	return r;
}

/* What the xz and lzma decoders may allocate: a header asks for a
 * dictionary of up to 4 GiB; xz -9 needs 65 MiB. */
#define XZ_MEMLIMIT (128u << 20)

static int xz_step(void *stream, uint8_t *out, size_t room, size_t *ret_written, bool *ret_end)
{
	lzma_stream *s = stream;
	lzma_ret x;

	s->next_out = out;
	s->avail_out = room;
	x = lzma_code(s, LZMA_FINISH);
	*ret_written = (size_t)(s->next_out - out);
	*ret_end = x == LZMA_STREAM_END;
	if (x == LZMA_MEM_ERROR)
		return -ENOMEM;
	if (x == LZMA_MEMLIMIT_ERROR)
		return -EFBIG;
	if (x != LZMA_OK && x != LZMA_STREAM_END && !(x == LZMA_BUF_ERROR && s->avail_out == 0))
		return -EBADMSG;
	return 0;
}

int nmbl_unxz(const uint8_t *in, size_t len, bool alone, size_t max, uint8_t **out,
		size_t *size, size_t *used)
{
	lzma_stream s = LZMA_STREAM_INIT;
	lzma_ret x;
	int r;

	x = alone ? lzma_alone_decoder(&s, XZ_MEMLIMIT) : lzma_stream_decoder(&s, XZ_MEMLIMIT, 0);
	if (x != LZMA_OK)
		return -ENOMEM;
	s.next_in = in;
	s.avail_in = len;
	r = nmbl_decode(xz_step, &s, max, out, size);
	*used = (size_t)s.total_in;
	lzma_end(&s);
	return r;
}

static const uint8_t zstd_magic[] = { 0x28, 0xb5, 0x2f, 0xfd };

int nmbl_unzstd(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *size,
		  size_t *used)
{
	ZSTD_inBuffer input = { in, len, 0 };
	ZSTD_DStream *s = ZSTD_createDStream();
	size_t cap = 0, z = 1;
	int r;

	if (!s)
		return -ENOMEM;
	/* Frame after frame, as zstd writes a large input. */
	for (;;) {
		r = nmbl_grow(out, &cap, *size, max);
		if (r < 0)
			goto end;
		ZSTD_outBuffer output = { *out, cap, *size };
		z = ZSTD_decompressStream(s, &output, &input);
		*size = output.pos;
		if (ZSTD_isError(z)) {
			r = ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
			goto end;
		}
		if (z == 0 && (len - input.pos < sizeof(zstd_magic) ||
			       memcmp(in + input.pos, zstd_magic, sizeof(zstd_magic)) != 0))
			break;
		if (z != 0 && input.pos == len && output.pos < output.size) {
			r = -EBADMSG; /* truncated */
			goto end;
		}
	}
	*used = input.pos;
	r = 0;
end:
	ZSTD_freeDStream(s);
	return r;
}

/* The kernel's magic numbers (lib/decompress.c). */
enum nmbl_compression nmbl_compression_of(const uint8_t *p, size_t len)
{
	static const struct {
		uint8_t magic[6];
		size_t len;
		enum nmbl_compression c;
	} known[] = {
		{ { 0x1f, 0x8b }, 2, NMBL_GZIP },
		{ { 0x1f, 0x9e }, 2, NMBL_GZIP },
		{ { 0xfd, '7', 'z', 'X', 'Z', 0x00 }, 6, NMBL_XZ },
		{ { 0x5d, 0x00, 0x00 }, 3, NMBL_LZMA },
		{ { 0x28, 0xb5, 0x2f, 0xfd }, 4, NMBL_ZSTD },
		{ { 'B', 'Z', 'h' }, 3, NMBL_BZIP2 },
		{ { 0x02, 0x21, 0x4c, 0x18 }, 4, NMBL_LZ4 },		/* legacy frames */
		{ { 0x89, 'L' }, 2, NMBL_LZOP },
	};

	for (size_t i = 0; i < ELEMENTSOF(known); i++)
		if (len >= known[i].len && memcmp(p, known[i].magic, known[i].len) == 0)
			return known[i].c;
	return NMBL_UNCOMPRESSED;
}

int nmbl_decompress(const void *in, size_t len, size_t max, void **ret, size_t *ret_len)
{
	_cleanup_free_ uint8_t *out = NULL;
	size_t size = 0, used = 0;
	int r;

	if (!in || !ret || !ret_len)
		return -EINVAL;
	switch (nmbl_compression_of(in, len)) {
	case NMBL_GZIP:
		r = nmbl_gunzip(in, len, max, &out, &size, &used);
		break;
	case NMBL_XZ:
		r = nmbl_unxz(in, len, false, max, &out, &size, &used);
		break;
	case NMBL_ZSTD:
		r = nmbl_unzstd(in, len, max, &out, &size, &used);
		break;
	default:
		return -EBADMSG;
	}
	if (r < 0)
		return r;
	/* One stream, all of it: what follows would be lost. */
	if (used != len)
		return -EBADMSG;
	*ret = TAKE_PTR(out);
	*ret_len = size;
	return 0;
}
