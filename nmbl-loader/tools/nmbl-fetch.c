/* SPDX-License-Identifier: GPL-3.0-or-later */
/*
 * nmbl-fetch [--max-size BYTES] [--timeout SECONDS] [--stall SECONDS]
 *            [--ca-file FILE] [--progress-fd FD] URL
 *
 * One file from the network (tftp://, http://, https://) to standard
 * output, which must be a file (nmbl's init gives a memory file): what a
 * network boot reads, a grub.cfg or a kernel, through the kernel's network
 * stack and libcurl.  nmbl's init runs it through nmbl_fetch() in a
 * process of its own, so that what parses the network's bytes (HTTP,
 * TLS, TFTP) is not process 1 and can be ended at any time (Esc).
 *
 * Bounded in every way a server could stretch it: at most --max-size
 * bytes (refused up front when the server announces more), --timeout
 * seconds in all, and --stall seconds without a byte.  Redirects are
 * followed between HTTP and HTTPS only, never from HTTPS to HTTP.  HTTPS
 * trusts the certificates of --ca-file and no others; without it HTTPS
 * is refused.  Proxies named in the environment are not used.
 *
 * Progress goes to --progress-fd as lines "DONE TOTAL" (bytes; TOTAL 0
 * while unknown).  A failure is one sentence on standard error.
 *
 * Exit status (NMBL_FETCH_* in libnmbl.h): 0 the file was written whole;
 * NMBL_FETCH_NOT_FOUND the server has no such file; NMBL_FETCH_FAILED any
 * other failure; NMBL_FETCH_USAGE a wrong command line.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "libnmbl.h"
#include "macro.h"

/* TFTP's block size asked for: the largest that an Ethernet frame carries
 * unfragmented (RFC 2348); a server answers with its own if smaller. */
#define TFTP_BLOCK 1468
#define PROGRESS_EVERY_MS 200

struct fetch {
	const char *url;
	uint64_t max;
	uint64_t written;
	int progress_fd;
	long long progress_at;
	int write_errno;
	/* Ended when no byte came for STALL_MS (curl's low-speed limit
	 * averages over seconds, and so says it late). */
	long long stall_ms;
	long long byte_at;
	uint64_t bytes_then;
	bool stalled;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t on_data(char *data, size_t size, size_t n, void *userdata)
{
	struct fetch *f = userdata;
	size_t len = size * n, done = 0;

	if (f->written + len > f->max) {
		f->write_errno = EFBIG;
		return CURL_WRITEFUNC_ERROR;
	}
	while (done < len) {
		ssize_t w = write(STDOUT_FILENO, data + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			f->write_errno = w < 0 ? errno : EIO;
			return CURL_WRITEFUNC_ERROR;
		}
		done += (size_t)w;
	}
	f->written += len;
	return len;
}

static void report(struct fetch *f, uint64_t done, uint64_t total)
{
	char line[64];
	int n;

	if (f->progress_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 "\n", done, total);
	/* A reader that went away loses nothing of the file. */
	if (write(f->progress_fd, line, (size_t)n) < 0)
		f->progress_fd = -1;
}

static int on_progress(void *userdata, curl_off_t total, curl_off_t done, curl_off_t ut,
		       curl_off_t un)
{
	struct fetch *f = userdata;
	long long now = now_ms();

	(void)ut;
	(void)un;
	if (now - f->progress_at >= PROGRESS_EVERY_MS && done > 0) {
		f->progress_at = now;
		report(f, (uint64_t)done, total > 0 ? (uint64_t)total : 0);
	}
	if ((uint64_t)done != f->bytes_then || !f->byte_at) {
		f->bytes_then = (uint64_t)done;
		f->byte_at = now;
	} else if (now - f->byte_at >= f->stall_ms) {
		f->stalled = true;
		return 1;
	}
	return 0;
}

/* The sentence for what went wrong, after "URL: ". */
static int say_failure(const struct fetch *f, CURL *curl, CURLcode code, const char *detail,
		       long timeout, long stall)
{
	long status = 0;

	(void)curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	fprintf(stderr, "%s: ", f->url);
	switch (code) {
	case CURLE_TFTP_NOTFOUND:
		fputs("the TFTP server has no such file\n", stderr);
		return NMBL_FETCH_NOT_FOUND;
	case CURLE_HTTP_RETURNED_ERROR:
		if (status == 404 || status == 410) {
			fprintf(stderr, "the HTTP server has no such file (%ld)\n", status);
			return NMBL_FETCH_NOT_FOUND;
		}
		fprintf(stderr, "the HTTP server answered %ld\n", status);
		return NMBL_FETCH_FAILED;
	case CURLE_REMOTE_ACCESS_DENIED:
	case CURLE_TFTP_PERM:
		fputs("the server refused to send it\n", stderr);
		return NMBL_FETCH_FAILED;
	case CURLE_WRITE_ERROR:
		if (f->write_errno == EFBIG)
			fprintf(stderr, "larger than the %" PRIu64 " bytes allowed\n", f->max);
		else
			fprintf(stderr, "cannot keep it: %s\n", strerror(f->write_errno));
		return NMBL_FETCH_FAILED;
	case CURLE_FILESIZE_EXCEEDED:
		fprintf(stderr, "larger than the %" PRIu64 " bytes allowed\n", f->max);
		return NMBL_FETCH_FAILED;
	case CURLE_ABORTED_BY_CALLBACK:
		if (!f->stalled)
			break;
		if (f->written > 0)
			fprintf(stderr, "the server stopped sending for %ld s after %" PRIu64
				" bytes\n", stall, f->written);
		else
			fprintf(stderr, "the server did not answer within %ld s\n", stall);
		return NMBL_FETCH_FAILED;
	case CURLE_OPERATION_TIMEDOUT:
		if (f->written > 0)
			fprintf(stderr, "not received whole within %ld s (%" PRIu64 " bytes)\n",
				timeout, f->written);
		else
			fprintf(stderr, "the server did not answer within %ld s\n", timeout);
		return NMBL_FETCH_FAILED;
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
		fprintf(stderr, "the server stopped in the middle, after %" PRIu64 " bytes\n",
			f->written);
		return NMBL_FETCH_FAILED;
	case CURLE_COULDNT_CONNECT:
		fputs("cannot connect to the server\n", stderr);
		return NMBL_FETCH_FAILED;
	case CURLE_COULDNT_RESOLVE_HOST:
		fputs("cannot find the server's address\n", stderr);
		return NMBL_FETCH_FAILED;
	case CURLE_PEER_FAILED_VERIFICATION:
		fputs("the server's certificate is not one the image trusts\n", stderr);
		return NMBL_FETCH_FAILED;
	case CURLE_UNSUPPORTED_PROTOCOL:
		fputs("only tftp://, http:// and https:// are read (and no redirect from HTTPS "
		      "to HTTP)\n", stderr);
		return NMBL_FETCH_FAILED;
	default:
		break;
	}
	fprintf(stderr, "%s%s%s\n", curl_easy_strerror(code), *detail ? ": " : "", detail);
	return NMBL_FETCH_FAILED;
}

static int fetch(struct fetch *f, const char *ca_file, long timeout, long stall)
{
	char detail[CURL_ERROR_SIZE] = "";
	bool https = strncasecmp(f->url, "https:", 6) == 0;
	CURLcode code;
	CURL *curl;
	int r = NMBL_FETCH_FAILED;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "%s: cannot start libcurl\n", f->url);
		return NMBL_FETCH_FAILED;
	}
	curl = curl_easy_init();
	if (!curl)
		goto out;
	if (https && !ca_file) {
		fprintf(stderr, "%s: no certificates to check an HTTPS server with\n", f->url);
		goto out;
	}
	code = curl_easy_setopt(curl, CURLOPT_URL, f->url);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "tftp,http,https");
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR,
					https ? "https" : "http,https");
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_USERAGENT, "nmbl/" NMBL_VERSION);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_WRITEDATA, f);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_XFERINFODATA, f);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)f->max);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout);
	/* A server that accepts and never answers is a stall too. */
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, stall);
	if (code == CURLE_OK)
		code = curl_easy_setopt(curl, CURLOPT_TFTP_BLKSIZE, (long)TFTP_BLOCK);
	if (code == CURLE_OK && ca_file)
		code = curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file);
	if (code != CURLE_OK) {
		fprintf(stderr, "%s: %s\n", f->url, curl_easy_strerror(code));
		goto out;
	}
	code = curl_easy_perform(curl);
	if (code != CURLE_OK) {
		r = say_failure(f, curl, code, detail, timeout, stall);
		goto out;
	}
	report(f, f->written, f->written);
	r = 0;
out:
	curl_easy_cleanup(curl);
	curl_global_cleanup();
	return r;
}

static bool parse_number(const char *s, uint64_t max, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > max)
		return false;
	*ret = v;
	return true;
}

static int usage(void)
{
	fputs("usage: nmbl-fetch [--max-size BYTES] [--timeout SECONDS] [--stall SECONDS]\n"
	      "                  [--ca-file FILE] [--progress-fd FD] URL > FILE\n", stderr);
	return NMBL_FETCH_USAGE;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "max-size", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 't' },
		{ "stall", required_argument, NULL, 's' },
		{ "ca-file", required_argument, NULL, 'c' },
		{ "progress-fd", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct fetch f = { .max = NMBL_FETCH_MAX_DEFAULT, .progress_fd = -1 };
	uint64_t timeout = NMBL_FETCH_TIMEOUT_DEFAULT, stall = NMBL_FETCH_STALL_DEFAULT, fd;
	const char *ca_file = NULL;
	struct stat st;
	int c;

	/* What parses the network's bytes is no process its user may trace
	 * or read the memory of: exec set it dumpable again, whatever the
	 * caller had set before. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		fprintf(stderr, "nmbl-fetch: cannot make itself undumpable: %s\n", strerror(errno));
		return NMBL_FETCH_FAILED;
	}
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (!parse_number(optarg, INT64_MAX, &f.max))
				return usage();
			break;
		case 't':
			if (!parse_number(optarg, 86400, &timeout) || timeout == 0)
				return usage();
			break;
		case 's':
			if (!parse_number(optarg, 86400, &stall) || stall == 0)
				return usage();
			break;
		case 'c':
			ca_file = optarg;
			break;
		case 'p':
			if (!parse_number(optarg, INT32_MAX, &fd))
				return usage();
			f.progress_fd = (int)fd;
			break;
		case 'h':
			usage();
			return 0;
		default:
			return usage();
		}
	}
	if (optind != argc - 1)
		return usage();
	f.url = argv[optind];
	/* A terminal or a pipe would take what a network boot cannot use
	 * whole: a file, or nothing. */
	if (fstat(STDOUT_FILENO, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "%s: standard output is not a file\n", f.url);
		return NMBL_FETCH_USAGE;
	}
	f.stall_ms = (long long)stall * 1000;
	return fetch(&f, ca_file, (long)timeout, (long)stall);
}
